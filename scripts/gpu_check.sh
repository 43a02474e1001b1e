#!/usr/bin/env bash
# What a lent GPU machine should run next (docs/gpu.md), as one command with a time budget. The
# machine's own python3 has torch with CUDA; the steps that start a Celery worker and daphne also
# need the web stack, carried as wheels in .whl (scripts/gpu_wheels.sh builds it here; the device
# README says how to carry it): when .whl is there, they are installed into /tmp/site first.
#   OUT=/some/folder BUDGET=520 bash scripts/gpu_check.sh
#   ONLY="memory_varying flute_femnist" OUT=... bash scripts/gpu_check.sh   # just these steps
# A lent machine gives a session 15 minutes in all (start included), so one call of ~9 minutes is the
# most a session gets: the 2026-11-27 run (benchmarks/results/gpu_checklist-cuda.json) lists what fit.
# Steps run in order of value (issue 34's list first, then the figures of the first run to redo);
# each gets min(its own limit, what is left of BUDGET seconds), so a session runs a prefix and the
# next one passes ONLY= with the rest. After every step the results and logs so far are packed into
# $OUT/gpu.tgz, so a run cut short still brings back what it measured. $OUT/summary.txt: one line
# per step (rc, seconds).
set -u
OUT=${OUT:-/tmp/gpu_out}; BUDGET=${BUDGET:-520}; DEVICE=${DEVICE:-cuda}; SIZE=${SIZE:-full}; PY=${PY:-python3}
WORK=$(mktemp -d); RES=$WORK/results; LOGS=$WORK/logs; mkdir -p "$RES" "$LOGS" "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 FEDWEB_BENCH_RESULTS=$RES FEDWEB_DATA_DIR=$WORK/data
if [[ -d .whl ]] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site PATH=$PWD/.whl/bin:$PATH
fi
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
# 4,096 clients of the 14M-parameter LM in one group: [G, P] buffers of ~230 GB, past any one GPU
# (the API's memory bound is lifted for this step, or the spec would be refused before it runs).
OVERSIZED='{"model": {"name": "lm14m"}, "data": {"name": "tokens", "options": {"mean_samples": 4, "seq_len": 64}, "num_clients": 4096, "partition": "natural"}, "participation": {"clients_per_round": 4096}, "local": {"batch_size": 4}, "compute": {"client_group_size": 4096}}'

step info 30 bash -c "nvidia-smi; nvidia-smi -L; $PY -c 'import torch,sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'"
# Issue 34's list, in its order of value.
step engine_overhead 300 env FEDWEB_BENCH_REPEATS=1 $PY -m benchmarks engine_overhead --size $SIZE --device "$DEVICE"
step memory_varying 240 $PY -m benchmarks memory_varying --size $SIZE --device "$DEVICE"
step flute_femnist 300 $PY -m benchmarks flute_femnist --size $SIZE --device "$DEVICE"
step celery_worker 180 $PY scripts/worker_check.py --device "$DEVICE" --rounds 3 --timeout 150
step oom_retry 240 env FEDWEB_MAX_ROUND_MEMORY_GPU=$((10**15)) $PY scripts/worker_check.py --device "$DEVICE" --rounds 1 --timeout 210 --spec "$OVERSIZED" --expect-log "retrying with client group size"
step isolation_leak 120 $PY benchmarks/isolation_leak.py --device "$DEVICE"
step distributed 240 $PY -m benchmarks distributed --size $SIZE --device "$DEVICE"
# The first run's figures, to measure again (part 2 of issue 34 changes what they measure).
step tff_fp32 90 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE"
step tff_bf16 60 env FEDWEB_BENCH_RESULTS=$RES/bf16 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE" --precision bf16
step pfl_cifar10 90 $PY -m benchmarks pfl_cifar10 --size $SIZE --device "$DEVICE"
step host_fallback 60 $PY -c "from fedweb_engine.simulation import runner; from fedweb_engine.spec.schema import Spec; runner.fits_on = lambda *a, **k: False; s = runner.Simulation(Spec.from_dict({'rounds': 3, 'compute': {'device': '$DEVICE'}})); print([r.train_loss for r in s.run()], s.replicas[0].data.x_train.is_pinned())"
step tff_fp16 60 env FEDWEB_BENCH_RESULTS=$RES/fp16 $PY -m benchmarks tff_accelerators --size $SIZE --device "$DEVICE" --precision fp16
step lm_vectorized 60 $PY -m fedweb_engine run "$WORK/lm_vec.json" --quiet
step lm_sequential 60 $PY -m fedweb_engine run "$WORK/lm_seq.json" --quiet
step round_state 60 $PY -m benchmarks round_state --size $SIZE --device "$DEVICE"
step scheduling 60 $PY -m benchmarks scheduling --size $SIZE --device "$DEVICE"
step vs_plain 120 $PY -m benchmarks vs_plain --size $SIZE --device "$DEVICE"
pack
