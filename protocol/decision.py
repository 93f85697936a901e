"""The Bayesian decision function of one system pair (docs/formulas.md §4; Correction of Errors §3, Alg. 1).

Model, for one pair (class order +, =, - everywhere):
    mu[:, c'] ~ Dirichlet(1)   P(metric label c | oracle label c')
    p         ~ Dirichlet(1)   P(oracle label)
    paired items: (metric c, human c') with probability mu[c, c'] p[c']   -> counts N[c, c']
    human-only items: human c' with probability p[c']                       -> counts h[c']
    metric-only items: metric c with probability (mu @ p)[c]                -> counts m[c]
which is the paper's mu[:, c'] ~ Dir(N[:, c'] + 1), p ~ Dir(n + 1), m ~ Mult(mu @ p).
theta = P(p+ > p- | data); decision +1 if theta > 1 - gamma/2, -1 if theta < gamma/2, else 0.

Two methods:

``method="nuts"`` is the paper's numpyro NUTS (5 chains, 2000 warm-up + 10000 draws by
default), kept as the reference.

``method="fast"`` (default) is exact for this model:

* m = 0: the posterior of p is Dirichlet(n + 1), so theta = 1 - I_{1/2}(n+ + 1, n- + 1).
* m > 0: change variables from (p, mu) to the joint r[c, c'] = mu[c, c'] p[c'] and split r by
  rows: q = r.sum(1) (metric-label distribution), nu[c] = r[c] / q[c] (oracle | metric).
  Because a uniform prior on p and on the columns of mu equals a Dir(1) prior on r times
  prod p^-2 (Dirichlet aggregation), the posterior is exactly
      Dir(q; N.sum(1) + 3 + m) * prod_c Dir(nu[c]; N[c] + 1) * prod_c' p[c']^(h[c'] - 2),
  p = nu^T q, h = human-only counts. The metric-only counts, which make the data-augmentation
  Gibbs sampler of docs/formulas.md §4 mix slowly (ESS ~ 0.05 per draw), are absorbed exactly into q.
  The remaining factor is handled by a rejection sampler whose proposal carries its tail
  (for e = min(h - 2, 0) the proposal shifts t * |e| of Dirichlet mass, t = (N + 1) /
  (N.sum(0) + 3), so that, by the weighted AM-GM inequality, the weight
      w = exp(sum_cc' t |e_c'| log(mu[c, c'] / t[c, c']) + sum_c' max(h - 2, 0) log p_c')
  never exceeds 1. Accepting a proposal with probability w gives exact, independent posterior
  draws (``posterior_draws``). For theta the accept coin is Rao-Blackwellised: theta is the
  w-weighted mean of 1[p+ > p-] over all proposals (finite variance, as w <= 1), corrected
  by control variates q_c (nu_c+ - nu_c-), whose proposal means are known and whose sum is
  p+ - p-; its standard error is the delta-method one of that regression estimator (checked
  against the spread over seeds). Drawing continues per pair (up to ``max_draws``) while the
  standard error is above ``target_se`` or theta is within ``resolve_z`` standard errors of
  a threshold; pairs still that close at the cap are reported unresolved.

The importance sampler knows when it fails. Its proposal ignores the factor
prod p^(h - 2) of many human-only labels, so with many human-only labels, metric-only labels
and few paired items the weights collapse (Kish ESS = (sum w)^2 / sum w^2 of a few draws in
thousands) and the delta-method standard error is meaningless. Every pair's Kish ESS is
computed; a pair whose ESS per draw falls below ``min_ess_fraction`` (the weights are then
too uneven for their own error estimate), or whose ESS is below ``min_ess`` or standard
error above ``target_se`` at the draw cap, falls back to

* ``method="exact"``: summation over the metric-only splits. Given the latent oracle labels L
  (L[c, c'] metric-only items of metric label c and oracle label c'), the posterior of p is
  Dir(n + 1 + L.sum(0)), so theta = sum_L P(L | data) (1 - I_1/2(...)); and
      P(L | data) ∝ prod_cc' C(N[c, c'] + L[c, c'], L[c, c'])
                    * prod_c' Gamma(n_c' + 1 + k_c') / Gamma(N.sum(0)_c' + 3 + k_c'),
  k = L.sum(0) (Dirichlet-multinomial marginals of mu's columns and of p). The first factor is
  a product over rows, so the sum over L is a dynamic programme over rows on the column sums
  (k+, k=), in log space; used while its cost (``exact_budget`` element operations) allows;
* ``method="gibbs"`` otherwise: the docs/formulas.md §4 data-augmentation Gibbs sampler (chains in
  parallel, theta Rao-Blackwellised given L, standard error from the spread between chains).

Every pair reports its diagnostics: ``ess`` (Kish ESS of the importance weights; the
between-chain ESS for Gibbs; inf for the closed form and the exact sum), ``method`` and
``draws``.

Every pair draws from its own random stream, seeded by (seed, its counts), so a pair's result
does not depend on which other pairs share the call; each pair is decided in a canonical
orientation and mirrored, so exchanging the systems maps theta to exactly 1 - theta. The fast
method is numpy only (no JIT): a fresh process pays no compilation.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.special import betainc, gammaln

from .preferences import sign_of_mean_per_item

CLASSES = (1, 0, -1)  # index 0 = "+", 1 = "=", 2 = "-"
_REVERSE = np.array([2, 1, 0])

FAST_DEFAULTS = dict(
    first_draws=2048,      # importance draws per pair in the first round
    target_se=0.003,       # keep drawing until theta_se is below this ...
    resolve_z=3.0,         # ... and theta is this many standard errors from a threshold
    max_draws=1 << 16,     # per pair; pairs still unresolved then are reported unresolved
    threads=min(2, os.cpu_count() or 1),  # pairs drawn in parallel threads
    min_ess=200,           # a pair is not finished before its Kish ESS reaches this ...
    min_ess_fraction=0.05,  # ... and falls back once ESS / draws is below this
    exact_budget=40_000_000,  # element operations the exact sum may take, else Gibbs
    fallback=True,         # False: report the importance sampler's result whatever its ESS
)
NUTS_DEFAULTS = dict(num_chains=5, num_warmup=2000, num_samples=10000,
                     chain_method="vectorized", resolve_z=3.0)


# --------------------------------------------------------------------------------------------
# counts
# --------------------------------------------------------------------------------------------
def _as_count_array(value, shape: tuple[int, ...], name: str, fractional: bool = False) -> np.ndarray:
    """Non-negative counts as int64, or as float64 when ``fractional`` allows weighted counts
    that are not whole numbers (whole-number arrays are int64 either way)."""
    array = np.asarray(value)
    if array.dtype == bool or array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be an integer count array, got dtype {array.dtype}")
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    whole = True
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} must be finite, got {array.tolist()}")
        whole = bool(np.all(array == np.round(array)))
        if not whole and not fractional:
            raise ValueError(f"{name} must hold integer counts, got {array.tolist()}")
    if np.any(array < 0):
        raise ValueError(f"{name} must be non-negative, got {array.tolist()}")
    result = array.astype(np.int64 if whole else np.float64)
    result.setflags(write=False)
    return result


def _entropy(key: tuple) -> list[int]:
    """The counts as seed entropy: whole counts as they are (so integer counts seed exactly as
    before), weighted counts by their value in units of 2^-20, kept apart by an offset."""
    return [int(v) if float(v).is_integer() else int(round(float(v) * 2 ** 20)) + 2 ** 40 for v in key]


@dataclass(frozen=True, eq=False)
class PairCounts:
    """Counts of one system pair (class order +, =, -).

    paired:     (3, 3) int, N[c, c']: metric label c (rows), human label c' (columns)
    human_only: (3,) int, human labels of items without a metric label
    metric_only:(3,) int, m: metric labels of items without a human label
    paired and human_only may be weighted (non-negative reals, float64) when the human-labelled
    items were chosen with unequal probabilities (counts_from_labels(human_weights=...));
    metric_only is always whole.
    """

    paired: np.ndarray
    human_only: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int64))
    metric_only: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int64))

    def __post_init__(self):
        object.__setattr__(self, "paired", _as_count_array(self.paired, (3, 3), "paired", True))
        object.__setattr__(self, "human_only",
                           _as_count_array(self.human_only, (3,), "human_only", True))
        object.__setattr__(self, "metric_only",
                           _as_count_array(self.metric_only, (3,), "metric_only"))

    @property
    def n(self) -> np.ndarray:
        """(3,) all human labels: paired columns plus human-only."""
        return self.paired.sum(0) + self.human_only

    @property
    def m(self) -> np.ndarray:
        return self.metric_only

    def swapped(self) -> "PairCounts":
        """The same data with the two systems exchanged (+ and - trade places)."""
        return PairCounts(self.paired[np.ix_(_REVERSE, _REVERSE)],
                          self.human_only[_REVERSE], self.metric_only[_REVERSE])

    @classmethod
    def empty(cls) -> "PairCounts":
        return cls(np.zeros((3, 3), np.int64))

    @property
    def weighted(self) -> bool:
        """Whether the human counts are design-weighted (not all whole numbers)."""
        return self.paired.dtype.kind == "f" or self.human_only.dtype.kind == "f"

    def key(self) -> tuple[int | float, ...]:
        """The 15 counts as a tuple (hashable; seeds the pair's random stream)."""
        return (*self.paired.ravel().tolist(), *self.human_only.tolist(),
                *self.metric_only.tolist())

    def __eq__(self, other):
        if not isinstance(other, PairCounts):
            return NotImplemented
        return self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return (f"PairCounts(paired={self.paired.tolist()}, human_only={self.human_only.tolist()}, "
                f"metric_only={self.metric_only.tolist()})")


def _label_index(values, name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    if values.size and (values.dtype.kind not in "iuf" or not np.all(np.isin(values, CLASSES))):
        bad = values[~np.isin(values, CLASSES)] if values.dtype.kind in "iuf" else values
        raise ValueError(f"{name} must be labels in {{-1, 0, 1}}, got {bad[:5].tolist()}")
    return (1 - values.astype(np.int64))  # +1 -> 0, 0 -> 1, -1 -> 2


def counts_from_labels(human_items, human_values, metric_items, metric_values, *,
                       human_weights=None) -> PairCounts:
    """Split labelled items into the counts of docs/formulas.md §4.

    human_items, human_values: (k,) item ids and labels in {-1, 0, 1}; an item may carry
        several human labels: they count once, as the sign of their mean (the item is the
        unit, protocol.preferences.sign_of_mean_per_item).
    metric_items, metric_values: (j,) item ids and labels; at most one metric label per item.
    Metric labels of items that also have a human label go to ``paired`` only, never to m.
    human_weights: None, or item -> design weight (protocol.allocation.design_weights) for
        every human-labelled item, when the items were chosen with unequal probabilities
        (separability-weighted or stratified choice). Each item then counts with its weight,
        scaled so that the weights sum to their Kish effective sample size
        (sum w)^2 / sum w^2: the counts estimate the label shares of ALL the pair's items,
        not of the over-sampled ones, and the posterior is as wide as the unequal weights
        make the evidence (a weighted pseudo-likelihood). The metric-only counts stay
        whole; the population they describe is then only approximately the weighted one.
    """
    human_items = np.asarray(human_items)
    metric_items = np.asarray(metric_items)
    human_index = _label_index(human_values, "human_values")
    metric_index = _label_index(metric_values, "metric_values")
    if human_items.shape != human_index.shape:
        raise ValueError(f"human_items {human_items.shape} and human_values "
                         f"{human_index.shape} must have the same length")
    if metric_items.shape != metric_index.shape:
        raise ValueError(f"metric_items {metric_items.shape} and metric_values "
                         f"{metric_index.shape} must have the same length")
    metric_of = {}
    for item, label in zip(metric_items.tolist(), metric_index.tolist()):
        if item in metric_of:
            raise ValueError(f"item {item!r} has more than one metric label")
        metric_of[item] = label
    human_items, human_values = sign_of_mean_per_item(human_items, 1 - human_index)
    human_index = 1 - human_values.astype(np.int64)
    weight = _design_weight_of(human_items.tolist(), human_weights)
    paired = np.zeros((3, 3), np.float64 if human_weights is not None else np.int64)
    human_only = np.zeros(3, paired.dtype)
    for item, label in zip(human_items.tolist(), human_index.tolist()):
        if item in metric_of:
            paired[metric_of[item], label] += weight[item]
        else:
            human_only[label] += weight[item]
    judged = set(human_items.tolist())
    metric_only = np.zeros(3, np.int64)
    for item, label in metric_of.items():
        if item not in judged:
            metric_only[label] += 1
    return PairCounts(paired, human_only, metric_only)


def _design_weight_of(items: list, human_weights) -> dict:
    """item -> its count: 1, or its design weight scaled to the Kish effective sample size."""
    if human_weights is None:
        return dict.fromkeys(items, 1)
    missing = [item for item in items if item not in human_weights]
    if missing:
        raise ValueError(f"human_weights has no weight for the judged item {missing[0]!r}")
    raw = np.array([float(human_weights[item]) for item in items])
    if not np.all(np.isfinite(raw) & (raw > 0)):
        raise ValueError("human_weights must be positive finite numbers")
    if not len(raw):
        return {}
    scale = raw.sum() / (raw * raw).sum()          # sum(scale * raw) = Kish ESS
    return dict(zip(items, (raw * scale).tolist()))


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------
def decision_from_theta(theta: float, gamma: float = 0.05) -> int:
    """+1 if theta > 1 - gamma/2, -1 if theta < gamma/2, else 0.

    >>> decision_from_theta(0.99), decision_from_theta(0.5), decision_from_theta(0.01)
    (1, 0, -1)
    """
    _check_gamma(gamma)
    if theta > 1 - gamma / 2:
        return 1
    if theta < gamma / 2:
        return -1
    return 0


def _check_gamma(gamma):
    if not (isinstance(gamma, (int, float, np.floating)) and 0 < gamma < 1):
        raise ValueError(f"gamma must be a number in (0, 1), got {gamma!r}")


METHODS = ("closed_form", "importance", "exact", "gibbs", "nuts")


@dataclass(frozen=True)
class PairDecision:
    decision: int
    theta: float
    theta_se: float
    p_mean: tuple[float, float, float]
    resolved: bool
    draws: int
    ess: float = float("inf")
    method: str = "closed_form"


@dataclass(frozen=True, eq=False)
class DecisionBatch:
    """Decisions of P pairs.

    decision (P,) int8 in {-1, 0, 1}; theta (P,) = P(p+ > p- | data); theta_se (P,) its
    Monte-Carlo standard error; p_mean (P, 3) posterior mean of p; resolved (P,) bool, False
    when theta stayed within resolve_z standard errors of a threshold at the draw cap;
    draws (P,) int, posterior draws spent (0 for the closed form and the exact sum);
    ess (P,) float, effective sample size behind theta (Kish ESS of the importance weights,
    between-chain ESS of MCMC, inf when exact); method (P,) str, one of METHODS.
    """

    decision: np.ndarray
    theta: np.ndarray
    theta_se: np.ndarray
    p_mean: np.ndarray
    resolved: np.ndarray
    draws: np.ndarray
    ess: np.ndarray = None
    method: np.ndarray = None

    def __post_init__(self):
        size = len(self.theta)
        if self.ess is None:
            object.__setattr__(self, "ess", np.full(size, np.inf))
        if self.method is None:
            object.__setattr__(self, "method", np.full(size, "closed_form", dtype=object))
        for name in ("decision", "theta", "theta_se", "p_mean", "resolved", "draws", "ess",
                     "method"):
            getattr(self, name).setflags(write=False)

    def __len__(self):
        return len(self.theta)

    def pair(self, i: int) -> PairDecision:
        return PairDecision(int(self.decision[i]), float(self.theta[i]),
                            float(self.theta_se[i]),
                            tuple(float(x) for x in self.p_mean[i]),
                            bool(self.resolved[i]), int(self.draws[i]),
                            float(self.ess[i]), str(self.method[i]))


def _decisions(theta, se, gamma, resolve_z):
    decision = np.where(theta > 1 - gamma / 2, 1, np.where(theta < gamma / 2, -1, 0))
    distance = np.minimum(np.abs(theta - gamma / 2), np.abs(theta - (1 - gamma / 2)))
    resolved = distance > resolve_z * se
    return decision.astype(np.int8), resolved


# --------------------------------------------------------------------------------------------
# fast exact method
# --------------------------------------------------------------------------------------------
def closed_form_theta(n: np.ndarray) -> np.ndarray:
    """theta = 1 - I_{1/2}(n+ + 1, n- + 1) for posterior Dir(n + 1); n (..., 3) -> (...)."""
    n = np.asarray(n, dtype=float)
    return 1.0 - betainc(n[..., 0] + 1.0, n[..., 2] + 1.0, 0.5)


class _PairImportanceSampler:
    """Rejection/importance sampling of one pair's posterior; see the module docstring.

    Proposal: q ~ Dir(N.sum(1) + 3 + m - kappa), nu[c] ~ Dir(N[c] + 1 - tilt[c]) with
    tilt = t * max(2 - h, 0), kappa = tilt.sum(1). Weight relative to its upper bound:
        log w = sum_cc' tilt[c, c'] log(mu[c, c'] / t[c, c']) + sum_c' max(h - 2, 0) log p_c'
    which is <= 0 (Gibbs' inequality and p <= 1), so every weight lies in (0, 1].
    """

    def __init__(self, counts: PairCounts, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *_entropy(counts.key())])))
        beta = counts.paired.astype(float) + 1.0                     # (c, c')
        self.t = beta / beta.sum(0, keepdims=True)                    # columns sum to 1
        excess = counts.human_only.astype(float) - 2.0
        self.pos = np.maximum(excess, 0.0)                             # (c',)
        self.tilt = self.t * np.maximum(-excess, 0.0)[None, :]         # (c, c'), < beta
        self.kappa = self.tilt.sum(1)                                  # (c,)
        self.nu_alpha = beta - self.tilt
        self.q_alpha = beta.sum(1) + counts.metric_only - self.kappa
        self.log_bound = float((self.tilt * np.log(self.t)).sum())
        self.sum_w = self.sum_wf = self.sum_w2 = self.sum_w2f = 0.0
        self.sum_wp = np.zeros(3)
        # control variates h = d - E_proposal[d], d_c = q_c (nu_c+ - nu_c-), sum_c d_c = p+ - p-
        q_mean = self.q_alpha / self.q_alpha.sum()
        nu_mean = self.nu_alpha / self.nu_alpha.sum(1, keepdims=True)
        self.d_mean = q_mean * (nu_mean[:, 0] - nu_mean[:, 2])
        self.sum_h = np.zeros(3)
        self.sum_hh = np.zeros((3, 3))
        self.sum_wh = np.zeros(3)
        self.sum_wfh = np.zeros(3)
        self.log_shift = -np.inf
        self.draws = 0

    def draw(self, size: int, chunk: int = 4096) -> None:
        """Add ``size`` weighted draws (in cache-sized chunks: memory traffic dominates)."""
        nu_alpha = self.nu_alpha.ravel()                                # row c * 3 + c'
        # numpy draws shapes below 1 about twice as slowly: use Gamma(a) = Gamma(a + 1) U^(1/a)
        small = nu_alpha < 1.0
        boosted_alpha = nu_alpha + small
        small_inverse = 1.0 / nu_alpha[small]
        tilt = self.tilt.ravel()
        p_coefficient = self.pos - self.tilt.sum(0)                    # (c',)
        q_coefficient = self.kappa.sum() + p_coefficient.sum()
        for start in range(0, size, chunk):
            n = min(chunk, size - start)
            gq = self.rng.standard_gamma(np.broadcast_to(self.q_alpha[:, None], (3, n)))
            gnu = self.rng.standard_gamma(np.broadcast_to(boosted_alpha[:, None], (9, n)))
            if small_inverse.size:
                gnu[small] *= np.exp(-self.rng.standard_exponential((small_inverse.size, n))
                                     * small_inverse[:, None])
            nu_total = gnu[0::3] + gnu[1::3] + gnu[2::3]                # (c, n)
            q_over_nu = gq / nu_total                                   # q_c / nu_total_c, unnormalised
            q_total = gq[0] + gq[1] + gq[2]
            p_unnormalised = q_over_nu[0] * gnu[0:3] + q_over_nu[1] * gnu[3:6] \
                + q_over_nu[2] * gnu[6:9]                               # (c', n), p * q_total
            # sum_cc' tilt log mu + sum_c' pos log p
            #   = sum_c kappa_c log q_c + sum_cc' tilt log nu_cc' + sum_c' (pos - |e|) log p_c'
            log_w = (self.kappa @ np.log(q_over_nu) + tilt @ np.log(gnu)
                     + p_coefficient @ np.log(p_unnormalised)
                     - q_coefficient * np.log(q_total) - self.log_bound)
            # Weights are <= 1 but can all be tiny when many human-only items tilt the
            # posterior: keep the sums relative to the largest log weight seen.
            largest = min(float(log_w.max()), 0.0)
            if largest > self.log_shift:
                scale = np.exp(self.log_shift - largest)
                self.sum_w *= scale
                self.sum_wf *= scale
                self.sum_wp *= scale
                self.sum_w2 *= scale * scale
                self.sum_w2f *= scale * scale
                self.sum_wh *= scale
                self.sum_wfh *= scale
                self.log_shift = largest
            w = np.exp(np.minimum(log_w, 0.0) - self.log_shift)
            wins = p_unnormalised[0] > p_unnormalised[2]
            w2 = w * w
            self.sum_w += w.sum()
            self.sum_wf += w[wins].sum()
            self.sum_w2 += w2.sum()
            self.sum_w2f += w2[wins].sum()
            self.sum_wp += p_unnormalised @ (w / q_total)
            h = (q_over_nu * (gnu[0::3] - gnu[2::3])) / q_total - self.d_mean[:, None]
            self.sum_h += h.sum(1)
            self.sum_hh += h @ h.T
            self.sum_wh += h @ w
            self.sum_wfh += h[:, wins] @ w[wins]
        self.draws += size

    def ess(self) -> float:
        """Kish effective sample size (sum w)^2 / sum w^2 of the weights so far."""
        return float(self.sum_w ** 2 / self.sum_w2) if self.sum_w2 > 0 else 0.0

    def proposals(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """size proposals: p (size, 3) and weights w (size,) in (0, 1]."""
        gq = self.rng.standard_gamma(np.broadcast_to(self.q_alpha[:, None], (3, size)))
        gnu = self.rng.standard_gamma(np.broadcast_to(self.nu_alpha.ravel()[:, None], (9, size)))
        q = gq / gq.sum(0)
        nu = gnu.reshape(3, 3, size) / gnu.reshape(3, 3, size).sum(1, keepdims=True)
        p = (q[:, None] * nu).sum(0)
        mu = q[:, None] * nu / p[None]
        log_w = (self.tilt[..., None] * np.log(mu)).sum((0, 1)) + self.pos @ np.log(p) \
            - self.log_bound
        return p.T, np.exp(np.minimum(log_w, 0.0))

    def estimate(self) -> tuple[float, float, np.ndarray]:
        """theta, its standard error, posterior mean of p.

        theta solves sum_i [w_i (f_i - theta) - beta . h_i] = 0: the weighted estimate with the
        control variates h (mean 0 under the proposal, known in closed form) and the
        regression coefficient beta that minimises the variance; p+ - p- = sum(d) makes h
        strongly correlated with f = 1[p+ > p-], which cuts the variance up to ~3x.
        """
        p_mean = self.sum_wp / self.sum_w
        theta = self.sum_wf / self.sum_w
        if theta in (0.0, 1.0):
            # no draw fell on the other side: about 1/ESS is what such a run can resolve
            return theta, self.sum_w2 / self.sum_w ** 2, p_mean
        for _ in range(2):   # beta depends on theta through z = w (f - theta)
            cross = self.sum_wfh - theta * self.sum_wh                   # sum z h
            beta = np.linalg.lstsq(self.sum_hh, cross, rcond=None)[0]
            theta = (self.sum_wf - beta @ self.sum_h) / self.sum_w
        cross = self.sum_wfh - theta * self.sum_wh
        # sum z^2 with f in {0, 1}, minus what the control variates explain
        spread = (1 - 2 * theta) * self.sum_w2f + theta * theta * self.sum_w2 \
            - 2 * beta @ cross + beta @ self.sum_hh @ beta
        se = np.sqrt(max(spread, 0.0)) / self.sum_w
        return float(np.clip(theta, 0.0, 1.0)), se, p_mean


_THREAD_POOLS: dict = {}


def _thread_pool(threads: int):
    from concurrent.futures import ThreadPoolExecutor

    key = (os.getpid(), threads)   # a pool inherited through fork (worker start) has no threads
    if key not in _THREAD_POOLS:
        _THREAD_POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix="decision")
    return _THREAD_POOLS[key]


def _wanted_se(theta, gamma, target_se, resolve_z):
    distance = min(abs(theta - gamma / 2), abs(theta - (1 - gamma / 2)))
    return min(target_se, distance / resolve_z) if resolve_z > 0 else target_se


def _decide_fast(counts: Sequence[PairCounts], gamma, seed, first_draws, target_se, resolve_z,
                 max_draws, threads, min_ess, min_ess_fraction, exact_budget, fallback):
    size = len(counts)
    theta = np.zeros(size)
    se = np.zeros(size)
    p_mean = np.zeros((size, 3))
    draws = np.zeros(size, np.int64)
    ess = np.full(size, np.inf)
    method = np.full(size, "closed_form", dtype=object)
    samplers = {}
    for i, pair in enumerate(counts):
        if pair.metric_only.sum() == 0:
            n = pair.n
            theta[i] = closed_form_theta(n)
            p_mean[i] = (n + 1) / (n.sum() + 3)
        else:
            samplers[i] = _PairImportanceSampler(pair, seed)
            method[i] = "importance"
    plan = {i: first_draws for i in samplers}                  # draws of each pair's next round
    failed = []
    pool = _thread_pool(threads) if threads > 1 and len(samplers) > 1 else None
    while plan:
        # numpy's generators and ufuncs release the GIL; each pair owns its stream, so
        # threading changes only the wall time, never a result
        work = [(samplers[i], batch) for i, batch in plan.items()]
        if pool is None:
            for sampler, batch in work:
                sampler.draw(batch)
        else:
            list(pool.map(lambda job: job[0].draw(job[1]), work))
        for i in plan:
            theta[i], se[i], p_mean[i] = samplers[i].estimate()
            draws[i] = samplers[i].draws
            ess[i] = samplers[i].ess()
        next_plan = {}
        for i in plan:
            if fallback and ess[i] < min_ess_fraction * draws[i]:
                failed.append(i)        # weights too uneven for their own error estimate
                continue
            wanted_se = _wanted_se(theta[i], gamma, target_se, resolve_z)
            if (se[i] <= wanted_se and ess[i] >= min_ess) or draws[i] >= max_draws:
                if fallback and (ess[i] < min_ess or se[i] > target_se):
                    failed.append(i)    # the cap came before the wanted precision
                continue
            # the standard error falls as 1/sqrt(draws): aim a little past the wanted value
            wanted = draws[i] * max((se[i] / max(wanted_se, 1e-12)) ** 2 * 1.2,
                                    min_ess / max(ess[i], 1e-12) * 1.1) - draws[i]
            wanted = max(wanted, draws[i] / 4, 256)
            grain = 1 << max(int(np.log2(wanted)) - 2, 0)          # four sizes per octave
            next_plan[i] = int(min(np.ceil(wanted / grain) * grain, max_draws - draws[i]))
        plan = next_plan
    for i in failed:
        pair = counts[i]
        if _exact_cost(pair.metric_only) <= exact_budget:
            theta[i], p_mean[i] = exact_posterior(pair)
            se[i], draws[i], ess[i], method[i] = 0.0, 0, np.inf, "exact"
        else:
            theta[i], se[i], p_mean[i], draws[i], ess[i] = _gibbs(
                pair, seed, lambda value: _wanted_se(value, gamma, target_se, resolve_z))
            method[i] = "gibbs"
    decision, resolved = _decisions(theta, se, gamma, resolve_z)
    return DecisionBatch(decision, theta, se, p_mean, resolved, draws, ess, method)


# --------------------------------------------------------------------------------------------
# fallbacks: exact summation over the metric-only splits, data-augmentation Gibbs
# --------------------------------------------------------------------------------------------
def _exact_cost(metric_only) -> float:
    """Element operations of exact_posterior's dynamic programme (rows largest first)."""
    cost, state = 0.0, 1.0
    for m in sorted(np.asarray(metric_only).tolist(), reverse=True):
        kernel = (m + 1) * (m + 2) / 2
        cost += min(kernel, state) * (np.sqrt(state) + m) ** 2
        state = (np.sqrt(state) + m) ** 2
    return cost


def _split_log_weights(counts: PairCounts) -> tuple[np.ndarray, np.ndarray]:
    """log P(k | data) + const over the column sums k = L.sum(0) of the latent splits.

    Returns k (K, 3) float and log weights (K,), see the module docstring.
    """
    paired = counts.paired.astype(float)
    m = counts.metric_only.astype(np.int64)
    log_state = np.zeros((1, 1))            # log sum over the rows so far, indexed (k+, k=)
    for c in np.argsort(-m, kind="stable"):
        rows = int(m[c])
        a, b = np.meshgrid(np.arange(rows + 1), np.arange(rows + 1), indexing="ij")
        rest = rows - a - b
        valid = rest >= 0
        cells = np.stack([a, b, np.where(valid, rest, 0)])                       # (3, r, r)
        beta = paired[c][:, None, None]
        kernel = (gammaln(beta + 1 + cells) - gammaln(beta + 1) - gammaln(cells + 1)).sum(0)
        kernel = np.where(valid, kernel, -np.inf)
        old0, old1 = log_state.shape
        new = np.full((old0 + rows, old1 + rows), -np.inf)
        # shift-and-add over whichever of (kernel, state) has fewer live entries
        if valid.sum() <= np.isfinite(log_state).sum():
            for i, j in zip(*np.nonzero(valid)):
                window = new[i:i + old0, j:j + old1]
                np.logaddexp(window, log_state + kernel[i, j], out=window)
        else:
            for i, j in zip(*np.nonzero(np.isfinite(log_state))):
                window = new[i:i + rows + 1, j:j + rows + 1]
                np.logaddexp(window, log_state[i, j] + kernel, out=window)
        log_state = new
    total = int(m.sum())
    k0, k1 = np.meshgrid(np.arange(total + 1), np.arange(total + 1), indexing="ij")
    live = (k0 + k1 <= total) & np.isfinite(log_state)
    k = np.stack([k0[live], k1[live], total - k0[live] - k1[live]], 1).astype(float)
    n = counts.n.astype(float)
    log_weight = log_state[live] + (gammaln(n + 1 + k)
                                    - gammaln(paired.sum(0) + 3 + k)).sum(1)
    return k, log_weight


def exact_posterior(counts: PairCounts) -> tuple[float, np.ndarray]:
    """theta and the posterior mean of p (3,) by summation over the metric-only splits.

    Exact up to floating point; cost grows like the product of the squared metric-only counts
    (see _exact_cost), fine for a few hundred metric-only items.
    """
    if not isinstance(counts, PairCounts):
        raise ValueError(f"counts must be a PairCounts, got {type(counts).__name__}")
    theta, p_mean = _exact_posterior_of(counts.key())
    return theta, np.array(p_mean)


@functools.lru_cache(maxsize=4096)
def _exact_posterior_of(key: tuple[int, ...]) -> tuple[float, tuple[float, ...]]:
    # deterministic and the costliest path: adaptive rounds and simulations repeat counts
    counts = PairCounts(np.reshape(key[:9], (3, 3)), key[9:12], key[12:])
    k, log_weight = _split_log_weights(counts)
    weight = np.exp(log_weight - log_weight.max())
    weight /= weight.sum()
    n = counts.n.astype(float)
    theta = float(weight @ closed_form_theta(n + k))
    p_mean = weight @ ((n + 1 + k) / (n.sum() + 3 + counts.metric_only.sum()))
    return min(max(theta, 0.0), 1.0), tuple(p_mean.tolist())


def _gibbs(counts: PairCounts, seed, wanted_se, chains=64, burn_in=300, block=500,
           max_steps=20_000):
    """docs/formulas.md §4 data-augmentation Gibbs sampler; chains in parallel, theta Rao-Blackwellised.

    wanted_se(theta) -> the standard error to reach. Returns theta, its standard error (spread
    of the chain means), p_mean, draws kept, between-chain ESS.
    """
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [int(seed) & 0xFFFFFFFF, *_entropy(counts.key()), 1])))
    paired = counts.paired.astype(float)
    n = counts.n.astype(float)
    m = counts.metric_only
    total = n.sum() + 3 + m.sum()
    p = rng.dirichlet(n + 1, size=chains)                                       # (C, c')
    mu = rng.standard_gamma(np.broadcast_to(paired + 1, (chains, 3, 3)))         # (C, c, c')
    mu /= mu.sum(1, keepdims=True)
    theta_sum = np.zeros(chains)
    theta_square = 0.0
    p_sum = np.zeros(3)
    kept = 0
    step = 0
    while True:
        latent = np.empty((chains, 3, 3))
        for c in range(3):
            weights = mu[:, c, :] * p
            latent[:, c, :] = rng.multinomial(m[c], weights / weights.sum(1, keepdims=True))
        column = latent.sum(1)
        p = rng.standard_gamma(n + 1 + column)
        p /= p.sum(1, keepdims=True)
        mu = rng.standard_gamma(paired + 1 + latent)
        mu /= mu.sum(1, keepdims=True)
        step += 1
        if step > burn_in:
            value = closed_form_theta(n + column)
            theta_sum += value
            theta_square += float(value @ value)
            p_sum += ((n + 1 + column) / total).sum(0)
            kept += 1
            if kept % block == 0 or step >= max_steps:
                chain_theta = theta_sum / kept
                theta = float(chain_theta.mean())
                se = float(chain_theta.std(ddof=1) / np.sqrt(chains))
                if se <= wanted_se(theta) or step >= max_steps:
                    spread = theta_square / (kept * chains) - theta ** 2
                    ess = spread / se ** 2 if se > 0 else float(kept * chains)
                    return theta, se, p_sum / (kept * chains), kept * chains, float(ess)


# --------------------------------------------------------------------------------------------
# NUTS reference (the paper's sampler)
# --------------------------------------------------------------------------------------------
def _paper_model(paired, human, metric):
    import numpyro
    import numpyro.distributions as dist

    mu_columns = numpyro.sample("mu_columns", dist.Dirichlet(paired.T + 1.0))  # (c', c)
    p = numpyro.sample("p", dist.Dirichlet(human + 1.0))
    numpyro.sample("m", dist.Multinomial(total_count=metric.sum(), probs=mu_columns.T @ p),
                   obs=metric)


_NUTS_RUNNERS: dict = {}


def _nuts_runner(num_chains, num_warmup, num_samples, chain_method):
    key = (num_chains, num_warmup, num_samples, chain_method)
    if key not in _NUTS_RUNNERS:
        from numpyro.infer import MCMC, NUTS

        # "parallel" needs as many devices (numpyro.set_host_device_count before jax starts)
        _NUTS_RUNNERS[key] = MCMC(NUTS(_paper_model), num_warmup=num_warmup,
                                  num_samples=num_samples, num_chains=num_chains,
                                  chain_method=chain_method, progress_bar=False,
                                  jit_model_args=True)
    return _NUTS_RUNNERS[key]


def _decide_nuts(counts: Sequence[PairCounts], gamma, seed, num_chains, num_warmup,
                 num_samples, chain_method, resolve_z):
    import jax
    import jax.numpy as jnp
    from numpyro.diagnostics import effective_sample_size

    runner = _nuts_runner(num_chains, num_warmup, num_samples, chain_method)
    size = len(counts)
    theta = np.zeros(size)
    se = np.zeros(size)
    p_mean = np.zeros((size, 3))
    ess_all = np.zeros(size)
    for i, pair in enumerate(counts):
        stream = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *_entropy(pair.key())])
        key = jax.random.PRNGKey(int(stream.generate_state(1)[0]))
        runner.run(key, jnp.asarray(pair.paired, jnp.float32),
                   jnp.asarray(pair.n, jnp.float32), jnp.asarray(pair.metric_only, jnp.float32))
        p = np.asarray(runner.get_samples(group_by_chain=True)["p"], dtype=float)  # (C, S, 3)
        wins = (p[..., 0] > p[..., 2]).astype(float)
        theta[i] = wins.mean()
        p_mean[i] = p.reshape(-1, 3).mean(0)
        if 0 < theta[i] < 1:
            ess = float(effective_sample_size(wins[..., None])[0])
            ess = ess if np.isfinite(ess) and ess > 1 else 1.0
            se[i] = np.sqrt(theta[i] * (1 - theta[i]) / ess)
            ess_all[i] = ess
        else:
            ess_all[i] = wins.size
            se[i] = 1.0 / wins.size   # no draw on the other side (see the fast method)
    decision, resolved = _decisions(theta, se, gamma, resolve_z)
    draws = np.full(size, num_chains * num_samples, np.int64)
    return DecisionBatch(decision, theta, se, p_mean, resolved, draws, ess_all,
                         np.full(size, "nuts", dtype=object))


# --------------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------------
def _options(defaults: dict, options: dict, method: str) -> dict:
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for method={method!r}; "
                         f"known: {sorted(defaults)}")
    merged = {**defaults, **options}
    for name, value in merged.items():
        if name == "fallback" and not isinstance(value, bool):
            raise ValueError(f"fallback must be True or False, got {value!r}")
        if name in ("first_draws", "max_draws", "threads", "num_chains", "num_samples") and \
                (not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if name == "num_warmup" and (not isinstance(value, (int, np.integer))
                                                   or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if name in ("target_se", "resolve_z", "min_ess", "min_ess_fraction",
                    "exact_budget") and not (isinstance(value, (int, float))
                                                        and value >= 0):
            raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return merged


def decide_many(counts: Sequence[PairCounts], *, gamma: float = 0.05, method: str = "fast",
                seed: int = 0, **options) -> DecisionBatch:
    """Decide P system pairs in one call.

    counts: P PairCounts. method "fast" (exact closed form / IMH sampler, options
    FAST_DEFAULTS) or "nuts" (the paper's numpyro NUTS, options NUTS_DEFAULTS).
    Returns a DecisionBatch of length P.

    A pair the humans and the metric agree on, and a pair the humans split evenly (counts in
    class order +, =, -; ``paired`` rows are the metric's label, columns the human's):

    >>> clear = PairCounts(paired=[[20, 3, 1], [2, 5, 1], [1, 1, 3]], metric_only=[300, 50, 60])
    >>> even = PairCounts(paired=[[3, 1, 2], [1, 1, 1], [2, 1, 3]])
    >>> batch = decide_many([clear, even])
    >>> batch.decision.tolist(), batch.theta.round(2).tolist()
    ([1, 0], [1.0, 0.5])
    """
    _check_gamma(gamma)
    counts = list(counts)
    for i, pair in enumerate(counts):
        if not isinstance(pair, PairCounts):
            raise ValueError(f"counts[{i}] must be a PairCounts, got {type(pair).__name__}")
    if method == "fast":
        run, options = _decide_fast, _options(FAST_DEFAULTS, options, method)
    elif method == "nuts":
        run, options = _decide_nuts, _options(NUTS_DEFAULTS, options, method)
    else:
        raise ValueError(f"method must be 'fast' or 'nuts', got {method!r}")
    # Decide each pair in a canonical orientation and mirror back, so that exchanging the two
    # systems maps theta to exactly 1 - theta and the decision to exactly its negation.
    flip = np.array([pair.key() > pair.swapped().key() for pair in counts], bool)
    canonical = [pair.swapped() if flipped else pair for pair, flipped in zip(counts, flip)]
    batch = run(canonical, gamma, seed, **options)
    theta = np.where(flip, 1.0 - batch.theta, batch.theta)
    p_mean = np.where(flip[:, None], batch.p_mean[:, ::-1], batch.p_mean)
    decision = np.where(flip, -batch.decision, batch.decision).astype(np.int8)
    return DecisionBatch(decision, theta, batch.theta_se, p_mean, batch.resolved, batch.draws,
                         batch.ess, batch.method)


def posterior_draws(counts: PairCounts, size: int, seed: int = 0) -> np.ndarray:
    """size exact, independent posterior draws of p, (size, 3), by rejection sampling."""
    if not isinstance(counts, PairCounts):
        raise ValueError(f"counts must be a PairCounts, got {type(counts).__name__}")
    if not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    sampler = _PairImportanceSampler(counts, seed)
    accepted = []
    found = 0
    while found < size:
        p, w = sampler.proposals(max(1024, 2 * (size - found)))
        keep = p[sampler.rng.random(len(w)) < w]
        accepted.append(keep)
        found += len(keep)
    return np.concatenate(accepted)[:size] if accepted else np.zeros((0, 3))


def decide(counts: PairCounts, **options) -> PairDecision:
    """decide_many for one pair."""
    return decide_many([counts], **options).pair(0)


def warm_up() -> None:
    """Import and exercise the fast path once (call at worker start; no JIT is involved)."""
    decide_many([PairCounts(np.eye(3, dtype=int) * 5, metric_only=[5, 1, 3])],
                first_draws=64, target_se=1.0, max_draws=64)
