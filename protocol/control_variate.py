"""The metric as a control variate of the e-process (issue 38 part 3; docs/formulas.md §8).

The default e-process of a pair (``protocol.adaptive``) multiplies its wealth, at every item's
first human judgement s in {-1, 0, 1} (+1: the first system better), by

    1 + b (s - lam (m - c))                                                         (CV)

m the metric's value of the judged item (its three-way label, or a calibrated prediction of
the human label from several metrics: ``cross_fitted_predictions``), c the metric's mean over
the pair's items not yet judged when the item's round opened (known: the metric has scored
every item), lam the reliance on the metric and b the bet, both fixed when the round opened
from the labels seen so far (predictable). This is the prediction-powered (control-variate)
e-value of R-AutoEval+ / PPI: s - lam (m - c) has the mean of s, and less variance when the
metric tracks the humans, so the bets grow the wealth faster.

Why it stays valid. The null is "the humans prefer neither system, whatever the metric says":
given the metric's values of all items and the labels seen so far, the next item's human
label has mean 0 (in the replay's item-flip null every item's human label is a fair ±, the
favouritism null keeps this with a metric that favours one system). The app draws the item
uniformly from the pair's items not yet judged, so E[m | past] = c exactly, and
E[s - lam (m - c) | past] = 0 whatever lam, b and the metric. With |b| (1 + |lam| max |m - c|)
<= max_bet < 1 (the max over the items the round may draw) the factor stays positive, so the wealth is a nonnegative (super)martingale and Ville's
inequality gives P(wealth ever >= 1/gamma) <= gamma; e-BH over the pairs (protocol.rules.
family_thresholds) then bounds the false discovery rate by gamma (e-values, any dependence).
A round's k items are a draw without replacement from the same candidates with the same b and
lam: their metric terms are negatively correlated (-Var / (R - 1)), which can only lower the
round's expected product. Items chosen with unequal chances (separability) keep lam = 0: the
inverse-probability step of protocol.rules.weighted_bet, valid as before.

Under the replay's item-flip null (metric and humans flip together) the metric values of the
items still unjudged predict those items' human labels, so the centres c lean with the labels
to come: the bet's direction is therefore taken from the pair's human margin alone (``cv_bet``),
never from sum (s - lam d), which holds past centres (with it, 0.13-0.15 of null PandaLM
studies had a false ±; without, none in the measurements of docs/results.md).

Never worse than human-only by construction: lam = 0 is exactly the human-only e-process
(``cv_bet`` with lam = 0 is protocol.rules.bet without a metric, b = (n+ - n-) / (n+ + n- + 1)),
and lam is the least-squares slope of s on m over the study's judged items, shrunk towards 0
by ``PRIOR_ITEMS`` pseudo-items: a useless metric gets lam near 0 and costs (almost) nothing.
Each round takes that reliance, half of it or none, whichever promises the pair the most growth
on its past steps (protocol.machine.cv_basis): a large reliance caps the bet lower, which a
clearly separated pair would pay for. The reliance is pooled over the study's pairs (its
estimate on one pair's few labels is noisy); any pair's past labels may enter it, since only
the next label must be unpredictable.

Several metrics (judges) combine through a calibration cross-fitted on the OTHER pairs: for
pair p the prediction of an item is x' beta_{-p}, beta_{-p} the ridge least-squares fit of
the human labels on the metrics' values over the judged items of every pair but p (no
intercept, so exchanging the systems negates the prediction). No label of p enters p's
prediction, and lam on top rescales it: a calibration that does not transfer gets lam near 0.
Pure numpy, no Django.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: pseudo-items of no covariance that shrink the reliance lam towards 0 (human only)
PRIOR_ITEMS = 20.0
#: ridge penalty of the cross-fitted calibration (in items)
RIDGE = 5.0


@dataclass(frozen=True)
class Moments:
    """Sums over judged items with a metric value (first judgement s, metric m), pooled over a
    study's pairs: the sufficient statistics of the reliance lam.

    n, s, m, ss, mm, sm: item count, sums of s, m, s^2, m^2, s m (floats)
    """

    n: float = 0.0
    s: float = 0.0
    m: float = 0.0
    ss: float = 0.0
    mm: float = 0.0
    sm: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float], metric: Sequence[float]) -> "Moments":
        """values (k,), metric (k,)."""
        s = np.asarray(values, dtype=float)
        m = np.asarray(metric, dtype=float)
        return cls(float(len(s)), float(s.sum()), float(m.sum()), float(s @ s), float(m @ m), float(s @ m))

    def __add__(self, other: "Moments") -> "Moments":
        return Moments(self.n + other.n, self.s + other.s, self.m + other.m, self.ss + other.ss,
                       self.mm + other.mm, self.sm + other.sm)


def reliance(moments: Moments, *, prior: float = PRIOR_ITEMS) -> float:
    """lam in [-1, 1]: the centred least-squares slope of s on m, Cov(s, m) / Var(m) (the
    variance-minimising coefficient of the control variate) times n / (n + prior): shrunk
    towards 0 (human only) as if ``prior`` items without covariance had been seen, whatever
    the metric's scale. 0 without data."""
    n = moments.n
    if n < 2:
        return 0.0
    sxy = moments.sm - moments.s * moments.m / n
    sxx = moments.mm - moments.m * moments.m / n
    if sxx <= 1e-12:
        return 0.0
    return float(np.clip(sxy / sxx * n / (n + prior), -1.0, 1.0))


def cv_bet(wins: float, losses: float, residual_square: float, cross: float, lam: float, reach: float, *,
           max_bet: float) -> float:
    """The bet b of (CV) for the pair's next round, in [-cap, cap], cap = max_bet / (1 + |lam| reach),
    reach the largest |m - c| among the items the round may draw (so |s - lam (m - c)| <= 1 + |lam| reach).

    wins, losses: n+ and n- of the pair's human item labels; residual_square, cross: sums of
    d^2 and s d over its past steps, d = m - c the metric's residual at the step. Kelly for an
    increment X = s - lam d of mean mu and second moment v is b = mu / v; mu is estimated by
    the human margin alone, v by the steps' X:
        b = (n+ - n-) / (n+ + n- + lam^2 sum d^2 - 2 lam sum s d + 1).
    The margin, not sum X, sets the bet's direction because sum X holds the centres c of past
    steps, which lean as the metric's values of the items still unjudged lean; under the
    item-flip null those values predict the humans of those items, so a bet steered by them
    would lean with the next items' labels. With lam = 0 this is protocol.rules.bet without a
    metric, (n+ - n-) / (n+ + n- + 1). The cap keeps 1 + b X >= 1 - max_bet > 0.
    """
    numerator = wins - losses
    denominator = wins + losses + lam * lam * residual_square - 2.0 * lam * cross + 1.0
    cap = max_bet / (1.0 + abs(lam) * reach)
    return float(np.clip(numerator / max(denominator, 1e-12), -cap, cap))


def step_factor(value: int, wager: float, rho: float, lam: float, residual: float) -> float:
    """The wealth factor of one step: 1 + rho b (s - lam d) (rho = 1 for a uniform draw)."""
    return 1.0 + rho * wager * (value - lam * residual)


def centre_of(metric: Mapping[str, float], judged) -> float:
    """The metric's mean over the items that have a value and are not judged yet (0 when none)."""
    left = [float(v) for item, v in metric.items() if item not in judged]
    return float(np.mean(left)) if left else 0.0


def calibration_sums(features: Mapping[str, Sequence[float]], judged: Mapping[str, float], q: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """One pair's share of the cross-fitted calibration: x'x (q, q) and x'y (q,) over its judged
    items with features (x an item's (q,) features, y its human label). With integer features
    and labels (the metrics' three-way labels) every entry is an integer, so sums of them over
    any pairs, in any order, are exact (below 2^53): what lets a round close keep them per pair
    row and sum them by group (annotation/serving/protocol_state.py) yet fit what the close over
    every pair fits."""
    rows = [(features[item], value) for item, value in judged.items() if item in features]
    x = np.array([r[0] for r in rows], dtype=float).reshape(-1, q)
    y = np.array([r[1] for r in rows], dtype=float)
    return x.T @ x, x.T @ y


def cross_fitted_predictions(
    features: Mapping[tuple[str, str], Mapping[str, Sequence[float]]],
    judged: Mapping[tuple[str, str], Mapping[str, float]],
    *,
    ridge: float = RIDGE,
    outside: tuple[np.ndarray, np.ndarray] | None = None,
    only: Collection[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], dict[str, float]]:
    """Each pair's calibrated prediction of the human label from several metrics, fitted on
    the OTHER pairs' judged items only.

    features  pair -> {item: (q,) the metrics' values of the item, + = first system better}
    judged    pair -> {item: human label (its first judgement) in {-1, 0, 1}} of judged items
    outside   (x'x (q, q), x'y (q,)) summed over the study's pairs ``features`` leaves out
              (``calibration_sums``; a partial state), None: it leaves none out
    only      the pairs to predict (default every pair of ``features``); every pair of
              ``features`` still enters the others' fits
    Returns pair -> {item: x' beta_{-pair} clipped to [-1, 1]}, beta_{-pair} the ridge fit
    (penalty ``ridge``, no intercept) of the labels on the features over every other pair,
    shrunk towards the first metric alone (beta = (1, 0, ...)): before any other pair has a
    judged item the prediction is the first metric's value.
    """
    pairs = sorted(features)
    q = max((len(next(iter(f.values()))) for f in features.values() if f), default=0)
    if outside is not None and q and outside[1].shape != (q,):
        raise ValueError(f"outside: sums of {outside[1].shape[0]} metrics, the features have {q}")
    gram = {}
    moment = {}
    for key in pairs:
        gram[key], moment[key] = calibration_sums(features[key], judged.get(key, {}), q)
    total_gram = sum(gram.values(), np.zeros((q, q)) if outside is None else np.array(outside[0], dtype=float))
    total_moment = sum(moment.values(), np.zeros(q) if outside is None else np.array(outside[1], dtype=float))
    out = {}
    for key in pairs if only is None else sorted(set(only) & set(pairs)):
        g = total_gram - gram[key]
        v = total_moment - moment[key]
        prior = np.eye(q)[0] if q else np.zeros(0)
        beta = np.linalg.solve(g + ridge * np.eye(q), v + ridge * prior) if q else np.zeros(0)
        items = sorted(features[key])
        x = np.array([features[key][i] for i in items], dtype=float).reshape(-1, q)
        out[key] = dict(zip(items, np.clip(x @ beta, -1.0, 1.0).tolist()))
    return out


def features_of(label_maps: Sequence[Mapping[tuple[str, str], Mapping[str, float]]]
                ) -> dict[tuple[str, str], dict[str, tuple[float, ...]]]:
    """The features of ``cross_fitted_predictions`` from q metrics' labels: pair -> {item: (q,)
    the metrics' labels of the item, 0 where a metric has none}, over the items any metric has.

    label_maps  (q,) pair -> {item: label, + = first system better}, one per metric, the
                first the one the prediction is shrunk towards
    """
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for k, labels in enumerate(label_maps):
        for key, by_item in labels.items():
            rows = out.setdefault(key, {})
            for item, value in by_item.items():
                rows.setdefault(item, [0.0] * len(label_maps))[k] = float(value)
    return {key: {item: tuple(v) for item, v in rows.items()} for key, rows in out.items()}
