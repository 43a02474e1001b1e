#!/usr/bin/env bash
# The first-GPU checklist (docs/gpu.md) as one command with a time budget, for a lent GPU machine
# whose own python3 has torch with CUDA (no Django there: only the engine and the benchmarks run).
#   OUT=/some/folder BUDGET=520 bash scripts/gpu_check.sh
#   ONLY="memory_varying flute_femnist" OUT=... bash scripts/gpu_check.sh   # just these steps
# A lent machine gives a session 15 minutes in all (start included), so one call of ~9 minutes is the
# most a session gets: the 2026-11-27 run (benchmarks/results/gpu_checklist-cuda.json) lists what fit.
# Steps run in order of value; each gets min(its own limit, what is left of BUDGET seconds). After
# every step the results and logs so far are packed into $OUT/gpu.tgz, so a run cut short still
# brings back what it measured. $OUT/summary.txt: one line per step (rc, seconds).
set -u
OUT=${OUT:-/tmp/gpu_out}; BUDGET=${BUDGET:-520}; DEVICE=${DEVICE:-cuda}; SIZE=${SIZE:-full}; PY=${PY:-python3}
WORK=$(mktemp -d); RES=$WORK/results; LOGS=$WORK/logs; mkdir -p "$RES" "$LOGS" "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 FEDWEB_BENCH_RESULTS=$RES FEDWEB_DATA_DIR=$WORK/data
DEADLINE=$(( $(date +%s) + BUDGET ))
pack() { tar -czf "$OUT/gpu.tgz.tmp" -C "$WORK" results logs && mv "$OUT/gpu.tgz.tmp" "$OUT/gpu.tgz"; }
step() {  # step NAME MAX_SECONDS COMMAND...
  local name=$1 max=$2; shift 2
  if [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]]; then return; fi
  local left=$(( DEADLINE - $(date +%s) ))
  if (( left < 20 )); then echo "$name skipped (budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  local t=$(( max < left ? max : left )) start=$(date +%s%N)
  timeout -k 5 "$t" "$@" >"$LOGS/$name.log" 2>&1; local rc=$?
  printf '%-22s rc=%-3s %6.1fs (limit %ss)\n' "$name" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))e-3" "$t" | tee -a "$OUT/summary.txt"
  tail -n 3 "$LOGS/$name.log" | cut -c1-300 | sed 's/^/    /'
  pack
}
lm_spec() {  # lm_spec TRAINING: a 14M-parameter LM, 32 clients a round
  cat <<JSON
{"rounds": 4, "seed": 1,
 "data": {"name": "tokens", "options": {"mean_samples": 16, "seq_len": 64}, "num_clients": 64, "partition": "natural"},
 "model": {"name": "lm14m"}, "participation": {"clients_per_round": 32},
 "local": {"epochs": 1, "batch_size": 8, "lr": 0.01}, "evaluation": {"batch_size": 32},
 "compute": {"device": "$DEVICE", "training": "$1"}}
JSON
}
lm_spec vectorized >"$WORK/lm_vec.json"; lm_spec sequential >"$WORK/lm_seq.json"

step info 30 bash -c "nvidia-smi; nvidia-smi -L; $PY -c 'import torch,sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'"
step host_fallback 60 $PY -c "from fedweb_engine.simulation import runner; from fedweb_engine.spec.schema import Spec; runner.fits_on = lambda *a, **k: False; s = runner.Simulation(Spec.from_dict({'rounds': 3, 'compute': {'device': '$DEVICE'}})); print([r.train_loss for r in s.run()], s.replicas[0].data.x_train.is_pinned())"
step tff_fp32 90 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE"
step memory_varying 240 $PY -m benchmarks memory_varying --size $SIZE --device "$DEVICE"
step tff_bf16 60 env FEDWEB_BENCH_RESULTS=$RES/bf16 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE" --precision bf16
step tff_fp16 60 env FEDWEB_BENCH_RESULTS=$RES/fp16 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE" --precision fp16
step lm_vectorized 60 $PY -m fedweb_engine run "$WORK/lm_vec.json" --quiet
step lm_sequential 60 $PY -m fedweb_engine run "$WORK/lm_seq.json" --quiet
step flute_femnist 200 $PY -m benchmarks flute_femnist --size $SIZE --device "$DEVICE"
step pfl_cifar10 90 $PY -m benchmarks pfl_cifar10 --size $SIZE --device "$DEVICE"
step round_state 60 $PY -m benchmarks round_state --size $SIZE --device "$DEVICE"
step isolation_leak 60 $PY benchmarks/isolation_leak.py --device "$DEVICE"
step scheduling 60 $PY -m benchmarks scheduling --size $SIZE --device "$DEVICE"
step vs_plain 120 $PY -m benchmarks vs_plain --size $SIZE --device "$DEVICE"
step engine_overhead 150 $PY -m benchmarks engine_overhead --size $SIZE --device "$DEVICE"
pack
