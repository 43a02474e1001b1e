"""Sweeps: the model, the expansion of one submission into experiments, and statistics over seeds."""
