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
