"""The experiment spec: its schema, component sections, legacy upgrade, validator, field metadata and presets (no torch)."""
