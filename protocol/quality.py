"""Per-annotator quality statistics and flags for pairwise preference judgements.

Inputs are arrays with one entry per judgement (k judgements in all):

- ``annotators``  who judged (any hashable id)
- ``comparisons`` what was judged (one item with one system pair; any hashable id)
- ``values``      the answer in canonical pair order: +1 first better, 0 tie, −1 second better
- ``shown``       the same answer as the annotator saw it: +1 left better, 0 tie, −1 right
                  better (so ``shown = ±values``; the sign says which side the first system was on)
- ``seconds``     time on task, from render to answer; NaN when unknown
- ``gold``        optional: per judgement ``None`` (a real comparison) or the answers a check
                  accepts — an int in {−1, 0, 1} or a collection of them (canonical order)
- ``repeats``     optional (r, 2) judgement indices ``(original, repeat)``: the same annotator
                  judged the same comparison again (usually with sides swapped)

Statistics per annotator (:class:`AnnotatorQuality`), all over the annotator's judgements
unless said otherwise:

- judgements, checks (how many were gold checks), median seconds (known times only)
- tie rate, and the *left share*: left answers / (left + right answers), 0.5 = no position
  bias (NaN when every answer was a tie)
- agreement: leave-one-out agreement with the other annotators of the same comparisons — for
  each comparison the annotator shares with others, the share of the others' judgements with
  the same value, averaged over those comparisons (``overlap`` of them). Checks and the
  repeat judgement of a repeat pair are left out on both sides, so nobody is compared with
  themselves.
- gold accuracy: share of checks answered with an accepted answer
- repeat consistency: share of repeat pairs whose two answers agree (canonical order)

Flags (thresholds in :class:`QualityThresholds`; a statistic only flags once it rests on
enough judgements, so a new annotator is not flagged after one HIT):

- ``too_fast``        median seconds < ``min_median_seconds``
- ``straight_lining`` one shown answer (left, right or tie) makes up ≥ ``max_same_answer_share``
- ``failed_checks``   gold accuracy < ``min_gold_accuracy``
- ``low_agreement``   agreement < ``min_agreement``
- ``inconsistent``    repeat consistency < ``min_repeat_consistency``
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

ANSWERS = (-1, 0, 1)
FLAGS = ("too_fast", "straight_lining", "failed_checks", "low_agreement", "inconsistent")


@dataclass(frozen=True)
class QualityThresholds:
    """When a statistic flags an annotator. Defaults are deliberately lenient: a flag asks a
    researcher to look, and only a study's exclusion rule turns it into an exclusion.

    - min_median_seconds 2.0: reading an input and two outputs takes longer than 2 s; a
      click-through takes well under 1 s.
    - max_same_answer_share 0.9 over >= min_answers_for_pattern 10 answers: honest annotators
      of a two-sided task with randomised sides do not give one answer 9 times in 10.
    - min_gold_accuracy 0.75 over >= min_checks 2 checks: checks are easy by design, so one
      miss in four is tolerated, two in three are not.
    - min_agreement 0.4 over >= min_overlap 5 shared comparisons: a random answer on three
      options agrees with others a third of the time.
    - min_repeat_consistency 0.5 over >= min_repeats 6 repeat pairs: random answers agree with
      themselves a third of the time (flagged with probability 0.68 on 6 repeats); an honest
      annotator who agrees with their first answer 3 times in 4 is flagged with 0.04. Fewer
      repeats cannot tell the two apart.
    - min_judgements_for_speed 5: the median of fewer answers says little.
    """

    min_median_seconds: float = 2.0
    min_judgements_for_speed: int = 5
    max_same_answer_share: float = 0.9
    min_answers_for_pattern: int = 10
    min_gold_accuracy: float = 0.75
    min_checks: int = 2
    min_agreement: float = 0.4
    min_overlap: int = 5
    min_repeat_consistency: float = 0.5
    min_repeats: int = 6


@dataclass(frozen=True)
class AnnotatorQuality:
    """Quality statistics of one annotator; NaN where a statistic has no data."""

    annotator: Hashable
    judgements: int  # every answer, checks and repeats included
    checks: int  # of which gold checks
    median_seconds: float
    tie_rate: float
    left_share: float  # left / (left + right) answers as shown
    agreement: float  # leave-one-out, see the module docstring
    overlap: int  # comparisons shared with other annotators (the agreement's support)
    gold_accuracy: float
    repeats: int  # repeat pairs
    repeat_consistency: float
    flags: tuple[str, ...]

    def as_dict(self) -> dict:
        """JSON-able; NaN becomes None, flags a list."""
        row = asdict(self)
        row["flags"] = list(self.flags)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def _accepted_mask(gold: Sequence | None, k: int) -> np.ndarray:
    """(k, 3) bool over answers (−1, 0, +1); an all-False row is a real comparison."""
    mask = np.zeros((k, 3), dtype=bool)
    if gold is None:
        return mask
    gold = list(gold)
    if len(gold) != k:
        raise ValueError(f"gold has {len(gold)} entries for {k} judgements")
    for j, accepted in enumerate(gold):
        if accepted is None:
            continue
        answers = [accepted] if isinstance(accepted, (int, np.integer)) else list(accepted)
        if not answers or any(isinstance(a, bool) or a not in ANSWERS for a in answers):
            raise ValueError(f"judgement {j}: gold answer {accepted!r} must be -1, 0, 1 or a non-empty set of them")
        for a in answers:
            mask[j, int(a) + 1] = True
    return mask


def _check_answers(name: str, array: np.ndarray) -> None:
    bad = ~np.isin(array, ANSWERS)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(f"judgement {at}: {name} {array[at].item()!r} is not -1, 0 or 1")


def annotator_quality(
    annotators: Sequence[Hashable],
    comparisons: Sequence[Hashable],
    values,
    shown,
    seconds,
    *,
    gold: Sequence | None = None,
    repeats=None,
    thresholds: QualityThresholds = QualityThresholds(),
) -> tuple[AnnotatorQuality, ...]:
    """Quality statistics per annotator, in order of first appearance (see the module docstring).

    Preconditions (ValueError naming the offender otherwise): all per-judgement inputs have
    the same length k; values and shown in {−1, 0, 1} with |shown| = |values| (a tie is a tie
    on either side); seconds >= 0 or NaN; a repeat pair names two different judgements of one
    annotator on one comparison.
    """
    annotators, comparisons = list(annotators), list(comparisons)
    values = np.asarray(values)
    shown = np.asarray(shown)
    seconds = np.asarray(seconds, dtype=float)
    k = len(annotators)
    lengths = {"comparisons": len(comparisons), "values": len(values), "shown": len(shown),
               "seconds": len(seconds)}
    if any(n != k for n in lengths.values()) or values.ndim != 1 or shown.ndim != 1 or seconds.ndim != 1:
        raise ValueError(f"every input needs one entry per judgement: annotators has {k}, "
                         + ", ".join(f"{name} {n}" for name, n in lengths.items()))
    _check_answers("value", values)
    _check_answers("shown value", shown)
    mismatch = np.abs(values) != np.abs(shown)
    if mismatch.any():
        at = int(np.argmax(mismatch))
        raise ValueError(f"judgement {at}: value {values[at].item()} and shown value {shown[at].item()} "
                         "disagree on whether it is a tie")
    if (seconds < 0).any():
        raise ValueError(f"judgement {int(np.argmax(seconds < 0))}: seconds must be >= 0 (or NaN when unknown)")
    accepted = _accepted_mask(gold, k)
    is_check = accepted.any(axis=1)
    pairs = np.zeros((0, 2), dtype=np.int64) if repeats is None else np.asarray(repeats, dtype=np.int64).reshape(-1, 2)
    for original, repeat in pairs:
        if not (0 <= original < k and 0 <= repeat < k) or original == repeat:
            raise ValueError(f"repeat pair ({original}, {repeat}) must name two different judgements of 0..{k - 1}")
        if annotators[original] != annotators[repeat] or comparisons[original] != comparisons[repeat]:
            raise ValueError(f"repeat pair ({original}, {repeat}) is not one annotator judging one comparison twice")

    # Leave-one-out agreement over real, first-time judgements.
    counted = ~is_check
    counted[pairs[:, 1]] = False
    by_comparison: dict[Hashable, list[int]] = defaultdict(list)
    for j in np.flatnonzero(counted):
        by_comparison[comparisons[j]].append(j)
    agree_sum: dict[Hashable, float] = defaultdict(float)
    overlap: dict[Hashable, int] = defaultdict(int)
    for rows in by_comparison.values():
        if len(rows) < 2:
            continue
        answers = values[rows]
        tally = {a: int((answers == a).sum()) for a in ANSWERS}
        for j, answer in zip(rows, answers):
            others = len(rows) - 1
            agree_sum[annotators[j]] += (tally[int(answer)] - 1) / others
            overlap[annotators[j]] += 1

    members: dict[Hashable, list[int]] = defaultdict(list)
    for j, annotator in enumerate(annotators):
        members[annotator].append(j)
    repeat_rows: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for original, repeat in pairs:
        repeat_rows[annotators[original]].append((original, repeat))

    results = []
    for annotator, rows in members.items():
        rows = np.asarray(rows)
        mine_shown = shown[rows]
        known = seconds[rows][~np.isnan(seconds[rows])]
        median_seconds = float(np.median(known)) if len(known) else math.nan
        sided = int((mine_shown != 0).sum())
        left_share = float((mine_shown == 1).sum() / sided) if sided else math.nan
        checks = rows[is_check[rows]]
        gold_accuracy = (float(accepted[checks, values[checks] + 1].mean()) if len(checks) else math.nan)
        shared = overlap.get(annotator, 0)
        agreement = agree_sum[annotator] / shared if shared else math.nan
        own_repeats = repeat_rows.get(annotator, [])
        consistency = (float(np.mean([values[a] == values[b] for a, b in own_repeats]))
                       if own_repeats else math.nan)
        same_answer_share = max(float((mine_shown == a).mean()) for a in ANSWERS)
        t = thresholds
        flags = []
        if len(known) >= t.min_judgements_for_speed and median_seconds < t.min_median_seconds:
            flags.append("too_fast")
        if len(rows) >= t.min_answers_for_pattern and same_answer_share >= t.max_same_answer_share:
            flags.append("straight_lining")
        if len(checks) >= t.min_checks and gold_accuracy < t.min_gold_accuracy:
            flags.append("failed_checks")
        if shared >= t.min_overlap and agreement < t.min_agreement:
            flags.append("low_agreement")
        if len(own_repeats) >= t.min_repeats and consistency < t.min_repeat_consistency:
            flags.append("inconsistent")
        results.append(AnnotatorQuality(
            annotator=annotator,
            judgements=len(rows),
            checks=len(checks),
            median_seconds=median_seconds,
            tie_rate=float((mine_shown == 0).mean()),
            left_share=left_share,
            agreement=float(agreement),
            overlap=shared,
            gold_accuracy=gold_accuracy,
            repeats=len(own_repeats),
            repeat_consistency=consistency,
            flags=tuple(flags),
        ))
    return tuple(results)
