"""Reads of a study as a whole: the home list, progress, its labels and pairs for the protocol,
judgements, members, its bundle and planner jobs."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
from django.db.models import Avg, Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from protocol.judges import JudgeVerdict, judge_stats
from protocol.plan import hours_to_finish
from protocol.preferences import canonical_pair, preferences_from_scores, shared_items

from ..access import studies_visible_to, study_roles_for_user
from ..rubrics import criterion_metrics, lane_values, study_rubric
from ..serving.metric_labels import metric_label_source
from ..models import (AnnotatorExclusion, HumanScore, Item, Judgement, JudgeRun, JudgeUnparsed, MetricPreference,
                      Output, PairState, PlanJob, Study, StudyMembership, System)
from .quality import counted_judgements


# A pair with an open round (or a filled one about to be closed) is work still to serve.
ACTIVE_PAIR_STATUSES = ("open", "filled")


def _count_of_study(rows: QuerySet):
    """How many of ``rows`` belong to the outer study, as a subquery: joining systems, items
    and pairs in one query multiplied them (50 x 2,000 x 1,225 rows for one 50-system study)."""
    counted = rows.filter(study=OuterRef("pk")).order_by().values("study").annotate(n=Count("pk")).values("n")[:1]
    return Coalesce(Subquery(counted), 0)


def study_list_for_home(*, user) -> list[Study]:
    """The studies ``user`` may know of (access.studies_visible_to; drafts only for their
    researchers), with the counts the front page shows.

    Each study carries ``can_annotate``, ``can_research`` (access.study_roles_for_user) and
    ``work_left`` (False once no pair has an open or filled round: nothing more to serve).
    """

    roles = study_roles_for_user(user)
    studies = Study.objects.filter(pk__in=studies_visible_to(user).values("pk")).annotate(
        system_count=_count_of_study(System.objects.all()),
        item_count=_count_of_study(Item.objects.all()),
        active_pairs=_count_of_study(PairState.objects.filter(status__in=ACTIVE_PAIR_STATUSES)),
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


def study_design_kinds(*, study: Study) -> dict[str, str] | None:
    """Item id (external) -> its kind of prompt, when the study's design uses kinds
    (``PairDesign.uses_prompt_kinds``) and its items have them (a bundle's ``prompt_kind``);
    else None: the design runs without kinds."""
    if not study.design.uses_prompt_kinds:
        return None
    kinds = dict(Item.objects.filter(study=study).exclude(prompt_kind="").values_list("external_id", "prompt_kind"))
    return kinds or None


def study_prompt_kind_count(*, study: Study) -> int:
    """How many kinds of prompt the study's items carry (``Item.prompt_kind``; 0: none)."""
    return Item.objects.filter(study=study).exclude(prompt_kind="").values("prompt_kind").distinct().count()


def study_pair_item_counts(*, study: Study) -> dict[tuple[str, str], int]:
    """(first, second) -> the pair's items: items on which both systems have an output.

    From the outputs (an items x systems presence array, one matrix product), not from stored
    comparisons: a pair's comparison of an item is stored only once it is leased, judged or
    scored for separability.
    """
    rows = list(Output.objects.filter(item__study=study).values_list("item_id", "system_id").distinct())
    names = dict(System.objects.filter(study=study).values_list("pk", "name"))
    return shared_items([item for item, _ in rows], [names[system] for _, system in rows])


def pair_item_names(*, study: Study, first_id: int, second_id: int) -> list[str]:
    """External ids of the pair's items (both systems have an output there), by position."""

    def has_output(system_id: int):
        return Exists(Output.objects.filter(item=OuterRef("pk"), system_id=system_id))

    return list(Item.objects.filter(has_output(first_id), has_output(second_id), study=study)
                .order_by("position").values_list("external_id", flat=True))


def study_pair_capacities(*, study: Study) -> dict[tuple[str, str], int]:
    """(first, second) -> human judgements the pair can receive (its items x ratings)."""

    return {key: n * study.ratings_per_item for key, n in study_pair_item_counts(study=study).items()}


def comparison_sample_texts(*, study: Study) -> tuple[list[tuple[int, int, int, int]], list[list[str]],
                                                        list[list[str]]]:
    """The pairs' items whose two outputs have >= 2 samples, with the sample texts in sample order.

    Returns ((item id, first id, second id, pair id) (n,), first system's samples [n][k1],
    second's [n][k2]), by pair then item.
    """

    texts: dict[tuple[int, int], list[str]] = {}
    rows = Output.objects.filter(item__study=study).order_by("item_id", "system_id", "sample")
    for item_id, system_id, text in rows.values_list("item_id", "system_id", "text").iterator():
        texts.setdefault((item_id, system_id), []).append(text)
    sampled: dict[int, list[int]] = {}
    for (item_id, system_id), samples in texts.items():
        if len(samples) >= 2:
            sampled.setdefault(system_id, []).append(item_id)
    keys, first, second = [], [], []
    for pk, first_id, second_id in PairState.objects.filter(study=study).order_by("id").values_list(
            "id", "first_id", "second_id"):
        both = sorted(set(sampled.get(first_id, ())) & set(sampled.get(second_id, ())))
        for item_id in both:
            keys.append((item_id, first_id, second_id, pk))
            first.append(texts[(item_id, first_id)])
            second.append(texts[(item_id, second_id)])
    return keys, first, second


def study_metric_labels(*, study: Study, metric=None, pair: tuple[str, str] | None = None,
                        judged: Mapping[tuple[str, str], Iterable[str]] | None = None,
                        ) -> dict[tuple[str, str], dict[str, int]]:
    """(first, second) -> {item external id: the metric's preference}; {} without a metric.

    ``metric`` defaults to the study's protocol metric; ``pair`` (first, second) reads that
    pair's labels only (the pair page); ``judged`` ((first, second) -> item ids) only those
    pairs and items (the ones humans judged: Favi and SPA compare nothing else). Scalar metrics
    give sign(s_first - s_second) with the metric's tie margin (docs/formulas.md §1), computed
    from the scores as an items x systems array (one query, no row per comparison: 2.45 M
    comparisons at 50 systems x 2,000 items), for every item on which both systems have a
    score — the items where the pair has a comparison, since a score belongs to an output.
    """

    metric = study.metric if metric is None else metric
    if metric is None:
        return {}
    source = metric_label_source(study, metric, systems=pair)
    labels = {}
    for a, b in _pair_names(study, pair):
        if judged is not None and (a, b) not in judged:
            continue
        found = source.pair(a, b, None if judged is None else judged[(a, b)])
        if found:
            labels[(a, b)] = found
    return labels


def study_metric_counts(*, study: Study, metric=None) -> dict[tuple[str, str], np.ndarray]:
    """(first, second) -> the metric's (n+, n=, n-) over the pair's items, for every pair it
    labels at least once; {} without a metric. The counts of ``study_metric_labels``' labels,
    without building 2.45 M of them at 50 systems x 2,000 items (the sign test of the metric's
    decisions needs no more)."""
    metric = study.metric if metric is None else metric
    if metric is None:
        return {}
    names = _pair_names(study, None)
    counts = metric_label_source(study, metric).counts(names)
    return {pair: row for pair, row in zip(names, counts) if row.any()}


def _pair_names(study: Study, pair: tuple[str, str] | None) -> list[tuple[str, str]]:
    pairs = PairState.objects.filter(study=study)
    if pair is not None:
        pairs = pairs.filter(first__name=pair[0], second__name=pair[1])
    return list(pairs.values_list("first__name", "second__name"))


def study_judgement_labels(*, study: Study) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(first, second) -> [(item external id, value)] of every counted judgement, oldest first."""
    rows = counted_judgements(study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value")
    labels: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a, b, item, value in rows.iterator():
        labels.setdefault((a, b), []).append((item, value))
    return labels


def study_judgement_answers(*, study: Study, criteria) -> dict[tuple[str, str], list[tuple[str, dict[str, int]]]]:
    """(first, second) -> [(item external id, {criterion: value})] of every counted judgement,
    oldest first: what each protocol lane of the study's rubric (annotation/rubrics.py) counts."""
    rows = counted_judgements(study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value", "answers")
    labels: dict[tuple[str, str], list[tuple[str, dict[str, int]]]] = {}
    for a, b, item, value, answers in rows.iterator():
        labels.setdefault((a, b), []).append((item, lane_values(criteria=criteria, value=value, answers=answers)))
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


def study_rating_means(*, study: Study) -> dict[tuple[str, str], float]:
    """(item external id, system) -> the mean of the output's imported human ratings
    (HumanScore, e.g. SummEval's expert Likert scores), as protocol.preferences averages them."""
    rows = HumanScore.objects.filter(output__item__study=study).order_by().values(
        "output__item__external_id", "output__system__name").annotate(mean=Avg("value")).values_list(
        "output__item__external_id", "output__system__name", "mean")
    return {(item, system): float(mean) for item, system, mean in rows.iterator()}


def study_judges(*, study: Study) -> list[dict]:
    """Each LLM judge of the study (a preference metric, split by the judge its rows name):
    position bias and agreement with the humans (protocol.judges).

    The humans of a comparison are its counted judgements and, when the study imported human
    ratings, one more label: the sign of the difference of the two outputs' mean ratings (as
    protocol.preferences.human_labels counts them); the judge agrees when its verdict equals
    the sign of the humans' mean. In a rubric study a judge is compared with the humans'
    answers to the criterion whose metric it is (``criterion``; the first criterion's metric
    is the study's unless it names its own, a judge run's the criterion it judged); imported
    ratings belong to the first criterion. ``unparsed``: a judge run's answers that named no
    verdict (not ties, not in the verdicts); the calibration (κ, balanced agreement, the
    savings bound) is protocol.judges'."""
    verdicts: dict[tuple[str, str], list[JudgeVerdict]] = {}
    rows = MetricPreference.objects.filter(metric__study=study).values_list(
        "metric__name", "judge", "item__external_id", "first__name", "second__name", "value", "order")
    for metric, judge, item, a, b, value, order in rows.iterator():
        verdicts.setdefault((metric, judge), []).append(JudgeVerdict(item, a, b, value, order))
    if not verdicts:
        return []
    criteria = study_rubric(study)
    criterion_of = {metric: name for name, metric in reversed(criterion_metrics(study).items()) if metric}
    # A judge run's metric is its criterion's (``judge:<model>:<criterion>`` in a rubric study).
    for name, run_criteria in JudgeRun.objects.filter(study=study).values_list("metric_name", "criteria"):
        for criterion in run_criteria:
            criterion_of.setdefault(f"{name}:{criterion}" if study.criteria else name, criterion)
    unparsed = dict(JudgeUnparsed.objects.filter(metric__study=study).order_by().values("metric__name")
                    .annotate(n=Count("id")).values_list("metric__name", "n"))
    human_sum: dict[str, dict[tuple[str, str, str], list[int]]] = {c.name: {} for c in criteria}
    for (a, b), labels in study_judgement_answers(study=study, criteria=criteria).items():
        for item, answer in labels:
            for name, value in answer.items():
                human_sum[name].setdefault((item, a, b), []).append(value)
    ratings = study_rating_means(study=study)
    if ratings:
        rated = sorted({(v.item, *sorted((v.first, v.second))) for found in verdicts.values() for v in found
                        if (v.item, v.first) in ratings and (v.item, v.second) in ratings})
        if rated:
            values = preferences_from_scores([ratings[(item, a)] for item, a, _ in rated],
                                             [ratings[(item, b)] for item, _, b in rated])
            for key, value in zip(rated, values.tolist()):
                human_sum[criteria[0].name].setdefault(key, []).append(value)
    human = {name: {key: sum(values) / len(values) for key, values in by_key.items()}
             for name, by_key in human_sum.items()}
    return [{"metric": metric, "judge": judge,
             "criterion": criterion_of.get(metric, criteria[0].name) if study.criteria else "",
             "unparsed": unparsed.get(metric, 0),
             **dataclasses.asdict(judge_stats(found, human[criterion_of.get(metric, criteria[0].name)]))}
            for (metric, judge), found in sorted(verdicts.items())]
