"""Position bias and human agreement of an LLM judge (protocol.judges), on hand-counted cases."""
from protocol.judges import JudgeVerdict as V
from protocol.judges import judge_stats


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
