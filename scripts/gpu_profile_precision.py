"""Where a cnn-14-4 round's GPU time goes, per precision (the first GPU run found bf16/fp16 slower than fp32).

python scripts/gpu_profile_precision.py fp32 bf16
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import Options, apply_options
from benchmarks.tff_accelerators import SIZES
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.presets import preset_spec

for precision in sys.argv[1:]:
    size = SIZES["full"]
    spec = preset_spec("tff-accelerators").replace(
        rounds=6,
        data={"num_clients": size["num_clients"], "mean_samples": size["mean_samples"]},
        participation={"clients_per_round": size["clients"]},
        evaluation={"every": 1_000_000},
    )
    spec = apply_options(spec, Options(size="full", device="cuda", precision=precision), client_group_size=16)
    sim = Simulation(spec)
    for _ in range(3):
        sim.next_round()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            r = sim.next_round()
        torch.cuda.synchronize()
    print(f"=== {precision}: {r.round_seconds:.3f} s/round")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=70))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10, max_name_column_width=70))
    sim.close()
