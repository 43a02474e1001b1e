"""Sweeps: the model, the expansion of one submission into experiments, statistics over seeds, and
searches (early stopping, TPE) that decide over its configurations as their rounds come in."""
