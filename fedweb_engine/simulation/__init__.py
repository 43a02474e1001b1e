"""The simulation loop: one federated round at a time."""
