"""Experiments as the domain sees them: who may see them, the limits a new spec passes, what a run
leaves behind (records, rounds, summaries, the leak heuristic) and what a public link shows."""
