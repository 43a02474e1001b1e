"""Components: the registry, plugin discovery, provenance, the built-ins and the checks run when a component registers."""
