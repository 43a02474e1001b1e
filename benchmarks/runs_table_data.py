"""The runs table benchmark's data: completed (and some running, failed) runs with realistic
accuracy curves, written straight into a freshly migrated database (SQLite ``executemany``,
PostgreSQL ``COPY``), and each run's summary row and "to target" steps folded from its rounds by
FedWeb's own code (``run_summary.fold_all``), as the round task would have kept them.

Every run is in team "lab" except a tenth, private to other users: the measured user, a member of
"lab", reads ~90% of the runs through the same permission filter the page applies to anyone.
"""

from __future__ import annotations

import math
import random
import sys
import time
from datetime import timedelta

CLIENTS = ("fedavg", "fedprox", "scaffold", "feddyn")
LRS = (0.01, 0.03, 0.05, 0.1, 0.2)
ALPHAS = (0.1, 0.5, 1.0)
CODECS = ("fp32", "fp16", "int8", "topk")
SEEDS = 5
USERS = 20


def _spec(client: str, lr: float, alpha: float, codec: str, seed: int, rounds: int) -> dict:
    from fedweb_engine.spec.schema import Spec

    raw = {"seed": seed, "rounds": rounds, "data": {"dataset": "digits", "num_clients": 100, "alpha": alpha},
           "model": {"name": "cnn"}, "algorithm": {"client": {"name": client}}, "local": {"lr": lr},
           "communication": {"uplink": {"name": codec}}, "compute": {"device": "cpu"}}  # fmt: skip
    return Spec.from_dict(raw).to_dict()


def _curve(rng: random.Random, rounds: int, ceiling: float) -> list[float]:
    tau = rng.uniform(rounds / 20, rounds / 4)
    return [min(1.0, max(0.0, ceiling * (1 - math.exp(-r / tau)) + rng.gauss(0, 0.008))) for r in range(1, rounds + 1)]


def _round_rows(rng: random.Random, rounds: int, ceiling: float, nbytes: int, dp: bool):
    """(RoundMetric values, the fold's round dicts) of one run."""
    accuracy = _curve(rng, rounds, ceiling)
    epsilon = 0.0
    for r in range(1, rounds + 1):
        seconds = max(0.05, rng.gauss(1.0, 0.1))
        epsilon = epsilon + 0.01 if dp else None
        acc = accuracy[r - 1]
        values = {
            "round": r, "participants": 10, "completed": 10, "stragglers": 0, "dropped": 0, "train_loss": 2.3 * (1 - acc) + 0.05,
            "test_loss": 2.3 * (1 - acc) + 0.1, "test_accuracy": acc, "bytes_down": nbytes, "bytes_up": nbytes,
            "bytes_formula": 2 * nbytes, "round_seconds": seconds, "train_seconds": seconds * 0.8, "samples": 2000,
            "rss_mb": 600.0, "threads": 8, "device": "cpu", "dp_epsilon": epsilon, "update_norm": 1.0 / r,
        }  # fmt: skip
        yield values


def generate(experiments: int, rounds: int, seed: int = 0) -> dict:
    """Fill the database Django points at; returns the measured user's name and the counts."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from accounts.models import Role, Team
    from orchestrator.experiments.models import Experiment
    from orchestrator.experiments.records import RoundMetric
    from orchestrator.runs.run_summary import RunSummary, TargetStep, fold_all

    rng = random.Random(seed)
    User = get_user_model()
    users = [User.objects.create_user(f"u{i}", password="bench-password") for i in range(USERS)]
    lab = Team.create_with_owner("lab", users[0])
    for u in users[1:]:
        lab.add_member(u, Role.MEMBER)
    reader = User.objects.create_user("reader", password="bench-password")
    lab.add_member(reader, Role.MEMBER)
    specs: dict[tuple, dict] = {}
    now, t0 = timezone.now(), time.monotonic()
    runs, keys = [], []
    for i in range(experiments):
        key = (rng.choice(CLIENTS), rng.choice(LRS), rng.choice(ALPHAS), rng.choice(CODECS), rng.randrange(SEEDS))
        spec = specs.get(key) or specs.setdefault(key, _spec(*key, rounds=rounds))
        keys.append(key)
        private = rng.random() < 0.1
        status = "completed" if rng.random() < 0.9 else rng.choice(["running", "failed", "cancelled"])
        tags = ["baseline"] if rng.random() < 0.2 else (["ablation", f"batch-{i % 7}"] if rng.random() < 0.3 else [])
        runs.append(Experiment(
            owner=users[i % USERS], team=None if private else lab, visibility="private" if private else "team",
            name=f"run {i} {key[0]} lr={key[1]}", description=f"a generated run of {key[0]} with alpha {key[2]}",
            tags=tags, spec=spec, status=status, current_round=rounds, total_rounds=rounds,
            created=now - timedelta(minutes=rng.randrange(0, 90 * 24 * 60)), queue="cpu",
        ))  # fmt: skip
    # bulk_create skips Experiment.save (which would parse each spec again): the specs are already normal.
    created = Experiment.objects.bulk_create(runs, batch_size=1000)
    if not created[0].pk:  # SQLite before 3.35 returns no ids from a bulk insert
        created = list(Experiment.objects.order_by("pk"))
    columns = [f.column for f in RoundMetric._meta.concrete_fields if f.name != "id"]
    steps_total = 0
    for start in range(0, len(created), 200):
        chunk = created[start : start + 200]
        summaries, steps, metric_rows = [], [], []
        for e, key in zip(chunk, keys[start : start + 200], strict=True):
            ceiling = {"fedavg": 0.9, "fedprox": 0.91, "scaffold": 0.95, "feddyn": 0.93}[key[0]] - 0.2 * abs(
                key[1] - 0.1
            )
            nbytes = {"fp32": 400_000, "fp16": 200_000, "int8": 100_000, "topk": 40_000}[key[3]]
            values = list(_round_rows(rng, rounds, ceiling, nbytes, dp=rng.random() < 0.1))
            state, run_steps = fold_all(values)
            summaries.append(RunSummary(experiment_id=e.pk, last_round=state["last_round"], custom={},
                                        **{k: state[k] for k in state if k not in ("last_round", "custom")}))  # fmt: skip
            steps += [TargetStep(experiment_id=e.pk, **s) for s in run_steps]
            metric_rows += [_row(columns, e.pk, v) for v in values]
        with transaction.atomic():
            _insert_rounds(connection, RoundMetric._meta.db_table, columns, metric_rows)
            RunSummary.objects.bulk_create(summaries, batch_size=1000)
            TargetStep.objects.bulk_create(steps, batch_size=2000)
        steps_total += len(steps)
        done = start + len(chunk)
        print(f"  generated {done}/{len(created)} runs ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    return {"reader": reader.username, "experiments": len(created), "rounds": len(created) * rounds,
            "target_steps": steps_total, "generate_seconds": round(time.monotonic() - t0, 1)}  # fmt: skip


def _row(columns: list[str], experiment_id: int, values: dict) -> tuple:
    fixed = {"experiment_id": experiment_id, "worker": "bench", "recorded": None, "claimed": None}
    return tuple(fixed[c] if c in fixed else values.get(c) for c in columns)


def _insert_rounds(connection, table: str, columns: list[str], rows: list[tuple]) -> None:
    from django.utils import timezone

    stamp = timezone.now()
    rows = [tuple(stamp if c == "recorded" else v for c, v in zip(columns, r, strict=True)) for r in rows]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            names = ", ".join(f'"{c}"' for c in columns)
            with cursor.cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)
        return
    with connection.cursor() as cursor:
        marks = ", ".join("%s" for _ in columns)
        cursor.executemany(f'INSERT INTO "{table}" ({", ".join(columns)}) VALUES ({marks})', rows)
