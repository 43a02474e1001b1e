"""What outlives a round: the round state, per-client state on disk, and checkpoints."""
