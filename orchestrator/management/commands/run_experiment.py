import json
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from fedweb_engine.spec.schema import Spec, SpecError
from orchestrator.models import FINISHED, Experiment
from workers.progress import to_stdout
from workers.rounds import run_inline


class Command(BaseCommand):
    help = "Create an experiment from a spec JSON file and run it: on the Celery workers, or --inline here."

    def add_arguments(self, parser):
        parser.add_argument("spec", help="path to the experiment spec (JSON)")
        parser.add_argument("--inline", action="store_true", help="run the rounds in this process, without Celery")
        parser.add_argument("--name", help="experiment name (default: the file name)")
        parser.add_argument("--user", default="admin", help="owner's username (created if missing; default admin)")
        parser.add_argument("--wait", action="store_true", help="without --inline: wait until the experiment finishes")

    def handle(self, *args, **opts):
        spec = _read_spec(Path(opts["spec"]))
        owner, created = get_user_model().objects.get_or_create(username=opts["user"])
        if created:
            owner.set_unusable_password()
            owner.save()
        name = opts["name"] or Path(opts["spec"]).stem
        experiment = Experiment.objects.create(owner=owner, name=name, spec=spec.to_dict())
        self.stdout.write(f"Experiment #{experiment.pk} '{name}': {spec.rounds} rounds, owner {owner.username}")
        if opts["inline"]:
            return self._run_inline(experiment)
        experiment.start(by="run_experiment")
        self.stdout.write(f"Queued on '{experiment.queue}'; a worker serving that queue will run it.")
        if opts["wait"]:
            self._wait(experiment)

    def _run_inline(self, experiment):
        experiment.start(by="run_experiment --inline", enqueue=False)
        experiment = run_inline(experiment, log_line=to_stdout(), on_round=self._print_round)
        self._finish(experiment)

    def _print_round(self, metric):
        acc = "-" if metric.test_accuracy is None else f"{metric.test_accuracy:.4f}"
        loss = "-" if metric.test_loss is None else f"{metric.test_loss:.4f}"
        self.stdout.write(
            f"round {metric.round:4d}  test_loss {loss}  test_accuracy {acc}  {metric.round_seconds:.2f}s"
        )

    def _wait(self, experiment):
        last = 0
        while experiment.status not in FINISHED:
            time.sleep(0.2)  # short: a run's end is noticed within 0.2 s (the e2e_overhead benchmark times it)
            experiment.refresh_from_db()
            for metric in experiment.rounds.filter(round__gt=last).order_by("round"):
                self._print_round(metric)
                last = metric.round
        self._finish(experiment)

    def _finish(self, experiment):
        self.stdout.write(f"Experiment #{experiment.pk} {experiment.status} after {experiment.current_round} rounds")
        if experiment.status != "completed":
            raise CommandError(experiment.error or f"experiment ended {experiment.status}")


def _read_spec(path: Path) -> Spec:
    try:
        return Spec.from_dict(json.loads(path.read_text()))
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise CommandError(f"{path} is not valid JSON: {e}") from None
    except SpecError as e:
        raise CommandError(f"{path}: {e}") from None
