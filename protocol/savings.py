"""How many human labels a metric can save at best: a lower bound for any rule (issue 19).

A pair's N items each carry a metric label m (3 classes: +, =, -) and, in a full evaluation, a
human label h in {-1, 0, +1}; the quantity decided is mu = E[h]. A human-only rule with n_h
labels estimates it with variance sigma^2 / n_h. A rule that also reads the metric's labels on
all N items can do no better (one look, normal approximation) than the semiparametric
efficiency bound for a mean with the outcome seen on a random subset of n items:

    uniform draws         V(n) = E[Var(h | m)] / n + Var(E[h | m]) / N
    draws chosen by m     V(n) = (sum_c p_c sigma_c)^2 / n + Var(E[h | m]) / N   (Neyman: pi_c ~ sigma_c)

(p_c: share of class c among the N items, sigma_c^2 = Var(h | m = c)). The estimator
post-stratified by the metric's label reaches it asymptotically (prediction-powered inference,
PPI++, with one coefficient on m only when E[h | m] is linear in m); a sequential,
anytime-valid rule needs more. Equal precision, V(n) =
sigma^2 / n_h, gives the least share of the human-only rule's labels any metric-assisted rule
can make do with:

    n / n_h = a / (1 - eta^2 n_h / N),   a = 1 - eta^2 (uniform) or (sum_c p_c sigma_c)^2 / sigma^2 (Neyman)

with eta^2 = Var(E[h | m]) / sigma^2, the correlation ratio: the share of a pair's label
variance the metric's label explains. The moments are those of the pair's full human
labels (an oracle no real rule has), and the Neyman bound ignores pi_c <= 1: both only make
the bound lower, so a target below it is out of reach on that data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CLASSES = (1, 0, -1)


@dataclass(frozen=True)
class LabelSavingsBound:
    """The bound on one pair (module doc); ratios are nan when the human labels do not vary.

    items          N, the pair's items with both labels
    eta2           Var(E[h | m]) / Var(h)
    neyman_share   (sum_c p_c sigma_c)^2 / Var(h), at most 1 - eta2
    uniform_ratio  least n / n_h with items drawn uniformly
    active_ratio   least n / n_h with items drawn by metric class (Neyman allocation)
    """

    items: int
    eta2: float
    neyman_share: float
    uniform_ratio: float
    active_ratio: float


ROUNDING = 1e-12


def label_savings_bound(human, metric, *, human_labels: float) -> LabelSavingsBound:
    """The bound for one pair.

    human, metric  (N,) labels in {-1, 0, 1} of the same items (the full evaluation's human
                   label and the metric's label of each item)
    human_labels   n_h, the labels a human-only rule spends on the pair, 0 < n_h <= N

    Eight items, a metric that mostly agrees with the humans, a human-only rule that would
    spend 4 labels: any rule with this metric still needs at least 0.77 of those labels drawn
    uniformly (0.65 drawn where they help most):

    >>> bound = label_savings_bound([1, 1, 1, 0, -1, -1, 1, 1], [1, 1, 0, 0, -1, 1, 1, 1], human_labels=4)
    >>> round(bound.eta2, 3), round(bound.uniform_ratio, 2), round(bound.active_ratio, 2)
    (0.37, 0.77, 0.65)
    """
    h = np.asarray(human, dtype=float)
    m = np.asarray(metric, dtype=int)
    if h.shape != m.shape or h.ndim != 1:
        raise ValueError(f"human and metric must be (N,) arrays of the same items, got {h.shape} and {m.shape}")
    if not (np.isin(h, CLASSES).all() and np.isin(m, CLASSES).all()):
        raise ValueError("labels must be -1, 0 or 1")
    items = len(h)
    if not 0 < human_labels <= items:
        raise ValueError(f"human_labels must lie in (0, {items}], got {human_labels}")
    variance = float(h.var())
    if variance == 0.0:
        return LabelSavingsBound(items, math.nan, math.nan, math.nan, math.nan)
    shares = np.array([np.mean(m == c) for c in CLASSES])
    means = np.array([h[m == c].mean() if (m == c).any() else 0.0 for c in CLASSES])
    sds = np.array([h[m == c].std() if (m == c).any() else 0.0 for c in CLASSES])
    # A metric that explains the humans exactly gives eta2 = 1 up to rounding, on either side
    # of 1 depending on the labels' signs: below ROUNDING the unexplained share and the room
    # are zero, else a ratio of two rounding errors (0 or 1) broke the swap symmetry.
    eta2 = min(float(np.sum(shares * (means - h.mean()) ** 2) / variance), 1.0)
    unexplained = 1.0 - eta2 if 1.0 - eta2 > ROUNDING else 0.0
    neyman_share = float(np.sum(shares * sds) ** 2 / variance)
    room = 1.0 - eta2 * human_labels / items  # > 0 unless the metric alone is as precise
    return LabelSavingsBound(
        items=items,
        eta2=eta2,
        neyman_share=neyman_share,
        uniform_ratio=max(0.0, unexplained / room) if room > ROUNDING else 0.0,
        active_ratio=max(0.0, neyman_share / room) if room > ROUNDING else 0.0,
    )


def study_label_savings(pairs, *, fraction: float) -> dict[str, float]:
    """The bound over a study's pairs, each given ``fraction`` of its items as the human-only
    rule's labels: ratios weighted by each pair's n_h (the study's labels, not a pair's).

    pairs  iterable of (human, metric) arrays as for :func:`label_savings_bound`
    Returns pairs (counted), pairs_constant (human labels all alike, left out), eta2 (mean),
    uniform_ratio, active_ratio.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    bounds, weights, constant = [], [], 0
    for human, metric in pairs:
        n_h = fraction * len(human)
        if n_h <= 0:
            continue
        bound = label_savings_bound(human, metric, human_labels=n_h)
        if math.isnan(bound.eta2):
            constant += 1
            continue
        bounds.append(bound)
        weights.append(n_h)
    if not bounds:
        raise ValueError("no pair whose human labels vary")
    w = np.asarray(weights)
    return {
        "pairs": len(bounds),
        "pairs_constant": constant,
        "eta2": float(np.mean([b.eta2 for b in bounds])),
        "uniform_ratio": float(np.average([b.uniform_ratio for b in bounds], weights=w)),
        "active_ratio": float(np.average([b.active_ratio for b in bounds], weights=w)),
    }
