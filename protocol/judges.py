"""LLM judges as metrics: position bias and agreement with humans.

A judge that sees two outputs in one order may prefer the first position whatever the texts
(Zheng et al. 2023, "Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", §3.3; Wang et
al. 2023, "Large Language Models are not Fair Evaluators"). A bundle's ``metric_preference``
rows may say which order the judge saw (``order``: "AB" = the row's first output shown first);
with both orders of one comparison, the verdicts can be compared directly.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.preferences import combine_verdicts


@dataclass(frozen=True)
class JudgeVerdict:
    """One verdict: ``preference`` +1 / 0 / -1 for (first, second) as given; ``order`` "AB",
    "BA" or "" (unknown)."""
    item: str
    first: str
    second: str
    preference: int
    order: str = ""


@dataclass(frozen=True)
class JudgeStats:
    """verdicts: all of them; ordered: those with a known order; decisive: ordered, not a tie.
    first_position_share: of the decisive ordered verdicts, the share won by the output shown
    first (0.5 = no position bias; None without any). both_orders: comparisons (item, pair)
    with a verdict in each order; flip_rate: the share of those whose two verdicts differ (in
    the pair's own direction; None without any). human_compared: comparisons with both a judge
    verdict (orders combined by ``combine_verdicts``) and human judgements; human_agreement: the
    share where the judge's verdict equals the sign of the humans' mean (None without any)."""
    verdicts: int
    ordered: int
    decisive: int
    first_position_share: float | None
    both_orders: int
    flip_rate: float | None
    human_compared: int
    human_agreement: float | None


def _share(hits: int, n: int) -> float | None:
    return hits / n if n else None


def judge_stats(verdicts: Iterable[JudgeVerdict],
                human: Mapping[tuple[str, str, str], float] | None = None) -> JudgeStats:
    """Position bias and human agreement of one judge.

    human: (item, a, b) with a < b -> the humans' mean preference for a over b (in [-1, 1]).
    """
    verdicts = list(verdicts)
    ordered = [v for v in verdicts if v.order in ("AB", "BA")]
    decisive = [v for v in ordered if v.preference != 0]
    # The first-shown output won: "AB" and first better, or "BA" and second better.
    first_wins = sum(1 for v in decisive if (v.preference > 0) == (v.order == "AB"))
    by_comparison: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    for v in verdicts:
        a, b = sorted((v.first, v.second))
        value = v.preference if a == v.first else -v.preference
        # The order in the pair's own direction: which of (a, b) was shown first.
        order = v.order if a == v.first or not v.order else {"AB": "BA", "BA": "AB"}[v.order]
        by_comparison.setdefault((v.item, a, b), {}).setdefault(order, []).append(value)
    both = [orders for orders in by_comparison.values() if "AB" in orders and "BA" in orders]
    flips = sum(1 for orders in both if combine_verdicts(orders["AB"] + orders["BA"]) == 0
                and set(orders["AB"] + orders["BA"]) != {0})
    human = human or {}
    compared = agree = 0
    for key, orders in by_comparison.items():
        if key not in human:
            continue
        verdict = combine_verdicts([value for values in orders.values() for value in values])
        mean = human[key]
        compared += 1
        agree += verdict == (mean > 0) - (mean < 0)
    return JudgeStats(len(verdicts), len(ordered), len(decisive), _share(first_wins, len(decisive)),
                      len(both), _share(flips, len(both)), compared, _share(agree, compared))
