"""Inter-annotator agreement on pairwise preferences: Krippendorff's α and percent agreement.

A *comparison* (one item shown with one system pair) is a unit in Krippendorff's sense; its
annotators are the coders and their labels ``+1`` (first system better), ``0`` (tie), ``-1``
(second better), in canonical pair order, are the values. Only comparisons with at least two
judgements carry information about agreement; the others are left out (they add nothing to
the coincidence matrix either).

With n_uc the number of judgements of value c on comparison u and m_u = Σ_c n_uc
(Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"):

- coincidences   o_ck = Σ_u (n_uc n_uk − [c = k] n_uc) / (m_u − 1),   n_c = Σ_k o_ck,  n = Σ_c n_c
- α              1 − (n − 1) Σ_ck o_ck δ²_ck / Σ_ck n_c n_k δ²_ck
- nominal δ²     [c ≠ k]
- ordinal δ²     (Σ_{g=c..k} n_g − (n_c + n_k)/2)²  over the ordered values −1 < 0 < +1

α is undefined (NaN) when every judgement has the same value (no expected disagreement).
*Percent agreement* is the share of pairs of judgements of one comparison that agree,
averaged over comparisons (Fleiss' P̄; equal to 1 − nominal D_o when every comparison has
the same number of judgements).

The confidence interval is a percentile bootstrap that resamples *comparisons* with
replacement (judgements of one comparison are not independent, so they are resampled as a
cluster); replicates in which α is undefined are left out.

Command line::

    python -m protocol.agreement data/bundles/pandalm.jsonl.gz --json [--by-pair]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .bundle import BundleError, read_bundle
from .preferences import canonical_pair

VALUES = (-1, 0, 1)
_V = len(VALUES)
_NOMINAL = 1.0 - np.eye(_V)
# Each bootstrap chunk gathers chunk × units × 9 floats; keep it near 16 MB.
_BOOTSTRAP_CELLS = 2_000_000


@dataclass(frozen=True)
class Agreement:
    """Agreement over the comparisons with >= 2 judgements. Undefined values are NaN."""

    comparisons: int  # comparisons with at least two judgements
    judgements: int  # judgements on those comparisons
    alpha_nominal: float
    alpha_ordinal: float
    percent_agreement: float
    alpha_nominal_ci: tuple[float, float]
    alpha_ordinal_ci: tuple[float, float]
    level: float  # of the intervals, e.g. 0.95
    bootstrap: int  # replicates drawn (0: no intervals)

    def as_dict(self) -> dict:
        """JSON-able; NaN becomes None."""
        def clean(value):
            if isinstance(value, tuple):
                return [clean(v) for v in value]
            if isinstance(value, float) and math.isnan(value):
                return None
            return value

        return {key: clean(value) for key, value in asdict(self).items()}


def value_counts(comparisons: Sequence[Hashable], annotators: Sequence[Hashable], values) -> np.ndarray:
    """Judgement counts per comparison: (u, 3) int over the values (−1, 0, +1).

    comparisons, annotators, values: sequences of equal length k, one entry per judgement;
    ids are any hashable (str, int, tuple). Rows follow the order of first appearance.
    Preconditions (ValueError naming the first offender otherwise): values in {−1, 0, 1};
    each annotator judges a comparison at most once (drop repeated judgements first).
    """
    comparisons, annotators = list(comparisons), list(annotators)
    values = np.asarray(values)
    if values.ndim != 1 or not (len(comparisons) == len(annotators) == len(values)):
        raise ValueError(
            "comparisons, annotators and values must be 1-D and of equal length, got "
            f"{len(comparisons)}, {len(annotators)} and shape {values.shape}"
        )
    bad = ~np.isin(values, VALUES)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(f"judgement {at}: value {values[at].item()!r} is not -1, 0 or 1")
    codes: dict[Hashable, int] = {}
    seen: set[tuple[int, Hashable]] = set()
    rows = np.empty(len(values), dtype=np.int64)
    for k, (comparison, annotator) in enumerate(zip(comparisons, annotators)):
        row = codes.setdefault(comparison, len(codes))
        if (row, annotator) in seen:
            raise ValueError(
                f"judgement {k}: annotator {annotator!r} judged comparison {comparison!r} twice "
                "(agreement counts each coder once per comparison)"
            )
        seen.add((row, annotator))
        rows[k] = row
    counts = np.zeros((len(codes), _V), dtype=np.int64)
    np.add.at(counts, (rows, values.astype(np.int64) + 1), 1)
    return counts


def _unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """(u, 3) counts of pairable units -> (u, 3, 3) each unit's share of the coincidence matrix."""
    n = counts.astype(float)
    m = n.sum(axis=1)
    pairs = n[:, :, None] * n[:, None, :] - n[:, :, None] * np.eye(_V)[None]
    return pairs / (m - 1)[:, None, None]


def _ordinal_distances(marginals: np.ndarray) -> np.ndarray:
    """(..., 3) value marginals n_c -> (..., 3, 3) ordinal δ²."""
    cumulative = np.concatenate([np.zeros(marginals.shape[:-1] + (1,)), np.cumsum(marginals, axis=-1)], axis=-1)
    c = np.arange(_V)[:, None]
    k = np.arange(_V)[None, :]
    low, high = np.minimum(c, k), np.maximum(c, k)
    between = cumulative[..., high + 1] - cumulative[..., low]
    half_ends = (marginals[..., low] + marginals[..., high]) / 2
    return (between - half_ends) ** 2


def _alpha(coincidences: np.ndarray, ordinal: bool) -> np.ndarray:
    """(..., 3, 3) coincidence matrices -> (...) α (NaN where undefined)."""
    marginals = coincidences.sum(axis=-1)
    total = marginals.sum(axis=-1)
    distances = _ordinal_distances(marginals) if ordinal else _NOMINAL
    observed = (coincidences * distances).sum(axis=(-2, -1))
    expected = (marginals[..., :, None] * marginals[..., None, :] * distances).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1.0 - (total - 1) * observed / expected, np.nan)


def alpha_from_counts(counts, level: str = "nominal") -> float:
    """Krippendorff's α from (u, 3) judgement counts over (−1, 0, +1); ``level`` nominal|ordinal.

    Comparisons with fewer than two judgements are ignored. NaN when no comparison has two
    judgements or all judgements agree on one value.

    Four comparisons judged three times each (counts of −1, 0, +1); one split 2–1:

    >>> round(alpha_from_counts([[3, 0, 0], [0, 0, 3], [2, 1, 0], [0, 3, 0]]), 3)
    0.766
    """
    if level not in ("nominal", "ordinal"):
        raise ValueError(f"level must be 'nominal' or 'ordinal', got {level!r}")
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != _V or (counts < 0).any():
        raise ValueError(f"counts must be a (u, 3) array of counts >= 0, got shape {counts.shape}")
    pairable = counts[counts.sum(axis=1) >= 2]
    if not len(pairable):
        return math.nan
    return float(_alpha(_unit_coincidences(pairable).sum(axis=0), level == "ordinal"))


def _percent_agreement(counts: np.ndarray) -> float:
    n = counts.astype(float)
    m = n.sum(axis=1)
    return float(np.mean((n * (n - 1)).sum(axis=1) / (m * (m - 1))))


def _interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    defined = replicates[~np.isnan(replicates)]
    if not len(defined):
        return (math.nan, math.nan)
    tail = (1 - level) / 2
    low, high = np.quantile(defined, [tail, 1 - tail])
    return (float(low), float(high))


def agreement(
    comparisons: Sequence[Hashable],
    annotators: Sequence[Hashable],
    values,
    *,
    bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Agreement:
    """Krippendorff's α (nominal, ordinal), percent agreement and bootstrap intervals.

    One entry per judgement (see :func:`value_counts` for the preconditions). ``bootstrap``
    replicates resample comparisons (clusters) with replacement, seeded by ``seed``;
    ``bootstrap=0`` gives NaN intervals. With no comparison judged twice every figure is NaN.
    """
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    counts = value_counts(comparisons, annotators, values)
    counts = counts[counts.sum(axis=1) >= 2]
    units = len(counts)
    if not units:
        nan2 = (math.nan, math.nan)
        return Agreement(0, 0, math.nan, math.nan, math.nan, nan2, nan2, level, bootstrap)
    per_unit = _unit_coincidences(counts).reshape(units, _V * _V)
    total = per_unit.sum(axis=0).reshape(_V, _V)
    nominal_reps = np.empty(bootstrap)
    ordinal_reps = np.empty(bootstrap)
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOTSTRAP_CELLS // (units * _V * _V))
    for start in range(0, bootstrap, chunk):
        size = min(chunk, bootstrap - start)
        drawn = rng.integers(0, units, size=(size, units))
        resampled = per_unit[drawn].sum(axis=1).reshape(size, _V, _V)
        nominal_reps[start:start + size] = _alpha(resampled, ordinal=False)
        ordinal_reps[start:start + size] = _alpha(resampled, ordinal=True)
    no_interval = (math.nan, math.nan)
    return Agreement(
        comparisons=units,
        judgements=int(counts.sum()),
        alpha_nominal=float(_alpha(total, ordinal=False)),
        alpha_ordinal=float(_alpha(total, ordinal=True)),
        percent_agreement=_percent_agreement(counts),
        alpha_nominal_ci=_interval(nominal_reps, level) if bootstrap else no_interval,
        alpha_ordinal_ci=_interval(ordinal_reps, level) if bootstrap else no_interval,
        level=level,
        bootstrap=bootstrap,
    )


def agreement_by_group(
    groups: Sequence[Hashable],
    comparisons: Sequence[Hashable],
    annotators: Sequence[Hashable],
    values,
    **options,
) -> dict[Hashable, Agreement]:
    """:func:`agreement` per group (e.g. per system pair); one group label per judgement.

    Groups are returned sorted; ``options`` are passed on (bootstrap, level, seed).
    """
    comparisons, annotators, values = list(comparisons), list(annotators), np.asarray(values)
    groups = list(groups)
    if len(groups) != len(comparisons):
        raise ValueError(f"groups has {len(groups)} entries for {len(comparisons)} judgements")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for k, group in enumerate(groups):
        members[group].append(k)
    return {
        group: agreement([comparisons[k] for k in rows], [annotators[k] for k in rows], values[rows], **options)
        for group, rows in sorted(members.items())
    }


def bundle_judgements(bundle) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], list[str], np.ndarray]:
    """A bundle's human_preference rows as (pairs, comparisons, annotators, values), one per row.

    A comparison is (item, first, second) with the pair in canonical order (first < second)
    and the value signed for that order. A row without an annotator is its own coder.
    """
    pairs, comparisons, annotators, values = [], [], [], []
    for row in bundle.human_preferences:
        first, second, sign = canonical_pair(row.first, row.second)
        pairs.append((first, second))
        comparisons.append((row.item, first, second))
        annotators.append(row.annotator or f"(no annotator, line {row.line})")
        values.append(sign * row.preference)
    return pairs, comparisons, annotators, np.asarray(values, dtype=np.int64)


# --- command line ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.agreement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", help="study bundle (.jsonl or .jsonl.gz) with human_preference rows")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--by-pair", action="store_true", help="add agreement per system pair")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    try:
        bundle = read_bundle(args.bundle)
    except (BundleError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pairs, comparisons, annotators, values = bundle_judgements(bundle)
    options = {"bootstrap": args.bootstrap, "level": args.level, "seed": args.seed}
    try:
        overall = agreement(comparisons, annotators, values, **options)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not overall.comparisons:
        print("error: no comparison has two or more human_preference rows", file=sys.stderr)
        return 1
    result = overall.as_dict()
    if args.by_pair:
        by_pair = agreement_by_group(pairs, comparisons, annotators, values, **options)
        result["pairs"] = {f"{a} vs {b}": r.as_dict() for (a, b), r in by_pair.items()}
    if args.json:
        print(json.dumps(result))
        return 0
    for key, value in result.items():
        if key != "pairs":
            print(f"{key:<20}  {value}")
    for name, row in result.get("pairs", {}).items():
        print(f"{name}: comparisons {row['comparisons']}, alpha_nominal {row['alpha_nominal']}, "
              f"alpha_ordinal {row['alpha_ordinal']}, percent_agreement {row['percent_agreement']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
