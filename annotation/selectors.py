"""Reads: querysets and plain data for views, the API and the protocol."""
from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from .models import Judgement, PairState, Study


def study_list_for_home() -> QuerySet[Study]:
    """Studies with the counts the front page shows."""
    return Study.objects.annotate(
        system_count=Count("systems", distinct=True),
        item_count=Count("items", distinct=True),
    ).order_by("name")


def study_progress(*, study: Study) -> dict:
    """Budget, judgements and decided pairs of one study."""
    judgements = Judgement.objects.filter(comparison__study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    pairs = PairState.objects.filter(study=study).aggregate(total=Count("id"), decided=Count("id", filter=Q(decided=True)))
    return {
        "budget": study.budget,
        "judgements": judgements.count(),
        "live_judgements": live,
        "budget_left": max(study.budget - live, 0),
        "pairs": pairs["total"],
        "pairs_decided": pairs["decided"],
    }


def comparison_sample_texts(*, study: Study) -> tuple[list[int], list[list[str]], list[list[str]]]:
    """Comparisons whose two outputs have >= 2 samples, with the sample texts in sample order.

    Returns (comparison ids (n,), first system's samples [n][k1], second's [n][k2]).
    """
    from .models import Comparison, Output

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
    from .models import Comparison

    rows = (Comparison.objects.filter(study=study)
            .values_list("first__name", "second__name", "first_id", "second_id").distinct())
    return {(a, b): (i, j) for a, b, i, j in rows}


def study_pair_capacities(*, study: Study) -> dict[tuple[str, str], int]:
    """(first, second) -> human judgements the pair can receive (comparisons x ratings)."""
    from .models import Comparison

    rows = (Comparison.objects.filter(study=study).values("first__name", "second__name")
            .annotate(n=Count("id")).values_list("first__name", "second__name", "n"))
    return {(a, b): n * study.ratings_per_item for a, b, n in rows}


def study_metric_labels(*, study: Study) -> dict[tuple[str, str], dict[str, int]]:
    """(first, second) -> {item external id: the study metric's preference}; {} without a metric.

    Scalar metrics give sign(s_first - s_second) with the metric's tie margin (SPEC §1).
    """
    from .models import Comparison, Metric, MetricPreference, MetricScore

    metric = study.metric
    if metric is None:
        return {}
    labels: dict[tuple[str, str], dict[str, int]] = {}
    if metric.kind == Metric.Kind.PREFERENCE:
        rows = MetricPreference.objects.filter(metric=metric).values_list(
            "first__name", "second__name", "item__external_id", "value")
        for a, b, item, value in rows.iterator():
            labels.setdefault((a, b), {})[item] = value
        return labels
    scores = dict(
        ((item, system), value)
        for item, system, value in MetricScore.objects.filter(metric=metric).values_list(
            "output__item__external_id", "output__system__name", "value").iterator()
    )
    margin = metric.tie_margin
    comparisons = Comparison.objects.filter(study=study).values_list("item__external_id", "first__name", "second__name")
    for item, a, b in comparisons.iterator():
        if (item, a) in scores and (item, b) in scores:
            diff = scores[(item, a)] - scores[(item, b)]
            labels.setdefault((a, b), {})[item] = 0 if abs(diff) <= margin else (1 if diff > 0 else -1)
    return labels


def study_judgement_labels(*, study: Study) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(first, second) -> [(item external id, value)] of every judgement, oldest first."""
    rows = Judgement.objects.filter(comparison__study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value")
    labels: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a, b, item, value in rows.iterator():
        labels.setdefault((a, b), []).append((item, value))
    return labels


def hit_display(*, assignment) -> dict:
    """What the annotator sees for a HIT: input, and the two outputs in screen order."""
    from .models import Judgement, Output

    comparison = assignment.comparison
    study = comparison.study
    texts = {}
    for system_id in (comparison.first_id, comparison.second_id):
        outputs = Output.objects.filter(item_id=comparison.item_id, system_id=system_id)
        shown = outputs.filter(sample=study.shown_sample).first() or outputs.order_by("sample").first()
        texts[system_id] = shown.text
    first, second = texts[comparison.first_id], texts[comparison.second_id]
    left, right = (second, first) if assignment.shown_swapped else (first, second)
    done = Judgement.objects.filter(annotator=assignment.annotator, comparison__study=study).count()
    return {"assignment": assignment, "item": comparison.item, "left": left, "right": right, "done": done}


def annotator_judgement_count(*, study: Study, annotator) -> int:
    return Judgement.objects.filter(annotator=annotator, comparison__study=study).count()
