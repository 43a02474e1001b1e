from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from fedweb_engine.spec.presets import preset_spec
from orchestrator.experiments.launch import create_experiment
from orchestrator.experiments.models import Experiment, Status
from workers.rounds import run_inline

# Presets scaled down (fewer rounds and clients, 8×8 digits, small models) so the finished demos
# run inline in seconds on a laptop CPU before `make run` starts the server.
_SMALL_DIGITS = {
    "data": {"num_clients": 20, "options": {"image_size": 8}},
    "model": {"name": "mlp", "options": {"hidden": 32}},
}
FINISHED_DEMOS = {
    "quickstart": {"rounds": 8, **_SMALL_DIGITS, "participation": {"clients_per_round": 4}, "local": {"epochs": 1}},
    "fedprox-stragglers": {"rounds": 6, "local": {"epochs": 2}},
    "varying-participants": {
        "rounds": 6,
        "data": {"num_clients": 60, "options": {"num_classes": 10, "mean_samples": 20}},
        "participation": {"schedule": [12, 18, 9, 15, 20, 10]},
        "local": {"epochs": 1},
        "evaluation": {"every": 1},
    },
}
# The real quickstart (the CNN on 28×28 digits), long enough to watch live for a minute or two
# after `make run` prints the URL. It runs in the background: any other run's round goes before its
# next one, so a newcomer's first experiment waits at most for the demo round in flight (seconds).
RUNNING_DEMO = ("quickstart", {"rounds": 200})
RUNNING_DEMO_NAME = "Demo: live quickstart"


def describe(preset: str, spec) -> str:
    """What the scaled-down demo actually runs, read from its spec (the preset's own description
    names the full-size run: more rounds, clients and a bigger model)."""
    cohort = spec.participation.schedule or spec.participation.clients_per_round
    cohort_text = f"cohorts of {min(cohort)}–{max(cohort)}" if isinstance(cohort, list) else f"{cohort} per round"
    side = getattr(spec.data.options, "image_size", None)
    size = f"{side}×{side} " if side else ""
    epochs = "epoch" if spec.local.epochs == 1 else "epochs"
    client = spec.algorithm.client
    clients = (
        ""
        if client.name == "fedavg"
        else f" with {client.name} clients" + (f" (μ = {spec.algorithm.mu:g})" if client.name == "fedprox" else "")
    )
    return (
        f"The '{preset}' preset scaled down: {spec.rounds} rounds of {spec.algorithm.name}{clients}, {size}{spec.data.name} "
        f"over {spec.data.num_clients} clients ({cohort_text}), the {spec.model.name} model, "
        f"{spec.local.epochs} local {epochs}."
    )


class Command(BaseCommand):
    help = "Create the demo user (demo/demo) and demo experiments. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--no-queue", action="store_true", help="don't queue the running demo (no worker)")

    def handle(self, *args, **opts):
        user = self._demo_user()
        for preset, changes in FINISHED_DEMOS.items():
            self._finished_demo(user, preset, changes)
        if not opts["no_queue"]:
            self._running_demo(user)
        self.stdout.write(self.style.SUCCESS("Demo ready. Log in as demo / demo"))

    def _demo_user(self):
        user, _ = get_user_model().objects.get_or_create(username="demo")
        user.set_password("demo")
        user.save()
        return user

    def _finished_demo(self, user, preset, changes):
        name = f"Demo: {preset} (scaled down)"
        if Experiment.objects.filter(owner=user, name=name, status=Status.COMPLETED).exists():
            return
        Experiment.objects.filter(owner=user, name=name).delete()  # a half-run demo from an interrupted call
        spec = preset_spec(preset).replace(compute={"device": "cpu"}, **changes)
        experiment = create_experiment(
            owner=user, name=name, description=describe(preset, spec), tags=["demo", preset], spec=spec.to_dict(),
            start=False,
        )  # fmt: skip
        self.stdout.write(f"Running '{name}' ({spec.rounds} rounds) inline ...")
        experiment.start(by="demo", enqueue=False)
        run_inline(experiment, log_line=lambda level, message: None)

    def _running_demo(self, user):
        experiment = queue_live_demo(user)
        if experiment is not None:
            self.stdout.write(
                f"Queued '{experiment.name}' ({experiment.total_rounds} rounds, in the background) on '{experiment.queue}'"
            )


def queue_live_demo(user) -> Experiment | None:
    """Queue the live demo for ``user`` as a background run (None if it exists already): it yields
    to every other run of its queue (orchestrator.fleet.policies.order), so it never holds the
    worker a user's first experiment needs."""
    preset, changes = RUNNING_DEMO
    if Experiment.objects.filter(owner=user, name=RUNNING_DEMO_NAME).exists():
        return None
    spec = preset_spec(preset).replace(compute={"device": "cpu"}, **changes)
    return create_experiment(
        owner=user,
        name=RUNNING_DEMO_NAME,
        description="The quickstart preset, live. It runs in the background: every other run's round goes "
        "before its next one, so it never delays yours.",
        tags=["demo", preset],
        spec=spec.to_dict(),
        background=True,
        by="demo",
    )
