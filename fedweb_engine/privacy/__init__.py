"""Differential privacy: DP-FedAvg's mechanism (clip, sum, noise)."""
