"""Reads of a study as a whole: the home list, progress, its labels and pairs for the protocol,
judgements, members, its bundle and planner jobs."""
from __future__ import annotations

import dataclasses

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from protocol.judges import JudgeVerdict, judge_stats
from protocol.plan import hours_to_finish
from protocol.preferences import canonical_pair, combine_verdicts, preferences_from_scores

from ..access import studies_visible_to, study_roles_for_user
from ..models import (AnnotatorExclusion, Comparison, HumanScore, Judgement, Metric, MetricPreference, MetricScore,
                      Output, PairState, PlanJob, Study, StudyMembership)
from .quality import counted_judgements


# A pair with an open round (or a filled one about to be closed) is work still to serve.
ACTIVE_PAIR_STATUSES = ("open", "filled")


def study_list_for_home(*, user) -> list[Study]:
    """The studies ``user`` may know of (access.studies_visible_to; drafts only for their
    researchers), with the counts the front page shows.

    Each study carries ``can_annotate``, ``can_research`` (access.study_roles_for_user) and
    ``work_left`` (False once no pair has an open or filled round: nothing more to serve).
    """

    roles = study_roles_for_user(user)
    studies = Study.objects.filter(pk__in=studies_visible_to(user).values("pk")).annotate(
        system_count=Count("systems", distinct=True),
        item_count=Count("items", distinct=True),
        active_pairs=Count("pair_states", filter=Q(pair_states__status__in=ACTIVE_PAIR_STATUSES), distinct=True),
    ).order_by("name")
    visible = []
    for study in studies:
        role = roles(study)
        if study.status == Study.Status.DRAFT and not role.research:
            continue
        study.can_annotate, study.can_research = role.annotate, role.research
        study.work_left = study.active_pairs > 0
        visible.append(study)
    return visible


def study_progress(*, study: Study) -> dict:
    """Budget, judgements and decided pairs of one study (counted judgements only;
    ``lost_judgements``: judgements of excluded workers, spent but no longer counted)."""
    judgements = counted_judgements(study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    pairs = PairState.objects.filter(study=study).aggregate(total=Count("id"),
                                                            decided=Count("id", filter=Q(status="decided")))
    return {
        "budget": study.budget,
        "judgements": judgements.count(),
        "live_judgements": live,
        "budget_left": max(study.budget - live - study.protocol_lost_judgements, 0),
        "lost_judgements": study.protocol_lost_judgements,
        "pairs": pairs["total"],
        "pairs_decided": pairs["decided"],
    }


def comparison_sample_texts(*, study: Study) -> tuple[list[int], list[list[str]], list[list[str]]]:
    """Comparisons whose two outputs have >= 2 samples, with the sample texts in sample order.

    Returns (comparison ids (n,), first system's samples [n][k1], second's [n][k2]).
    """

    texts: dict[tuple[int, int], list[str]] = {}
    rows = Output.objects.filter(item__study=study).order_by("item_id", "system_id", "sample")
    for item_id, system_id, text in rows.values_list("item_id", "system_id", "text").iterator():
        texts.setdefault((item_id, system_id), []).append(text)
    ids, first, second = [], [], []
    comparisons = Comparison.objects.filter(study=study).order_by("id")
    for pk, item_id, first_id, second_id in comparisons.values_list("id", "item_id", "first_id", "second_id"):
        a, b = texts.get((item_id, first_id), []), texts.get((item_id, second_id), [])
        if len(a) >= 2 and len(b) >= 2:
            ids.append(pk)
            first.append(a)
            second.append(b)
    return ids, first, second


def study_pair_ids(*, study: Study) -> dict[tuple[str, str], tuple[int, int]]:
    """(first name, second name) -> (first id, second id) for every pair with comparisons."""

    rows = (Comparison.objects.filter(study=study)
            .values_list("first__name", "second__name", "first_id", "second_id").distinct())
    return {(a, b): (i, j) for a, b, i, j in rows}


def study_pair_capacities(*, study: Study) -> dict[tuple[str, str], int]:
    """(first, second) -> human judgements the pair can receive (comparisons x ratings)."""

    rows = (Comparison.objects.filter(study=study).values("first__name", "second__name")
            .annotate(n=Count("id")).values_list("first__name", "second__name", "n"))
    return {(a, b): n * study.ratings_per_item for a, b, n in rows}


def study_metric_labels(*, study: Study, metric=None) -> dict[tuple[str, str], dict[str, int]]:
    """(first, second) -> {item external id: the metric's preference}; {} without a metric.

    ``metric`` defaults to the study's protocol metric. Scalar metrics give
    sign(s_first - s_second) with the metric's tie margin (docs/formulas.md §1).
    """

    metric = study.metric if metric is None else metric
    if metric is None:
        return {}
    labels: dict[tuple[str, str], dict[str, int]] = {}
    if metric.kind == Metric.Kind.PREFERENCE:
        rows = MetricPreference.objects.filter(metric=metric).values_list(
            "first__name", "second__name", "item__external_id", "value")
        verdicts: dict[tuple[str, str], dict[str, list[int]]] = {}
        for a, b, item, value in rows.iterator():
            verdicts.setdefault((a, b), {}).setdefault(item, []).append(value)
        # Both position orders of a judge are two rows; one function decides what they say.
        return {pair: {item: combine_verdicts(values) for item, values in by_item.items()}
                for pair, by_item in verdicts.items()}
    scores = dict(
        ((item, system), value)
        for item, system, value in MetricScore.objects.filter(metric=metric).values_list(
            "output__item__external_id", "output__system__name", "value").iterator()
    )
    comparisons = [
        (item, a, b)
        for item, a, b in Comparison.objects.filter(study=study).values_list(
            "item__external_id", "first__name", "second__name").iterator()
        if (item, a) in scores and (item, b) in scores
    ]
    values = preferences_from_scores([scores[(i, a)] for i, a, _ in comparisons],
                                     [scores[(i, b)] for i, _, b in comparisons], eps=metric.tie_margin)
    for (item, a, b), value in zip(comparisons, values.tolist()):
        labels.setdefault((a, b), {})[item] = value
    return labels


def study_judgement_labels(*, study: Study) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(first, second) -> [(item external id, value)] of every counted judgement, oldest first."""
    rows = counted_judgements(study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value")
    labels: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a, b, item, value in rows.iterator():
        labels.setdefault((a, b), []).append((item, value))
    return labels


def study_draw_chances(*, study: Study) -> dict[tuple[str, str], dict[str, float]]:
    """(first, second) -> {item external id: chance of its first counted judgement's draw}, for
    items drawn by separability-weighted or stratified choice (Assignment.draw_probability)."""
    rows = counted_judgements(study=study).filter(assignment__draw_probability__isnull=False).order_by("id") \
        .values_list("comparison__first__name", "comparison__second__name", "comparison__item__external_id",
                     "assignment__draw_probability")
    chances: dict[tuple[str, str], dict[str, float]] = {}
    for a, b, item, chance in rows.iterator():
        chances.setdefault((a, b), {}).setdefault(item, chance)
    return chances


def study_judgements(*, study: Study, first: str | None = None, second: str | None = None,
                     annotator: str | None = None, platform: str | None = None) -> QuerySet[Judgement]:
    """The study's judgements, oldest first, optionally of one pair and/or one annotator.

    Every judgement, checks, repeats and excluded workers' included; each row carries
    ``excluded`` (its worker is excluded now) and its ``kind``: counted rows are kind "real"
    and not excluded (``counted_judgements``).

    ``first``/``second`` name the pair's systems in either order (one alone, or the same twice:
    every pair of that system);
    ``annotator`` is an Annotator's external id, ``platform`` its platform.
    """

    excluded = AnnotatorExclusion.objects.filter(study=study, annotator_id=OuterRef("annotator_id"), excluded=True)
    rows = Judgement.objects.filter(comparison__study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator", "assignment").annotate(
        excluded=Exists(excluded)).order_by("id")
    if first is not None and second is not None and first != second:
        a, b, _ = canonical_pair(first, second)
        rows = rows.filter(comparison__first__name=a, comparison__second__name=b)
    elif first is not None or second is not None:  # one system: its pairs with every other
        system = first if first is not None else second
        rows = rows.filter(Q(comparison__first__name=system) | Q(comparison__second__name=system))
    if annotator is not None:
        rows = rows.filter(annotator__external_id=annotator)
    if platform is not None:
        rows = rows.filter(annotator__platform=platform)
    return rows


def study_members(*, study: Study) -> QuerySet:
    """The study's memberships with their users, by username."""

    return StudyMembership.objects.filter(study=study).select_related("user").order_by("user__username")


def study_plan_jobs(*, study: Study, limit: int = 10) -> list:
    """The study's latest plan jobs, newest first."""

    return list(PlanJob.objects.filter(study=study).order_by("-created_at", "-id")[:limit])


def study_human_label_count(*, study: Study) -> int:
    """Judgements plus imported human ratings: what the planner can estimate its assumptions from."""

    return (Judgement.objects.filter(comparison__study=study).count()
            + HumanScore.objects.filter(output__item__study=study).count())


def plan_job_rows(*, job) -> list[dict]:
    """A finished job's plans with the time to finish at the job's throughput (hours)."""

    if not job.result:
        return []
    throughput = float(job.params["throughput"])
    return [{**row, "hours": hours_to_finish(row["expected_annotations"], throughput)}
            for row in job.result["plans"]]


def study_judges(*, study: Study) -> list[dict]:
    """Each LLM judge of the study (a preference metric, split by the judge its rows name):
    position bias and agreement with the counted human judgements (protocol.judges)."""
    human_sum: dict[tuple[str, str, str], list[int]] = {}
    for (a, b), labels in study_judgement_labels(study=study).items():
        for item, value in labels:
            human_sum.setdefault((item, a, b), []).append(value)
    human = {key: sum(values) / len(values) for key, values in human_sum.items()}
    verdicts: dict[tuple[str, str], list[JudgeVerdict]] = {}
    rows = MetricPreference.objects.filter(metric__study=study).values_list(
        "metric__name", "judge", "item__external_id", "first__name", "second__name", "value", "order")
    for metric, judge, item, a, b, value, order in rows.iterator():
        verdicts.setdefault((metric, judge), []).append(JudgeVerdict(item, a, b, value, order))
    return [{"metric": metric, "judge": judge, **dataclasses.asdict(judge_stats(found, human))}
            for (metric, judge), found in sorted(verdicts.items())]
