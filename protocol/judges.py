"""LLM judges as metrics: position bias, agreement with humans and what they can save.

A judge that sees two outputs in one order may prefer the first position whatever the texts
(Zheng et al. 2023, "Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", §3.3; Wang et
al. 2023, "Large Language Models are not Fair Evaluators"). A bundle's ``metric_preference``
rows may say which order the judge saw (``order``: "AB" = the row's first output shown first);
with both orders of one comparison, the verdicts can be compared directly.

Calibration on the humans (issue 38): on the comparisons both the judge (orders combined) and
the humans labelled, the human label is the humans' majority (the sign of their mean), and
the judge is compared with it as one rater with another: raw agreement, Cohen's κ (agreement
beyond what the two raters' label shares give by chance), balanced agreement (the mean over
the human classes of the share the judge got right: a judge that always says "first better"
on a study where the first usually wins gets a high raw agreement and 1/3 balanced), and the
efficiency bound of ``protocol.savings``: the least share of a human-only rule's labels any
rule reading this judge's labels could make do with, estimated on those items.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from protocol.preferences import combine_verdicts
from protocol.savings import study_label_savings

# The human-only rule of the savings bound labels this share of a pair's items (docs/judges.md).
SAVINGS_FRACTION = 0.5
LABELS = (1, 0, -1)


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
    share where the judge's verdict equals the sign of the humans' mean (None without any).
    kappa, balanced_agreement: Cohen's κ and balanced agreement of the same two labels
    (``agreement_with_majority``); savings_*: the efficiency bound (``judge_savings``) on the
    same comparisons, None where it cannot be estimated."""
    verdicts: int
    ordered: int
    decisive: int
    first_position_share: float | None
    both_orders: int
    flip_rate: float | None
    human_compared: int
    human_agreement: float | None
    kappa: float | None = None
    balanced_agreement: float | None = None
    savings_pairs: int = 0
    savings_eta2: float | None = None
    savings_uniform: float | None = None
    savings_active: float | None = None


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
    paired: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    for key, orders in by_comparison.items():
        if key not in human:
            continue
        verdict = combine_verdicts([value for values in orders.values() for value in values])
        mean = human[key]
        majority = (mean > 0) - (mean < 0)
        humans, judge = paired.setdefault(key[1:], ([], []))
        humans.append(majority)
        judge.append(verdict)
    humans = [h for hs, _ in paired.values() for h in hs]
    judge = [j for _, js in paired.values() for j in js]
    agreement = agreement_with_majority(humans, judge)
    savings = judge_savings(list(paired.values()))
    return JudgeStats(len(verdicts), len(ordered), len(decisive), _share(first_wins, len(decisive)),
                      len(both), _share(flips, len(both)), agreement.compared, agreement.agreement,
                      agreement.kappa, agreement.balanced, *savings)


@dataclass(frozen=True)
class MajorityAgreement:
    """One judge against the humans' majority on the same comparisons.

    compared   comparisons with both labels
    agreement  share of them with the same label (None without any)
    kappa      Cohen's κ = (p_o - p_e) / (1 - p_e), p_e = Σ_c p_human(c) p_judge(c) over the
               labels +, =, - (None without any, or when p_e = 1: both always gave one label)
    balanced   mean over the human labels present of the share of their comparisons the judge
               labelled alike (the balanced accuracy of the judge as a predictor of the majority)
    confusion  3 x 3 counts, rows the human label, columns the judge's, in the order +, =, -
    """
    compared: int
    agreement: float | None
    kappa: float | None
    balanced: float | None
    confusion: tuple[tuple[int, int, int], ...]


def agreement_with_majority(human: Iterable[int], judge: Iterable[int]) -> MajorityAgreement:
    """Agreement, Cohen's κ and balanced agreement of two label sequences in {-1, 0, 1} (the
    humans' majority and the judge's verdict of the same comparisons).

    >>> result = agreement_with_majority([1, 1, -1, 0], [1, -1, -1, 0])
    >>> result.compared, result.agreement, round(result.kappa, 3)
    (4, 0.75, 0.636)
    """
    h = np.asarray(list(human), dtype=int)
    j = np.asarray(list(judge), dtype=int)
    if h.shape != j.shape:
        raise ValueError(f"human and judge labels must be of the same comparisons, got {h.shape} and {j.shape}")
    if not (np.isin(h, LABELS).all() and np.isin(j, LABELS).all()):
        raise ValueError("labels must be -1, 0 or 1")
    confusion = np.array([[int(np.sum((h == a) & (j == b))) for b in LABELS] for a in LABELS])
    n = int(confusion.sum())
    if n == 0:
        return MajorityAgreement(0, None, None, None, tuple(map(tuple, confusion.tolist())))
    observed = float(np.trace(confusion)) / n
    expected = float(confusion.sum(axis=1) @ confusion.sum(axis=0)) / n ** 2
    kappa = None if math.isclose(expected, 1.0) else (observed - expected) / (1.0 - expected)
    rows = confusion.sum(axis=1)
    balanced = float(np.mean([confusion[c, c] / rows[c] for c in range(3) if rows[c]]))
    return MajorityAgreement(n, observed, kappa, balanced, tuple(map(tuple, confusion.tolist())))


def judge_savings(pairs, *, fraction: float = SAVINGS_FRACTION) -> tuple[int, float | None, float | None, float | None]:
    """(pairs counted, mean η², uniform ratio, ratio by judge label) of ``protocol.savings``'
    efficiency bound, each pair's (human majority, judge verdict) labels of the comparisons
    both labelled taken as the pair's items and a human-only rule labelling ``fraction`` of
    them; (0, None, None, None) when no pair's human labels vary."""
    try:
        found = study_label_savings([(np.asarray(h), np.asarray(j)) for h, j in pairs if len(h)], fraction=fraction)
    except ValueError:
        return 0, None, None, None
    return found["pairs"], found["eta2"], found["uniform_ratio"], found["active_ratio"]
