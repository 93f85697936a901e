"""The planner inside the app: a researcher's plan request becomes a PlanJob run off the request.

``plan_job_create`` validates and stores the request, and after its commit schedules the run
where background work runs (annotation/jobs.py, ``settings.EVALAPP_BACKGROUND_WORK``): a Celery task with a broker, a
background thread of the web process without one, inline in the test suite.
``plan_job_run`` reads the study's data as a bundle (its metric labels; its human labels:
imported human ratings and judgements so far), runs ``protocol.plan.plan`` and writes the
progress (replays done / to run) after every replay and the result at the end. A job whose
process died while it ran (no heartbeat for ``PLAN_STALE_AFTER``) is resumed by the periodic
sweep (``plan_jobs_resume``), and marked failed after ``PLAN_MAX_ATTEMPTS`` runs.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from protocol import adaptive
from protocol.plan import REPLAYS_FUTILITY, Assumptions, bundle_kinds, grid_of, has_paired_labels, plan
from protocol.preferences import human_labels, metric_labels
from protocol.study_settings import SETTINGS

from .. import jobs
from ..models import Metric, PlanJob, Study
from ..selectors.exports import study_bundle
from ..serving import protocol_state
from ..serving.metric_labels import combined_names

log = logging.getLogger(__name__)
MAX_GRID_POINTS = 12
MAX_REPS = 5
# One replay takes seconds; a run silent this long has lost its process (a restart, a kill).
PLAN_STALE_AFTER = timedelta(minutes=5)
PLAN_MAX_ATTEMPTS = 3


def plan_job_create(*, study: Study, user, use_human: bool, assumptions: dict, budgets: Sequence[int | None],
                    batches: Sequence[int], gammas: Sequence[float], reps: int, policy: str,
                    throughput: float, futilities: Sequence[float] | None = None) -> PlanJob:
    """Store a plan request (ValueError naming the problem) and schedule it after commit.

    use_human: use the study's human labels (imported ratings, judgements): the assumptions
    are then fitted from them, and pairs with a human label on every item are replayed on
    them; otherwise (or when it has none) the planner simulates every annotator from
    ``assumptions`` (Assumptions.to_dict() values). budgets: None = every comparison; in a
    study of the ranking design, the most labels per comparison of its sort (None = all items),
    replayed from the study's initial order (its metric's order before the protocol starts); in
    a study of the active design its budget (None = none: the design runs to its stop), replayed
    from that order at the study's confidence, resolution and labels per comparison.
    futilities: futility levels side by side (None: the study's ``futility``), each within the
    setting's bounds; the all-pairs protocol replays them with the study's combined metrics
    (``combined_metrics``), so a plan shows labels and correctness for the study's settings.
    The ranking design's replay runs the study's futility level with the metric alone, each
    pair run decided alone (so without the level prior, which the app's sort can use), the
    active design's the default level with the metric alone.
    """
    design = study.design
    if design.plan_replay is None:
        raise ValueError(design.plan_refusal)
    if study.metric_id is None:
        raise ValueError("the study has no metric: the planner simulates the protocol on the metric's labels")
    assumptions = Assumptions.from_dict({**assumptions, "source": "edited"}).to_dict()
    budgets, batches, gammas = list(budgets), list(batches), list(gammas)
    if not (budgets and batches and gammas):
        raise ValueError("give at least one budget (or none for every comparison), batch size and γ")
    replays_settings = design.plan_replay == "all_pairs"
    replays_futility = design.plan_replay in REPLAYS_FUTILITY
    futilities = list(futilities) if futilities is not None else [study.futility]
    if not futilities:
        raise ValueError("give at least one futility level")
    if not replays_settings and futilities != [study.futility]:
        replayed = "the study's" if replays_futility else "the default"
        raise ValueError(f"the {design.title} design's plan replays {replayed} futility level: plan futility "
                         "levels for a study of all pairs")
    problems = [SETTINGS["futility"].problem(level, "a futility level") for level in futilities]
    if any(problems):
        raise ValueError(next(p for p in problems if p))
    points = len(budgets) * len(batches) * len(gammas) * len(futilities)
    if points > MAX_GRID_POINTS:
        raise ValueError(f"{points} grid points; at most {MAX_GRID_POINTS} per plan")
    if any(b is not None and b < 1 for b in budgets) or any(k < 1 for k in batches):
        raise ValueError("budgets and batch sizes must be positive")
    if any(not 0 < g < 1 for g in gammas):
        raise ValueError("γ must lie strictly between 0 and 1")
    if not 1 <= reps <= MAX_REPS:
        raise ValueError(f"repetitions must be between 1 and {MAX_REPS}")
    if policy not in adaptive.POLICIES:
        raise ValueError(f"policy must be one of {', '.join(adaptive.POLICIES)}")
    if design.plan_policy and policy != design.plan_policy:
        raise ValueError(f"the {design.title} design runs the {design.plan_policy} policy: plan it with that policy")
    if not throughput > 0:
        raise ValueError("throughput must be a positive number of judgements per hour")
    job = PlanJob(study=study, created_by=user if getattr(user, "is_authenticated", False) else None, params={
        "use_human": bool(use_human), "assumptions": assumptions, "budgets": budgets, "batches": batches, "gammas": gammas,
        "reps": reps, "policy": policy, "throughput": float(throughput),
        # The study's decision rule (the policy is the researcher's to compare here).
        "rule": protocol_state.decision_options(study)["rule"],
        "futility_prior": protocol_state.decision_options(study)["futility_prior"],
        "design": design.plan_replay, "start": list(study.ranking_order) or None,
        # what the active design's replay takes from the study (the grid gives batch, γ, budget)
        "active": {name: getattr(study.active_settings, name) for name in ("confidence", "resolution", "max_labels")},
        # the study's futility levels (the all-pairs protocol's and the ranking's pair runs') and
        # combined metrics (the all-pairs protocol's)
        **({"futilities": [float(level) for level in futilities]} if replays_futility else {}),
        **({"combined": [name for name in combined_names(study)[0] if name != study.metric.name]}
           if replays_settings else {})})
    try:
        job.full_clean()
    except ValidationError as error:
        raise ValueError("; ".join(error.messages)) from None
    with transaction.atomic():
        job.save()
        transaction.on_commit(lambda: jobs.plan_job(job.pk))
    return job


def plan_job_run(*, job_id: int) -> PlanJob:
    """Run a queued (or interrupted) job to the end; a finished one is left as it is."""
    job = PlanJob.objects.select_related("study", "study__metric").get(pk=job_id)
    if job.status in (PlanJob.Status.DONE, PlanJob.Status.FAILED):
        return job
    PlanJob.objects.filter(pk=job_id).update(status=PlanJob.Status.RUNNING, attempts=F("attempts") + 1,
                                             heartbeat_at=timezone.now())
    params, study = job.params, job.study
    try:
        if study.metric is None:
            raise ValueError("the study has no metric")
        bundle = study_bundle(study=study)
        metric = metric_labels(bundle, study.metric.name, eps=study.metric.tie_margin)
        margins = dict(Metric.objects.filter(study=study).values_list("name", "tie_margin"))
        # a job stored before futility levels and combined metrics planned neither
        missing = [name for name in params.get("combined", []) if name not in margins]
        if missing:
            raise ValueError(f"the study combines metric {missing[0]!r}, which it no longer has")
        extra = [metric_labels(bundle, name, eps=margins[name]) for name in params.get("combined", [])]
        human = human_labels(bundle) if params["use_human"] else {}
        # the stated kinds of prompt hold over assumptions fitted from human labels too
        assumptions = Assumptions.from_dict(params["assumptions"])

        def progress(done: int, total: int) -> None:
            PlanJob.objects.filter(pk=job_id).update(done=done, total=total, heartbeat_at=timezone.now())

        result = plan(metric, human, grid=grid_of(params["budgets"], params["batches"], params["gammas"],
                                                  params.get("futilities", [None])), extra_metrics=extra,
                      assumptions=None if has_paired_labels(metric, human) else assumptions,
                      kinds_axis=assumptions, kinds=bundle_kinds(bundle),
                      reps=int(params["reps"]), policy=params["policy"], seed=study.protocol_seed,
                      # a job stored before the study had a rule planned the paper's
                      progress=progress, rule=params.get("rule", "bayes"),
                      # a job stored before the level prior planned without it
                      futility_prior=params.get("futility_prior", False),
                      # a job stored before ranking plans planned all pairs
                      design=params.get("design", "all_pairs"), start=params.get("start"),
                      # a job stored before active plans had none
                      active=job.active_settings)
    except Exception as error:  # stored for the researcher; the page shows it
        log.exception("plan job %s failed", job_id)
        PlanJob.objects.filter(pk=job_id).update(status=PlanJob.Status.FAILED, error=str(error) or repr(error),
                                                 finished_at=timezone.now())
    else:
        PlanJob.objects.filter(pk=job_id).update(status=PlanJob.Status.DONE, result=result.summary(details=True),
                                                 finished_at=timezone.now())
    return PlanJob.objects.get(pk=job_id)


def plan_jobs_resume(*, now=None) -> int:
    """Resume every queued or running job silent for ``PLAN_STALE_AFTER`` (its process ended),
    or mark it failed once it has been started ``PLAN_MAX_ATTEMPTS`` times. Returns the jobs
    resumed. Part of the periodic sweep (services.runtime.protocol_sweep)."""
    cutoff = (now or timezone.now()) - PLAN_STALE_AFTER
    stalled = PlanJob.objects.filter(status__in=[PlanJob.Status.QUEUED, PlanJob.Status.RUNNING]).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff))
    resumed = 0
    for job in stalled:
        if job.attempts >= PLAN_MAX_ATTEMPTS:
            PlanJob.objects.filter(pk=job.pk).update(
                status=PlanJob.Status.FAILED, finished_at=timezone.now(),
                error=f"the plan stopped {job.attempts} times without finishing (its process ended); "
                      "start a new plan")
            continue
        # Claim it (compare-and-set on the heartbeat) so two sweeps do not both resume it.
        if PlanJob.objects.filter(pk=job.pk, heartbeat_at=job.heartbeat_at).update(heartbeat_at=timezone.now()):
            jobs.plan_job(job.pk)
            resumed += 1
    return resumed
