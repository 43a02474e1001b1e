"""A progress bar for runs: round r/R, loss, accuracy and ETA on stderr (tqdm's widget in a notebook)."""

from __future__ import annotations

import sys

from tqdm import tqdm
from tqdm.auto import tqdm as auto_tqdm

from fedweb_engine.results.round_result import RoundResult

# tqdm's monitor thread would add a thread mid-run and make the per-round thread count look
# like it grows; the bar refreshes on every update anyway.
tqdm.monitor_interval = auto_tqdm.monitor_interval = 0


class ProgressBar:
    """Round r/R with the last loss, accuracy and cohort; ``notebook`` picks tqdm's widget in Jupyter."""

    def __init__(self, total: int, *, initial: int = 0, label: str = "", enabled: bool = True, notebook: bool = False):
        bar = auto_tqdm if notebook else tqdm
        self.bar = bar(
            total=total,
            initial=initial,
            desc=label,
            unit="round",
            file=sys.stderr,
            disable=not enabled,
            dynamic_ncols=True,
        )
        self.accuracy: float | None = None

    def update(self, result: RoundResult) -> None:
        if result.test_accuracy is not None:
            self.accuracy = result.test_accuracy
        postfix = {"loss": f"{result.train_loss:.4f}" if result.train_loss is not None else "-"}
        if self.accuracy is not None:
            postfix["acc"] = f"{self.accuracy:.3f}"
        postfix["clients"] = result.completed
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def note(self, text: str) -> None:
        """A line above the bar (a note for the run's log: what compute.compile decided, ...)."""
        tqdm.write(f"note: {text}", file=sys.stderr)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
