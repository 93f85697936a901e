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
