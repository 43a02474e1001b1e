"""Memory and thread probes, read every round."""
