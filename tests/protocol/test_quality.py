"""Per-annotator quality statistics and flags (protocol.quality)."""
import math
from collections import Counter

import numpy as np
import pytest

from protocol.quality import FLAGS, QualityThresholds, annotator_quality

# Hand-built case (values canonical, shown = as seen: +1 left, -1 right):
#   j  annotator comparison value shown seconds gold
#   0  a         X          +1    +1    10
#   1  b         X          +1    -1    20
#   2  c         X          -1    -1    30
#   3  a         Y           0     0     4
#   4  b         Y           0     0     6
#   5  a         G          +1    +1     2      +1        (right)
#   6  b         G          -1    +1     8      +1        (wrong)
#   7  a         X          -1    +1    NaN                repeat of 0 (inconsistent)
#   8  c         H           0     0     1      {-1, +1}  (a tie where either side was accepted: wrong)
HAND = dict(
    annotators=["a", "b", "c", "a", "b", "a", "b", "a", "c"],
    comparisons=["X", "X", "X", "Y", "Y", "G", "G", "X", "H"],
    values=[1, 1, -1, 0, 0, 1, -1, -1, 0],
    shown=[1, -1, -1, 0, 0, 1, 1, 1, 0],
    seconds=[10, 20, 30, 4, 6, 2, 8, math.nan, 1],
)
HAND_GOLD = [None, None, None, None, None, 1, 1, None, {-1, 1}]
LENIENT = QualityThresholds(min_judgements_for_speed=1, min_answers_for_pattern=2, min_checks=1,
                            min_overlap=1, min_repeats=1)


def test_hand_built_statistics_and_flags():
    a, b, c = annotator_quality(**HAND, gold=HAND_GOLD, repeats=[(0, 7)], thresholds=LENIENT)
    assert (a.annotator, a.judgements, a.checks, a.repeats) == ("a", 4, 1, 1)
    assert a.median_seconds == 4  # of 10, 4, 2 (the repeat's time is unknown)
    assert a.tie_rate == 0.25 and a.left_share == 1.0
    # X: the others (b +1, c -1) agree half; Y: b agrees. The repeat (j 7) and the check are left out.
    assert (a.agreement, a.overlap) == (0.75, 2)
    assert a.gold_accuracy == 1.0 and a.repeat_consistency == 0.0
    assert a.flags == ("inconsistent",)

    assert (b.judgements, b.checks, b.median_seconds) == (3, 1, 8)
    assert b.tie_rate == pytest.approx(1 / 3) and b.left_share == 0.5
    assert (b.agreement, b.overlap) == (0.75, 2)
    assert b.gold_accuracy == 0.0 and math.isnan(b.repeat_consistency)
    assert b.flags == ("failed_checks",)

    assert (c.judgements, c.median_seconds, c.tie_rate, c.left_share) == (2, 15.5, 0.5, 0.0)
    assert (c.agreement, c.overlap, c.gold_accuracy) == (0.0, 1, 0.0)
    assert c.flags == ("failed_checks", "low_agreement")
    assert c.as_dict()["repeat_consistency"] is None and c.as_dict()["flags"] == ["failed_checks", "low_agreement"]


def test_default_thresholds_wait_for_enough_evidence():
    # The same answers under the defaults: too few checks, overlaps and repeats to flag anyone.
    assert all(q.flags == () for q in annotator_quality(**HAND, gold=HAND_GOLD, repeats=[(0, 7)]))


def test_too_fast_and_straight_lining():
    n = 12
    quality, = annotator_quality(["w"] * n, range(n), [1, -1] * (n // 2), [1] * n, [0.3] * n)
    assert quality.left_share == 1.0 and quality.median_seconds == 0.3
    assert quality.flags == ("too_fast", "straight_lining")
    slow_mixed, = annotator_quality(["w"] * n, range(n), [1, -1, 0] * (n // 3), [1, -1, 0] * (n // 3), [9.0] * n)
    assert slow_mixed.flags == ()


@pytest.mark.parametrize("change, message", [
    (dict(values=[1, 1, 2, 0, 0, 1, -1, -1, 0]), "judgement 2: value 2 is not -1, 0 or 1"),
    (dict(shown=[1, -1, -1, 1, 0, 1, 1, 1, 0]), "judgement 3: value 0 and shown value 1 disagree"),
    (dict(seconds=[10, -1, 30, 4, 6, 2, 8, 1, 1]), "judgement 1: seconds must be >= 0"),
    (dict(comparisons=["X"]), "one entry per judgement"),
])
def test_bad_input_is_named(change, message):
    with pytest.raises(ValueError, match=message):
        annotator_quality(**{**HAND, **change})


def test_bad_gold_and_repeats_are_named():
    with pytest.raises(ValueError, match="judgement 5: gold answer 2"):
        annotator_quality(**HAND, gold=[None] * 5 + [2] + [None] * 3)
    with pytest.raises(ValueError, match=r"repeat pair \(0, 1\) is not one annotator"):
        annotator_quality(**HAND, repeats=[(0, 1)])


def simulate(seed, honest=20, comparisons=300, per_comparison=3, spammer_share=0.1, check_every=8,
             repeat_share=0.08):
    """One spammer among honest annotators.

    Honest annotators give the true preference 80 % of the time (else a random answer) in
    about 15 s, and pass 97 % of checks; the spammer answers at random in 0.2 s and does a
    tenth of the work. Every 8th HIT of an annotator is followed by a gold check; 8 % of HITs
    are repeated. Sides are randomised.
    """
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1, 0, 1], p=[0.45, 0.1, 0.45], size=comparisons)
    spammer = honest
    weights = np.full(honest + 1, (1 - spammer_share) / honest)
    weights[spammer] = spammer_share

    def answer(who, true):
        return int(rng.choice([-1, 0, 1])) if who == spammer or rng.random() < 0.2 else int(true)

    def seconds(who):
        return 0.2 if who == spammer else float(rng.lognormal(np.log(15), 0.5))

    rows = [(int(who), c, answer(who, truth[c]), seconds(who), None)
            for c in range(comparisons)
            for who in rng.choice(honest + 1, size=per_comparison, replace=False, p=weights)]
    extra, repeats, done = [], [], Counter()
    for j, (who, comparison, *_ ) in enumerate(list(rows)):
        done[who] += 1
        if done[who] % check_every == 0:
            expected = int(rng.choice([-1, 1]))
            given = answer(who, expected) if who == spammer else (expected if rng.random() < 0.97 else -expected)
            extra.append((who, f"check-{who}-{done[who]}", given, seconds(who), expected))
        if rng.random() < repeat_share:
            extra.append((who, comparison, answer(who, truth[comparison]), seconds(who), None))
            repeats.append((j, len(rows) + len(extra) - 1))
    rows += extra
    values = np.array([r[2] for r in rows])
    return dict(annotators=[r[0] for r in rows], comparisons=[r[1] for r in rows], values=values,
                shown=values * rng.choice([-1, 1], size=len(rows)), seconds=[r[3] for r in rows],
                gold=[r[4] for r in rows], repeats=repeats), spammer


def test_simulated_spammer_is_flagged_and_honest_annotators_are_not_for_its_reasons():
    data, spammer = simulate(seed=0)
    by_annotator = {q.annotator: q for q in annotator_quality(**data)}
    spam = by_annotator.pop(spammer)
    assert {"too_fast", "failed_checks", "low_agreement"} <= set(spam.flags)
    assert spam.median_seconds == pytest.approx(0.2)
    # An honest annotator may miss a check or change their mind on repeats (seed 0: one of
    # each among 20, see the ten-seed rate below), but is never fast, patterned or disagreeing.
    assert not any({"too_fast", "straight_lining", "low_agreement"} & set(q.flags) for q in by_annotator.values())
    honest_agreement = np.mean([q.agreement for q in by_annotator.values()])
    assert spam.agreement < 0.45 < 0.6 < honest_agreement


def test_simulated_spammer_over_ten_seeds():
    spammer_flags, honest_flags, honest_runs = Counter(), Counter(), 0
    for seed in range(10):
        data, spammer = simulate(seed)
        for q in annotator_quality(**data):
            if q.annotator == spammer:
                spammer_flags.update(q.flags)
            else:
                honest_flags.update(q.flags)
                honest_runs += 1
    assert spammer_flags["too_fast"] == spammer_flags["failed_checks"] == 10
    assert spammer_flags["low_agreement"] >= 9
    assert set(honest_flags) <= set(FLAGS) - {"too_fast", "straight_lining", "low_agreement"}
    assert sum(honest_flags.values()) <= 0.02 * honest_runs
