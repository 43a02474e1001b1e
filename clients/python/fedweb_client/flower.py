"""Report a Flower run to FedWeb: wrap any Message-API strategy (``flwr.serverapp.strategy``).

    from fedweb_client.flower import FedWebStrategy

    strategy = FedWebStrategy(FedAvg(fraction_train=0.5), url=..., token=..., name="flower-fedavg")
    result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=10)

Each round becomes a FedWeb round: the aggregated train metrics (``loss``/``train_loss`` is the
round's train loss, others ``train/<name>``), the aggregated evaluate metrics (``loss`` is the test
loss, ``accuracy``/``acc`` the test accuracy, others ``eval/<name>``), the server-side evaluation
(``server/<name>``, and its accuracy/loss when the clients reported none), the messages sent and the
replies received (participants, completed, dropped), the bytes of the arrays sent to and received
from the nodes (measured from the messages' ArrayRecords), and the round's wall time. Reports go
through ``fedweb_client``'s background sender: the strategy never waits on FedWeb.

Only this module imports flwr; ``import fedweb_client`` does not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

import fedweb_client

TRAIN_LOSS = ("train_loss", "loss")
TEST_LOSS = ("eval_loss", "test_loss", "loss")
TEST_ACCURACY = ("eval_acc", "eval_accuracy", "test_accuracy", "accuracy", "acc")


def array_bytes(message: Message) -> int:
    """Bytes of the arrays a message carries (every ArrayRecord of its content), as serialized for
    the wire (Flower's ``Array.data``: for numpy arrays the .npy bytes, header included)."""
    if message.has_error():
        return 0
    return sum(len(array.data) for record in message.content.array_records.values() for array in record.values())


def _scalars(record: MetricRecord | None) -> dict[str, float]:
    out = {}
    for key, value in (record or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = value
    return out


def _first(values: dict, names: Iterable[str]):
    for name in names:
        if name in values:
            return name, values[name]
    return None, None


class FedWebStrategy(Strategy):
    """A Message-API strategy that does what ``strategy`` does and reports each round to FedWeb.

    Pass ``run`` (from ``fedweb_client.init``), or the arguments of ``fedweb_client.init``
    (``url``, ``token``, ``name``, ``config``, ...). ``start`` finishes the run (or fails it if the
    strategy raises) unless ``finish=False``."""

    def __init__(self, strategy: Strategy, run: fedweb_client.Run | None = None, *, finish: bool = True, **init):
        self.strategy = strategy
        self.run = run if run is not None else fedweb_client.init(**init)
        self.finish = finish
        self._round: dict | None = None

    # --- what Strategy.start calls ------------------------------------------------------------

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        self._report()  # the previous round (and its server-side evaluation) is complete
        self._round = {"round": server_round, "start": time.perf_counter(), "metrics": {}}
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        self._count(sent=messages, participants=len(messages))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        ok = [m for m in replies if not m.has_error()]
        self._count(received=replies, completed=len(ok), dropped=self._round["participants"] - len(ok))
        arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        values = _scalars(metrics)
        name, loss = _first(values, TRAIN_LOSS)
        if name:
            self._round["metrics"]["train_loss"] = values.pop(name)
        self._round["metrics"].update({f"train/{k}": v for k, v in values.items()})
        return arrays, metrics

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        messages = list(self.strategy.configure_evaluate(server_round, arrays, config, grid))
        self._count(sent=messages)
        return messages

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        self._count(received=replies)
        metrics = self.strategy.aggregate_evaluate(server_round, replies)
        self._standard(_scalars(metrics), "eval")
        return metrics

    def summary(self) -> None:
        self.strategy.summary()

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        def server_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            metrics = evaluate_fn(server_round, arrays)
            if server_round >= 1 and self._round is not None:
                self._standard(_scalars(metrics), "server")
            return metrics

        try:
            result = super().start(
                grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config,
                server_evaluate if evaluate_fn else None,
            )  # fmt: skip
        except BaseException as e:
            self._report()
            if self.finish:
                self.run.fail(f"{type(e).__name__}: {e}")
            raise
        self._report()
        if self.finish:
            self.run.finish()
        return result

    # --- bookkeeping ----------------------------------------------------------------------------

    def _count(self, *, sent=(), received=(), **counts) -> None:
        r = self._round
        r["bytes_down"] = r.get("bytes_down", 0) + sum(array_bytes(m) for m in sent)
        r["bytes_up"] = r.get("bytes_up", 0) + sum(array_bytes(m) for m in received)
        r.update(counts)

    def _standard(self, values: dict, prefix: str) -> None:
        metrics = self._round["metrics"]
        for names, field in ((TEST_LOSS, "test_loss"), (TEST_ACCURACY, "test_accuracy")):
            name, value = _first(values, names)
            if name is not None:
                values.pop(name)
                if field not in metrics:  # the clients' evaluation first, the server's if they sent none
                    metrics[field] = value
                else:
                    metrics[f"{prefix}/{name}"] = value
        metrics.update({f"{prefix}/{k}": v for k, v in values.items()})

    def _report(self) -> None:
        r, self._round = self._round, None
        if r is None:
            return
        counts = {k: r.get(k, 0) for k in ("participants", "completed", "dropped", "bytes_up", "bytes_down")}
        self.run.log(r["round"], {**counts, "round_seconds": time.perf_counter() - r["start"], **r["metrics"]})
