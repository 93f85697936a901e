"""Tests for protocol.ranking: sign tests, DAGs, decision comparison (SPEC §3, §5)."""
from __future__ import annotations

import pytest

from protocol.ranking import (
    CORRECT,
    INSERTION,
    INVERSION,
    OMISSION,
    category_rates,
    compare_decisions,
    decision_category,
)


@pytest.mark.parametrize(
    ("reference", "candidate", "expected"),
    [
        (1, 1, CORRECT), (-1, -1, CORRECT), (0, 0, CORRECT),
        (1, -1, INVERSION), (-1, 1, INVERSION),
        (1, 0, OMISSION), (-1, 0, OMISSION),
        (0, 1, INSERTION), (0, -1, INSERTION),
    ],
)
def test_decision_category_table(reference, candidate, expected):
    assert decision_category(reference, candidate) == expected
    # swapping the pair negates both decisions and keeps the category
    assert decision_category(-reference, -candidate) == expected


@pytest.mark.parametrize("bad", [2, -2, 0.5, "1", None])
def test_decision_category_rejects_non_decisions(bad):
    with pytest.raises(ValueError, match="decision"):
        decision_category(bad, 0)
    with pytest.raises(ValueError, match="decision"):
        decision_category(0, bad)


def test_compare_decisions_missing_candidate_pair_is_undecided():
    reference = {("A", "B"): 1, ("A", "C"): 0, ("B", "C"): -1}
    candidate = {("A", "B"): -1, ("A", "C"): 1}
    categories = compare_decisions(reference, candidate)
    assert categories == {("A", "B"): INVERSION, ("A", "C"): INSERTION, ("B", "C"): OMISSION}
    rates = category_rates(categories)
    assert rates == pytest.approx({"correct": 0, "inversion": 1 / 3, "omission": 1 / 3, "insertion": 1 / 3})


def test_compare_decisions_rejects_unknown_candidate_pair():
    with pytest.raises(ValueError, match="missing from the reference"):
        compare_decisions({("A", "B"): 1}, {("A", "C"): 1})
