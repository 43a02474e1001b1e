"""``python -m benchmarks NAME [--size small|full] [--device D] [--precision P] [--real]``.

Runs one benchmark (or ``all``), writes ``benchmarks/results/<name>-<size>-<devicekind>.json``
(``$FEDWEB_BENCH_RESULTS`` overrides the folder) and prints a table row per benchmark. ``recovery``,
``socket_close``, ``viewers``, ``ingest_live``, ``e2e_overhead`` and ``scheduling --real`` start real processes on
the Redis at ``$REDIS_URL``; ``all`` leaves those out, ``distributed`` (minutes of fresh processes), ``client_log``
(which times no engine), ``client_state`` (minutes of disk I/O) and ``web_startup`` (fresh web processes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from benchmarks import (
    algorithms,
    client_log,
    client_state,
    distributed,
    e2e_overhead,
    engine_overhead,
    flute_femnist,
    ingest_live,
    memory_varying,
    pfl_cifar10,
    recovery,
    round_state,
    runs_table,
    scheduling,
    search,
    socket_close,
    tff_accelerators,
    viewers,
    vs_plain,
    web_startup,
)
from benchmarks.common import TABLE_HEADER, Options, table_row, write_result

BENCHMARKS: dict[str, Callable[[Options], dict[str, Any]]] = {
    "tff_accelerators": tff_accelerators.run,
    "flute_femnist": flute_femnist.run,
    "pfl_cifar10": pfl_cifar10.run,
    "memory_varying": memory_varying.run,
    "vs_plain": vs_plain.run,
    "engine_overhead": engine_overhead.run,
    "round_state": round_state.run,
    "client_state": client_state.run,
    "scheduling": scheduling.run,
    "distributed": distributed.run,
    "recovery": recovery.run,
    "socket_close": socket_close.run,
    "viewers": viewers.run,
    "client_log": client_log.run,
    "ingest_live": ingest_live.run,
    "e2e_overhead": e2e_overhead.run,
    "algorithms": algorithms.run,
    "search": search.run,
    "web_startup": web_startup.run,
    "runs_table": runs_table.run,
}
# Left out of `all`: they need a Redis and start worker or daphne processes, or (client_log, algorithms,
# search, runs_table) time no engine, or (client_state, runs_table) write tens of GB of rows over minutes.
NOT_IN_ALL = {
    "distributed", "recovery", "socket_close", "viewers", "client_log", "e2e_overhead", "client_state", "ingest_live",
    "algorithms", "search", "web_startup", "runs_table",
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=[*BENCHMARKS, "all"])
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or cuda:all")
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    parser.add_argument("--real", action="store_true", help="scheduling only: run against a live FedWeb")
    args = parser.parse_args(argv)
    opts = Options(size=args.size, device=args.device, precision=args.precision, real=args.real)
    names = [n for n in BENCHMARKS if n not in NOT_IN_ALL] if args.name == "all" else [args.name]
    print(TABLE_HEADER, flush=True)
    for name in names:
        record = BENCHMARKS[name](opts)
        path = write_result(f"{name}_real" if opts.real and name == "scheduling" else name, opts, record)
        print(table_row({**record, "benchmark": name, "size": opts.size}), flush=True)
        print(f"  -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
