"""``manage.py disk``: what every experiment keeps under $FEDWEB_DATA_DIR/checkpoints, and with
``--prune`` what the retention settings let go (orchestrator/storage/disk_use.py)."""

from django.core.management.base import BaseCommand

from orchestrator.experiments.models import Experiment
from orchestrator.storage import disk_use as disk


def shown(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class Command(BaseCommand):
    help = "Report the disk use of every experiment; --prune deletes what the retention settings let go."

    def add_arguments(self, parser):
        parser.add_argument(
            "--prune",
            action="store_true",
            help="delete round states, checkpoints and per-client state past retention, and folders of "
            "deleted experiments (FEDWEB_ROUND_STATES_KEEP, CHECKPOINT_KEEP, FEDWEB_FINISHED_CHECKPOINTS_KEEP)",
        )

    def handle(self, *args, **opts):
        experiments = list(Experiment.objects.order_by("pk"))
        self._report(experiments)
        if opts["prune"]:
            self._prune(experiments)

    def _report(self, experiments) -> None:
        rows, total = [], 0
        for e in experiments:
            used = disk.usage(e.pk)
            total += used.total
            if used.total:
                rows.append((used.total, e, used))
        self.stdout.write(f"{'experiment':<40} {'status':<10} {'checkpoints':>16} {'round states':>16} "
                          f"{'client state':>13} {'other':>9} {'total':>10}")  # fmt: skip
        for _, e, u in sorted(rows, key=lambda r: -r[0]):
            name = f"#{e.pk} {e.name}"[:40]
            checkpoints = f"{shown(u.checkpoints)} ({u.counts['checkpoints']})"
            states = f"{shown(u.states)} ({u.counts['states']})"
            self.stdout.write(
                f"{name:<40} {e.status:<10} {checkpoints:>16} {states:>16} {shown(u.client_state):>13} "
                f"{shown(u.other):>9} {shown(u.total):>10}"
            )
        orphans = disk.orphan_folders({e.pk for e in experiments})
        orphaned = sum(disk.size_of(p) for p in orphans)
        if orphans:
            self.stdout.write(f"{len(orphans)} folder(s) of deleted experiments: {shown(orphaned)}")
        self.stdout.write(f"In all: {shown(total + orphaned)} ({total + orphaned:,} bytes)")

    def _prune(self, experiments) -> None:
        freed = 0
        for e in experiments:
            gone = disk.settle(e)
            if gone:
                self.stdout.write(f"#{e.pk} {e.name} ({e.status}): freed {shown(gone)}")
            freed += gone
        for folder in disk.orphan_folders({e.pk for e in experiments}):
            gone = disk.remove(folder)
            self.stdout.write(f"{folder.name} (a deleted experiment's folder): freed {shown(gone)}")
            freed += gone
        self.stdout.write(self.style.SUCCESS(f"Freed {shown(freed)} ({freed:,} bytes)"))
