"""Position bias and human agreement of an LLM judge (protocol.judges), on hand-counted cases."""
import pytest

from protocol.judges import JudgeVerdict as V
from protocol.judges import agreement_with_majority, judge_stats


def test_a_judge_that_always_prefers_the_first_position():
    # Each comparison judged in both orders; the first-shown output always wins.
    verdicts = [V(f"i{n}", "A", "B", 1, "AB") for n in range(4)] + [V(f"i{n}", "A", "B", -1, "BA") for n in range(4)]
    stats = judge_stats(verdicts)
    assert (stats.verdicts, stats.ordered, stats.decisive) == (8, 8, 8)
    assert stats.first_position_share == 1.0
    assert (stats.both_orders, stats.flip_rate) == (4, 1.0)


def test_a_consistent_judge_has_no_flips_and_half_first_wins():
    verdicts = [V("i1", "A", "B", 1, "AB"), V("i1", "A", "B", 1, "BA"),   # A better in both orders
                V("i2", "B", "A", 1, "AB"), V("i2", "A", "B", -1, "AB"),  # B better, B then A shown first
                V("i3", "A", "B", 0, "AB"), V("i3", "A", "B", 0, "BA")]   # a tie twice is no flip
    stats = judge_stats(verdicts)
    # Decisive: i1 AB (first wins), i1 BA (second wins), i2 (B, A) AB (B shown first, B wins),
    # i2 (A, B) AB (A shown first, B wins): 2 of 4.
    assert stats.decisive == 4 and stats.first_position_share == 0.5
    assert (stats.both_orders, stats.flip_rate) == (3, 0.0)


def test_agreement_with_humans_combines_the_orders_first():
    verdicts = [V("i1", "A", "B", 1, "AB"), V("i1", "A", "B", -1, "BA"),  # order-dependent -> tie
                V("i2", "A", "B", 1), V("i3", "B", "A", 1)]
    human = {("i1", "A", "B"): 0.0, ("i2", "A", "B"): 1 / 3, ("i3", "A", "B"): 1.0, ("i9", "A", "B"): 1.0}
    stats = judge_stats(verdicts, human)
    # i1: tie vs tie (agree); i2: +1 vs + (agree); i3: B better vs A better (disagree).
    assert (stats.human_compared, stats.human_agreement) == (3, 2 / 3)
    assert stats.first_position_share == 1.0 and stats.ordered == 2  # i1: the first-shown won both times


def test_no_orders_and_no_humans_give_none():
    stats = judge_stats([V("i1", "A", "B", 1)])
    assert stats.first_position_share is None and stats.flip_rate is None and stats.human_agreement is None


# ---- calibration on the humans (issue 38) ------------------------------------------------------

def test_kappa_of_two_raters_is_the_textbook_value():
    # Cohen's classic 2 x 2 example (50 items): both yes 20, first yes / second no 5, first no /
    # second yes 10, both no 15: p_o = 0.7, p_e = 0.5 x 0.6 + 0.5 x 0.4 = 0.5, κ = 0.4.
    human = [1] * 25 + [-1] * 25
    judge = [1] * 20 + [-1] * 5 + [1] * 10 + [-1] * 15
    found = agreement_with_majority(human, judge)
    assert found.compared == 50 and found.agreement == pytest.approx(0.7)
    assert found.kappa == pytest.approx(0.4)
    assert found.balanced == pytest.approx((20 / 25 + 15 / 25) / 2)


def test_three_labels_by_hand():
    human = [1, 1, 1, 1, 0, 0, -1, -1, -1, -1]
    judge = [1, 1, 1, 0, 0, 1, -1, -1, 0, 1]
    found = agreement_with_majority(human, judge)
    # confusion (rows human +, =, -; columns judge): (3, 1, 0), (1, 1, 0), (1, 1, 2)
    assert found.confusion == ((3, 1, 0), (1, 1, 0), (1, 1, 2))
    # p_o = 6/10; p_e = (4 x 5 + 2 x 3 + 4 x 2) / 100 = 0.34; κ = 0.26 / 0.66
    assert found.agreement == pytest.approx(0.6)
    assert found.kappa == pytest.approx(0.26 / 0.66)
    assert found.balanced == pytest.approx((3 / 4 + 1 / 2 + 2 / 4) / 3)


def test_a_judge_that_always_says_first_has_no_kappa_beyond_chance():
    human = [1] * 8 + [-1] * 2
    found = agreement_with_majority(human, [1] * 10)
    assert found.agreement == pytest.approx(0.8)
    assert found.kappa == pytest.approx(0.0)           # p_o = p_e = 0.8
    assert found.balanced == pytest.approx(0.5)        # right on every +, wrong on every -
    assert agreement_with_majority([1, 1], [1, 1]).kappa is None  # p_e = 1: undefined
    assert agreement_with_majority([], []).agreement is None
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        agreement_with_majority([2], [1])


def test_judge_stats_carries_kappa_and_the_savings_bound():
    # One pair, four items; humans: i1, i2 A better, i3, i4 B better; the judge (one order each)
    # is right on i1-i3 and says A on i4.
    verdicts = [V("i1", "A", "B", 1, "AB"), V("i2", "A", "B", 1, "BA"), V("i3", "B", "A", 1, "AB"),
                V("i4", "B", "A", -1, "BA")]
    human = {("i1", "A", "B"): 1.0, ("i2", "A", "B"): 0.5, ("i3", "A", "B"): -1.0, ("i4", "A", "B"): -1 / 3}
    stats = judge_stats(verdicts, human)
    assert (stats.human_compared, stats.human_agreement) == (4, 0.75)
    # κ: confusion rows human (+: 2, -: 2), judge + on 3, - on 1: p_e = (2 x 3 + 2 x 1) / 16 = 0.5
    assert stats.kappa == pytest.approx((0.75 - 0.5) / 0.5)
    assert stats.balanced_agreement == pytest.approx((1 + 0.5) / 2)
    # η² by hand: judge + on h = (1, 1, -1) (mean 1/3, share 3/4), - on h = (-1) (share 1/4);
    # Var(h) = 1: η² = 3/4 (1/3)² + 1/4 = 1/3. At n_h = 2 of N = 4: room = 1 - η²/2 = 5/6,
    # uniform (1 - 1/3) / (5/6) = 0.8; Neyman (3/4 sqrt(8/9))² = 1/2, / (5/6) = 0.6.
    assert stats.savings_pairs == 1
    assert stats.savings_eta2 == pytest.approx(1 / 3)
    assert stats.savings_uniform == pytest.approx(0.8)
    assert stats.savings_active == pytest.approx(0.6)


def test_no_varying_human_labels_give_no_savings():
    stats = judge_stats([V("i1", "A", "B", 1, "AB")], {("i1", "A", "B"): 1.0})
    assert stats.savings_pairs == 0 and stats.savings_uniform is None
    assert stats.kappa is None and stats.human_agreement == 1.0
