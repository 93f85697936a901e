"""Sign tests, significance DAGs over systems, and comparison of two decision sets.

Decisions are integers in canonical pair order (first < second by name): ``+1`` = first
significantly better, ``-1`` = second significantly better, ``0`` = no significant
difference (SPEC §3, §5).
"""
from __future__ import annotations

from collections.abc import Mapping

CORRECT = "Correct"
INVERSION = "Inversion"
OMISSION = "Omission"
INSERTION = "Insertion"
CATEGORIES = (CORRECT, INVERSION, OMISSION, INSERTION)

_DECISIONS = (-1, 0, 1)


def _check_decision(value, what: str) -> int:
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} decision must be -1, 0 or 1, got {value!r}") from None
    if as_int != value or as_int not in _DECISIONS:
        raise ValueError(f"{what} decision must be -1, 0 or 1, got {value!r}")
    return as_int


def decision_category(reference: int, candidate: int) -> str:
    """Category of a candidate decision judged against a reference decision (SPEC §5).

    Correct: same significant direction, or neither significant. Inversion: opposite
    significant directions. Omission: reference significant, candidate not. Insertion:
    reference not significant, candidate significant.
    """
    reference = _check_decision(reference, "reference")
    candidate = _check_decision(candidate, "candidate")
    if reference == candidate:
        return CORRECT
    if reference == 0:
        return INSERTION
    if candidate == 0:
        return OMISSION
    return INVERSION


def compare_decisions(
    reference: Mapping[tuple[str, str], int], candidate: Mapping[tuple[str, str], int]
) -> dict[tuple[str, str], str]:
    """Category of every pair of ``reference`` (keys (first, second) in canonical order).

    A pair missing from ``candidate`` counts as undecided (0) there; a candidate pair
    absent from the reference is an error, because it cannot be judged.
    """
    extra = set(candidate) - set(reference)
    if extra:
        raise ValueError(f"candidate has pairs missing from the reference: {sorted(extra)}")
    return {
        pair: decision_category(reference[pair], candidate.get(pair, 0)) for pair in reference
    }


def category_rates(categories: Mapping[tuple[str, str], str]) -> dict[str, float]:
    """Fraction of pairs in each category (keys lower-case: correct, inversion, ...)."""
    total = len(categories)
    counts = {name: 0 for name in CATEGORIES}
    for category in categories.values():
        counts[category] += 1
    return {name.lower(): (counts[name] / total if total else float("nan")) for name in CATEGORIES}
