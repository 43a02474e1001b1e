"""What a run keeps on disk: its round states, checkpoints and per-client rows, how much they take,
and what retention keeps of them."""
