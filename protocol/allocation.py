"""Which items of a system pair to send to annotators next (Separability paper §4, docs/formulas.md §7).

The paper recommends spending human judgements where a preference can be given
consistently: items with high separability δ. Three policies:

``uniform``     every not-yet-judged candidate equally likely (the baseline);
``weighted``    probability ∝ exp(δ / temperature) — low temperature concentrates on the most
                separable items, high temperature tends to ``uniform``;
``stratified``  δ's range is cut into bins and the draws are spread evenly over the bins that
                still have open candidates, so every separability band is represented (useful
                when the goal is to *measure* how preferences depend on δ rather than to
                exploit it). The bins take turns in a random order, so a single draw (the app
                serves one item per HIT) falls in each such bin with equal probability.

Draws are without replacement and reproducible: the same candidates (in any order), the same
judged set and the same seed give the same items.

Choosing by δ biases what the human labels estimate: the decision function treats the judged
items as a random sample of the pair's items, but ``weighted`` over-samples separable items,
whose preferences are clearer (separability human data, samsum mistral vs vicuna: the mean
preference 0.104 of all items becomes 0.318 under δ-weighting at temperature 0.25). The
correction is design-based: record each draw's selection probability among the open
candidates (:func:`selection_probability`, what the app stores on the Assignment), turn the
sequence into per-item weights with :func:`design_weights` (Des Raj's estimator for ordered
draws without replacement, unbiased for the population total), and give those weights to
``protocol.decision.counts_from_labels(human_weights=...)``. The weights are exact when every
draw chooses among all items not drawn before; in the app an item can be out of the draw for a
while (leased to another annotator, already judged by this one when several ratings per item
are asked for), which makes them approximate. Measured on the separability data
(scripts/report/item_choice.py, docs/results.md): the weighted margin matches the margin of
all items within its error, the unweighted one is off by up to 0.24.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

POLICIES = ("uniform", "weighted", "stratified")
#: Lowest temperature of ``weighted`` choice. Separability is normalised to [-1, 1], so at
#: temperature T the least separable candidate's chance can fall to exp(-2 / T) of the most
#: separable one's: e^-20 at 0.1. The error-controlled rule stays valid at any temperature
#: (its steps are weighted by rho = smallest chance / chance, protocol.adaptive), but below
#: 0.1 its steps on the over-sampled items shrink to nothing and the design weights of the
#: Bayesian rule rest on a handful of draws (measured: docs/results.md, "Item choice").
MIN_TEMPERATURE = 0.1
TEMPERATURE_REASON = (
    "temperatures below {minimum} make separability-weighted choice invalid for the decision: the least "
    "separable items' chance falls below e^-{exponent:.0f} of the most separable's, so the error-controlled "
    "rule's inverse-probability steps vanish and the design weights rest on a handful of draws"
)


def check_temperature(temperature: float) -> float:
    """``temperature`` if weighted choice may use it, else ValueError naming the reason."""
    if not (isinstance(temperature, (int, float, np.floating)) and np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    if temperature < MIN_TEMPERATURE:
        raise ValueError(f"temperature {temperature!r} is below {MIN_TEMPERATURE}: " + TEMPERATURE_REASON.format(
            minimum=MIN_TEMPERATURE, exponent=2 / MIN_TEMPERATURE))
    return float(temperature)


def _generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def _bin_index(separability: np.ndarray, bins: int | Sequence[float]) -> np.ndarray:
    """Bin number (0 = lowest δ) of every candidate; shape (k,)."""
    if np.isscalar(bins):
        if int(bins) != bins or int(bins) < 1:
            raise ValueError(f"bins must be a positive integer or a sequence of edges, got {bins!r}")
        low, high = float(separability.min()), float(separability.max())
        if high == low:
            return np.zeros(len(separability), dtype=int)
        edges = np.linspace(low, high, int(bins) + 1)
    else:
        edges = np.asarray(bins, dtype=float)
        if edges.ndim != 1 or len(edges) < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise ValueError("bin edges must be at least two finite, strictly increasing numbers")
    # Interior edges only: values below the first edge or above the last fall in the end bins.
    return np.searchsorted(edges[1:-1], separability, side="right")


def selection_weights(
    separability: np.ndarray, *, policy: str = "weighted", temperature: float = 0.1
) -> np.ndarray:
    """Relative chance of each candidate under ``uniform`` or ``weighted``; shape (k,), sums to 1."""
    separability = np.asarray(separability, dtype=float)
    if policy == "uniform":
        return np.full(len(separability), 1.0 / max(len(separability), 1))
    if policy != "weighted":
        raise ValueError(f"selection_weights supports 'uniform' and 'weighted', not {policy!r}")
    check_temperature(temperature)
    logits = separability / temperature
    weights = np.exp(logits - logits.max()) if len(logits) else logits
    return weights / weights.sum() if len(weights) else weights


def choose_items(
    candidates: Sequence[str],
    separability: np.ndarray | Sequence[float],
    judged: Collection[str],
    count: int,
    *,
    policy: str = "uniform",
    temperature: float = 0.1,
    bins: int | Sequence[float] = 4,
    seed: int | np.random.Generator | None = None,
) -> list[str]:
    """Draw up to ``count`` distinct candidate ids that are not in ``judged``.

    candidates    item ids of one system pair, shape (k,), unique
    separability  δ of each candidate, shape (k,), finite (normalised δ lies in [-1, 1])
    judged        ids already judged (or leased) — never returned
    count         how many to draw; fewer are returned when fewer remain
    policy        "uniform" | "weighted" (∝ exp(δ/temperature)) | "stratified" (``bins``:
                  a number of equal-width bins over the candidates' δ range, or bin edges)
    seed          int, numpy Generator or None (None = not reproducible)

    Returns the ids in draw order (the first is the one to serve first).
    """
    ids, delta, open_ = _open_candidates(candidates, separability, judged, policy)
    if len(set(ids)) != len(ids):
        raise ValueError("candidates contain duplicate item ids")
    if not np.all(np.isfinite(delta)):
        raise ValueError("separability contains NaN or infinite values")
    if int(count) != count or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    if policy == "weighted":
        check_temperature(temperature)
    rng = _generator(seed)
    if not ids:
        return []

    # A canonical order makes the draw independent of how the caller listed the candidates.
    order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    ids = [ids[i] for i in order]
    delta = delta[order]
    open_ = open_[order]
    # Bins come from all candidates so that judging items does not move the bin edges.
    strata = _bin_index(delta, bins) if policy == "stratified" else None
    count = min(int(count), int(open_.sum()))
    if count == 0:
        return []
    positions = np.flatnonzero(open_)

    if policy == "uniform":
        chosen = rng.permutation(positions)[:count]
    elif policy == "weighted":
        # Gumbel top-k = successive weighted draws without replacement.
        keys = delta[positions] / temperature + rng.gumbel(size=len(positions))
        chosen = positions[np.argsort(-keys, kind="stable")[:count]]
    else:
        chosen = _stratified(positions, strata[positions], count, rng)
    return [ids[i] for i in chosen]



def _open_candidates(candidates, separability, judged, policy: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The arguments of a draw checked: candidate ids (str), their separability, shape (n,),
    and which are open (not judged), bool shape (n,); ValueError naming a bad argument."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    ids = [str(c) for c in candidates]
    delta = np.asarray(separability, dtype=float)
    if delta.shape != (len(ids),):
        raise ValueError(f"separability must have shape ({len(ids)},) like candidates, got {delta.shape}")
    judged_set = set(map(str, judged))
    return ids, delta, np.array([i not in judged_set for i in ids], dtype=bool)


def draw_chances(
    candidates: Sequence[str],
    separability: np.ndarray | Sequence[float],
    judged: Collection[str],
    *,
    policy: str = "uniform",
    temperature: float = 0.1,
    bins: int | Sequence[float] = 4,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each candidate's chance to be the item ``choose_items(..., count=1)`` returns, with the
    arguments of :func:`choose_items`.

    Returns (ids, open, chance): the candidate ids as str, shape (k,); which are open (not
    judged), bool shape (k,); the chance of each, shape (k,), 0 for a judged one. uniform:
    1 / open candidates; weighted: exp(δ/T) over the open candidates' sum; stratified:
    1 / (bins with open candidates) x 1 / (open candidates in the candidate's bin).
    """
    ids, delta, open_ = _open_candidates(candidates, separability, judged, policy)
    chance = np.zeros(len(ids))
    if not open_.any():
        return ids, open_, chance
    if policy == "uniform":
        chance[open_] = 1.0 / int(open_.sum())
    elif policy == "weighted":
        chance[open_] = selection_weights(delta[open_], policy="weighted", temperature=temperature)
    else:
        strata = _bin_index(delta, bins)
        occupied, sizes = np.unique(strata[open_], return_counts=True)
        size_of = dict(zip(occupied.tolist(), sizes.tolist()))
        chance[open_] = [1.0 / (len(occupied) * size_of[b]) for b in strata[open_].tolist()]
    return ids, open_, chance


def selection_probability(candidates: Sequence[str], separability: np.ndarray | Sequence[float],
                          judged: Collection[str], chosen: str, **options) -> float:
    """Probability that ``choose_items(..., count=1)`` with these arguments returns ``chosen``
    (an open candidate); ``options`` (policy, temperature, bins) as for :func:`draw_chances`."""
    ids, open_, chance = draw_chances(candidates, separability, judged, **options)
    try:
        at = ids.index(str(chosen))
    except ValueError:
        raise ValueError(f"chosen item {chosen!r} is not a candidate") from None
    if not open_[at]:
        raise ValueError(f"chosen item {chosen!r} is judged (not open), so it cannot be drawn")
    return float(chance[at])


def choose_one(candidates: Sequence[str], separability: np.ndarray | Sequence[float], judged: Collection[str], *,
               seed: int | np.random.Generator | None = None, **options) -> tuple[str, float]:
    """One draw, ``choose_items(..., count=1)``, and its chance, ``selection_probability``.

    The arguments of :func:`choose_items` (``options``: policy, temperature, bins); ValueError
    when no candidate is open.
    """
    drawn = choose_items(candidates, separability, judged, 1, seed=seed, **options)
    if not drawn:
        raise ValueError("no open candidate to draw")
    return drawn[0], selection_probability(candidates, separability, judged, drawn[0], **options)


def smallest_selection_probability(candidates: Sequence[str], separability: np.ndarray | Sequence[float],
                                   judged: Collection[str], **options) -> float:
    """The smallest chance any open candidate has in ``choose_items(..., count=1)`` with these
    arguments (``options`` as for :func:`draw_chances`). The error-controlled rule takes
    rho = this / the drawn item's chance for the draw's step
    (``protocol.adaptive.record_judgements(smallest=...)``)."""
    _, open_, chance = draw_chances(candidates, separability, judged, **options)
    if not open_.any():
        raise ValueError("no open candidate: nothing can be drawn")
    return float(chance[open_].min())


def design_weights(draw_probabilities: Sequence[float]) -> np.ndarray:
    """Per-item weights of n items drawn one after another without replacement; shape (n,).

    draw_probabilities[k]: the probability with which the k-th item (in draw order) was
    chosen among the items still open at that draw (:func:`selection_probability`).
    Des Raj (1956): t_k = y_1 + ... + y_{k-1} + y_k / q_k is unbiased for the population total
    Y given the earlier draws, so is their mean, which puts on the k-th item the coefficient
    c_k = (1 / q_k + n - k) / n (k = 1..n) — what this returns. sum_k c_k y_k estimates Y
    without bias and sum_k c_k estimates the number of items, so the weighted share of a label
    estimates its share among all items whatever the (known) selection probabilities.
    Precondition: every probability lies in (0, 1] and the open set at each draw was every
    item not drawn before (items set aside for other reasons break unbiasedness).
    """
    q = np.asarray(draw_probabilities, dtype=float)
    if q.ndim != 1 or not np.all((q > 0) & (q <= 1)):
        raise ValueError("draw_probabilities must be a (n,) sequence of probabilities in (0, 1]")
    n = len(q)
    return (1.0 / q + (n - np.arange(1, n + 1))) / n if n else q


def kish_ess(weights: Sequence[float]) -> float:
    """Kish's effective sample size of weights w (n,): (sum w)^2 / sum w^2 (n for equal weights).

    >>> kish_ess([1.0, 1.0, 1.0, 1.0]), kish_ess([3.0, 1.0])
    (4.0, 1.6)
    """
    w = np.asarray(weights, dtype=float)
    return float(w.sum() ** 2 / (w ** 2).sum())


def _stratified(positions: np.ndarray, strata: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Round-robin over the bins with open candidates in a random order, uniform within a bin."""
    occupied = sorted(set(strata.tolist()))
    queues = [rng.permutation(positions[strata == occupied[k]]).tolist() for k in rng.permutation(len(occupied))]
    chosen: list[int] = []
    while len(chosen) < count:
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop())
    return np.asarray(chosen, dtype=int)


def kind_turn(kinds: Sequence[str], taken: Sequence[bool], open_: Sequence[bool],
              rng: np.random.Generator | int | None = None) -> int:
    """The candidate to serve next so that a pair's items take turns over the kinds of prompt,
    one draw at a time (the active design's prompt-kind model: protocol.active_ranking.stratified
    is the same turns over a whole order): among the kinds with an open candidate, those with the
    fewest candidates ``taken`` (judged or leased in the pair), one of them at random, then one of
    its open candidates at random. Independent of the labels, so the e-process's steps stay fair
    under the item-flip null (protocol.adaptive); the app records no draw chance for it.

    kinds  (n,) each candidate's kind; taken, open_  (n,) bool
    Returns the index of the candidate; ValueError when none is open.

    >>> kind_turn(["a", "a", "b", "b"], [True, False, False, False], [False, True, True, True], 0) in (2, 3)
    True
    """
    kinds = np.asarray(kinds, dtype=object)
    taken, open_ = np.asarray(taken, dtype=bool), np.asarray(open_, dtype=bool)
    if not (kinds.shape == taken.shape == open_.shape and kinds.ndim == 1):
        raise ValueError(f"kinds, taken and open must be (n,) alike, got {kinds.shape}, {taken.shape}, {open_.shape}")
    if not open_.any():
        raise ValueError("no open candidate to draw")
    rng = _generator(rng)
    names = sorted(set(kinds[open_].tolist()))
    count = np.array([np.count_nonzero(taken & (kinds == name)) for name in names])
    fewest = [name for name, n in zip(names, count) if n == count.min()]
    kind = fewest[int(rng.integers(len(fewest)))]
    return int(rng.choice(np.flatnonzero(open_ & (kinds == kind))))
