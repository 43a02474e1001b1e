"""Client training: plans, the trainers, flat buffers, vectorising, losses, devices, capacity and evaluation."""
