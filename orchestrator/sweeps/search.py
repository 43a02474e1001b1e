"""A search over a sweep's configurations: the one place where it decides, at the round boundary
where one of its runs reports (``reported``, called by the round task after the round is recorded,
and when a run fails or is cancelled). Decisions are ``decide``'s (Optuna's pruners and sampler);
this module applies them to runs.

- A configuration (a ``Trial``) has one run per seed. A run that reaches a decision round (a rung)
  is paused there until its other live seeds reach it; then the configuration's value there
  (``values``: seeds and the last k evaluated rounds) is judged.
- **Stopped** is paused, not thrown away: its runs keep their round state and its log says
  "Stopped by the search at rung 2 (rank 5 of 8)". A **promotion** (ASHA: it ranks in once more
  configurations reached its rung) resumes the same runs: the next round loads the published round
  state, no round is trained twice. A user may resume a stopped run by hand: its configuration then
  runs to its full length outside the search (``manual``).
- When nothing of the search is left to run and no configuration ran its full length, the best
  stopped one at the highest rung is promoted, so a search always ends with a configuration trained
  in full. TPE creates its next configuration whenever fewer than its parallel share are running.

Decisions of one sweep are serialised on its row (``select_for_update``; SQLite's writers queue
anyway), so seeds reporting at once on two workers see each other's pauses.
"""

from __future__ import annotations

from django.db import transaction
from django.dispatch import receiver

from fedweb_engine.spec.schema import SpecError
from orchestrator.experiments.launch import checked_spec, create_experiment
from orchestrator.live import events
from orchestrator.models import ACTIVE, Experiment, Status, Sweep, Trial, status_changed
from orchestrator.sweeps import decide, values
from orchestrator.sweeps.expand import describe, with_values
from orchestrator.sweeps.models import SEED_FIELD, TrialState
from orchestrator.sweeps.search_options import SearchOptions

BY = "the search"
GONE = (Status.FAILED, Status.CANCELLED, Status.CRASHED)


def options_of(sweep: Sweep) -> SearchOptions:
    return SearchOptions.stored(sweep.search)


def rule_of(sweep: Sweep, total: int) -> decide.Rule:
    o = options_of(sweep)
    return decide.Rule(sweep.stopping, o.first_rung, o.eta, o.direction, total)


def rung_number(rule: decide.Rule, step: int) -> int:
    """1 for the first decision round, 2 for the next..."""
    return decide.decision_rounds(rule).index(step) + 1


def records(sweep: Sweep) -> list[decide.Record]:
    return [record(t) for t in sweep.trials.order_by("number")]


def record(trial: Trial) -> decide.Record:
    steps = {int(s): v for s, v in trial.values.items()}
    return decide.Record(trial.number, trial.state, steps, trial.value, trial.params)


def reported(experiment: Experiment) -> bool:
    """A run of a search reported a round, failed or was cancelled: decide what follows. True when
    the run is held at a rung (paused while its configuration still runs: it goes on soon)."""
    if experiment.sweep_id is None or experiment.trial_id is None:
        return False
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().filter(pk=experiment.sweep_id).first()
        trial = Trial.objects.filter(pk=experiment.trial_id).first()
        if sweep is None or trial is None or not sweep.is_search:
            return False
        experiment.refresh_from_db()
        changed = _judge(sweep, trial, experiment)
        changed = _keep_going(sweep) or changed
        trial.refresh_from_db()
    experiment.refresh_from_db()
    if changed:
        events.publish_search(sweep.pk)
    return experiment.status == Status.PAUSED and trial.state == TrialState.RUNNING


@receiver(status_changed, dispatch_uid="fedweb-search-run-gone")
def _run_gone(sender, experiment: Experiment, **kwargs) -> None:
    # A seed that failed or was cancelled: a decision waiting for it goes ahead without it.
    if experiment.trial_id is not None and experiment.status in GONE:
        reported(experiment)


def _judge(sweep: Sweep, trial: Trial, run: Experiment) -> bool:
    alive = [r for r in trial.runs.order_by("pk") if r.status not in GONE]
    if trial.state in (TrialState.RUNNING, TrialState.STOPPED) and not alive:
        trial.state = TrialState.FAILED  # every seed failed or was cancelled
        trial.save(update_fields=["state"])
        return True
    if trial.state == TrialState.STOPPED and run.status in ACTIVE:
        trial.state = TrialState.MANUAL  # resumed by hand (a promotion makes the trial running first)
        trial.save(update_fields=["state"])
        run.log("info", "Resumed by hand: this configuration runs to its full length, outside the search")
        return True
    if trial.state not in (TrialState.RUNNING, TrialState.MANUAL):
        return False
    options = options_of(sweep)
    total = max(r.total_rounds for r in alive)
    if all(r.status == Status.COMPLETED for r in alive):
        trial.value = values.value_at([r.pk for r in alive], options.target, total, options.last_k)
        if trial.state == TrialState.RUNNING:
            trial.state = TrialState.COMPLETED  # one resumed by hand stays "manual", now with its value
        trial.save(update_fields=["value", "state"])
        return True
    if trial.state == TrialState.MANUAL:
        return False
    rule = rule_of(sweep, total)
    step = next((s for s in decide.decision_rounds(rule) if s > (trial.rung or 0)), None)
    if step is None:
        return False  # past its last rung: it runs to its end
    behind = [r for r in alive if r.current_round < step]
    if behind:
        if run in alive and run.current_round == step and run.status in ACTIVE and run.pause(by=BY):
            there = len(alive) - len(behind)
            run.log("info", f"Waits at rung {rung_number(rule, step)} (round {step}) for its other seeds "
                            f"({there} of {len(alive)} there)")  # fmt: skip
            return True
        return False
    if str(step) not in trial.values:  # its value there, as every decision at this rung will read it
        value = values.value_at([r.pk for r in alive], options.target, step, options.last_k)
        trial.values = {**trial.values, str(step): value}
        trial.save(update_fields=["values"])
    if sweep.stopping == "asha" and (below := _below(sweep, step)):
        if run.current_round == step and run.status in ACTIVE and run.pause(by=BY):
            there = sweep.trials.filter(state=TrialState.RUNNING, values__has_key=str(step)).count()
            run.log("info", f"Waits at rung {rung_number(rule, step)} (round {step}) for the configurations still "
                            f"below it ({there} there, {below} on their way)")  # fmt: skip
        return True
    _decide(sweep, trial, alive, rule, step)
    return True


def _below(sweep: Sweep, step: int) -> int:
    """How many running configurations have not reached decision round ``step`` yet."""
    return sum(
        1 for t in sweep.trials.filter(state=TrialState.RUNNING) if str(step) not in t.values and (t.rung or 0) < step
    )


def _settle(sweep: Sweep) -> bool:
    """ASHA judges a rung once no running configuration is still below it: then every configuration
    waiting there is judged against all that reached it (with a grid's known configurations, this is
    synchronous successive halving; TPE's, made one by one, meet a rung alone: asynchronous)."""
    if sweep.stopping != "asha":
        return False
    for trial in sweep.trials.filter(state=TrialState.RUNNING).order_by("number"):
        runs = [r for r in trial.runs.order_by("pk") if r.status not in GONE]
        rule = rule_of(sweep, max((r.total_rounds for r in runs), default=1))
        step = next((s for s in decide.decision_rounds(rule) if s > (trial.rung or 0)), None)
        at = step is not None and str(step) in trial.values and all(r.current_round >= step for r in runs)
        if runs and at and not _below(sweep, step):
            _decide(sweep, trial, runs, rule, step)
            return True
    return False


def _decide(sweep: Sweep, trial: Trial, alive: list[Experiment], rule: decide.Rule, step: int) -> None:
    """Judge ``trial`` at decision round ``step`` (its value there is stored): stop it (its runs
    paused where they are) or let it go on (its runs paused at the rung resume)."""
    all_records = records(sweep)
    stop = decide.should_stop(rule, all_records, record(trial), step)
    rank, of = decide.rank(all_records, trial.number, step, rule.direction)
    where = f"rung {rung_number(rule, step)} (round {step}, rank {rank} of {of})"
    trial.rung, trial.rank, trial.ranked = step, rank, of
    if stop:
        trial.state = TrialState.STOPPED
        trial.save(update_fields=["state", "rung", "rank", "ranked"])
        for r in alive:
            r.pause(by=BY)
            r.log("info", f"Stopped by the search at {where}: paused with its round state; "
                          "a promotion or a resume continues it")  # fmt: skip
    else:
        trial.save(update_fields=["rung", "rank", "ranked"])
        for r in alive:
            if r.status == Status.PAUSED and r.current_round == step:
                r.resume(by=BY, keep_place=True)
            r.log("info", f"Continues past {where}")
    if not sweep.cancelled:
        _promote(sweep, step)


def _promote(sweep: Sweep, step: int) -> None:
    """ASHA: every configuration stopped at rung ``step`` that ranks in now is promoted."""
    if sweep.stopping != "asha":
        return
    for trial in sweep.trials.filter(state=TrialState.STOPPED, rung=step).order_by("number"):
        runs = [r for r in trial.runs.order_by("pk") if r.status not in GONE]
        rule = rule_of(sweep, max((r.total_rounds for r in runs), default=step + 1))
        all_records = records(sweep)
        if runs and decide.promotable(rule, all_records, record(trial), step):
            rank, of = decide.rank(all_records, trial.number, step, rule.direction)
            _run_on(trial, runs, f"Promoted by the search at rung {rung_number(rule, step)} (round {step}, "
                                 f"now rank {rank} of {of})", rank=rank, of=of)  # fmt: skip


def _run_on(trial: Trial, runs: list[Experiment], why: str, *, rank: int, of: int) -> None:
    trial.state, trial.rank, trial.ranked = TrialState.RUNNING, rank, of
    trial.save(update_fields=["state", "rank", "ranked"])
    for r in runs:
        r.log("info", f"{why}: continues from its round state")
        r.resume(by=BY, keep_place=True)


def _keep_going(sweep: Sweep) -> bool:
    """New TPE configurations while the budget allows; the last resort promotion when nothing runs."""
    if sweep.cancelled:
        return False
    made = False
    while _settle(sweep):  # a rung may have filled: a configuration below it stopped, failed or arrived
        made = True
    made = (_fill(sweep) if sweep.mode == "tpe" else False) or made
    if Experiment.objects.filter(sweep=sweep, status__in=ACTIVE).exists():
        return made
    if sweep.trials.filter(state__in=[TrialState.COMPLETED, TrialState.MANUAL]).exists():
        return made
    stopped = [
        t for t in sweep.trials.filter(state=TrialState.STOPPED, runs__status=Status.PAUSED).distinct()
        if t.rung is not None
    ]  # fmt: skip
    if not stopped:
        return made
    direction = options_of(sweep).direction
    top = max(t.rung for t in stopped)
    at_top = [record(t) for t in stopped if t.rung == top]
    chosen = min(at_top, key=lambda r: (decide.rank(at_top, r.number, top, direction)[0], r.number))
    trial = next(t for t in stopped if t.number == chosen.number)
    runs = [r for r in trial.runs.order_by("pk") if r.status == Status.PAUSED]
    _run_on(trial, runs, f"Promoted by the search at round {top}: nothing else is left to run, and it is "
                         "the best of the highest rung", rank=1, of=len(at_top))  # fmt: skip
    return True


def seeds_of(sweep: Sweep) -> list:
    return sweep.axes.get(SEED_FIELD) or [sweep.base_spec.get(SEED_FIELD, 0)]


def parallel(sweep: Sweep) -> int:
    """TPE's configurations in flight: as many as the worker cap holds seeds of (one without a cap),
    so each new one learns from as many finished ones as the fleet allows."""
    return max(1, (sweep.max_workers or 0) // len(seeds_of(sweep)))


def begin(sweep: Sweep) -> None:
    """Start a TPE search: its first configurations (the others come as they finish)."""
    with transaction.atomic():
        Sweep.objects.select_for_update().filter(pk=sweep.pk).first()
        _fill(sweep)


def _fill(sweep: Sweep) -> bool:
    options = options_of(sweep)
    trials = list(sweep.trials.order_by("number"))
    running = sum(1 for t in trials if t.state == TrialState.RUNNING)
    made = False
    while len(trials) < (options.budget or 0) and running < parallel(sweep):
        params = decide.suggest(options.ranges, [record(t) for t in trials], direction=options.direction,
                                seed=sweep.sample_seed, budget=options.budget)  # fmt: skip
        trial = new_trial(sweep, len(trials), params)
        trials.append(trial)
        running += trial.state == TrialState.RUNNING
        made = True
    return made


def new_trial(sweep: Sweep, number: int, params: dict, *, start: bool = True) -> Trial:
    """A configuration and its runs, one per seed, queued with ``start``. A sampled configuration no
    spec accepts is a failed trial that says why (its ranges were checked at their ends only)."""
    trial = Trial.objects.create(sweep=sweep, number=number, params=params)
    try:
        specs = [(s, checked_spec(with_values(sweep.base_spec, {**params, SEED_FIELD: s}))) for s in seeds_of(sweep)]
    except SpecError as e:
        trial.state, trial.error = TrialState.FAILED, str(e)
        trial.save(update_fields=["state", "error"])
        return trial
    for seed, spec in specs:
        create_experiment(
            owner=sweep.owner, spec=spec, start=start, sweep=sweep, trial=trial,
            name=f"{sweep.name} · {describe({**params, SEED_FIELD: seed})}", description=sweep.description,
            tags=sweep.tags, team=sweep.team, visibility=sweep.visibility,
        )  # fmt: skip
    return trial
