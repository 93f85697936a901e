"""The metric's level on a pair as a prior of the pair's human margin, for the futility check
only (issue 38; docs/formulas.md §8, "The metric's level on a pair").

The control variate (protocol.control_variate) uses the metric item by item, and an item-level
check of whether a pair can still be decided is scale-invariant: a tighter metric-assisted
estimate of a near-tie narrows its interval by as much as it lowers the growth the e-process
needs, so a judge never ends a near-tie sooner. What the item level leaves out is the metric's
value on every item of the pair, known from the start: its mean over the pair's items, the
pair's *level* x, predicts the pair's mean human label mu as far as the other pairs show it does.

For pair p, over the other pairs q with at least ``MIN_ITEMS`` counted steps (their level x_q,
their control-variate estimate m_q of mu_q and its variance v_q; ``PairLevel``), fitted through
0 (exchanging the systems negates x and mu):

    beta  = sum x m / sum x^2                           (least squares through 0)
    tau^2 = max((sum (m - beta x)^2 - sum v) / (k - 1), FLOOR^2)   the margins' spread around it
    T^2   = max((sum m^2 - sum v) / k, FLOOR^2)                    their spread around no preference
    r^2   = max(0, 1 - tau^2 / T^2)                                 the share the level explains

unless the level does not explain the other pairs' margins at level SIGNIFICANCE (the F test of
beta = 0, (sum m^2 - RSS) / (RSS / (k - 1)) on 1 and k - 1 degrees of freedom, RSS = sum (m -
beta x)^2): then there is no prior. Otherwise the prior of mu_p is

    N(beta x_p, tau^2 / r^2 + x_p^2 Var beta),   Var beta = (tau^2 + mean v) / sum x^2:

its precision grows with the share of the margins' spread the level explains, so a metric that
explains none (a random one: r^2 = 0, or a fit by chance that the F test turns down) gives no
prior and leaves the rule as it is without it. The pair's own estimate m_p (variance v_p)
updates it to a normal posterior. No label of p enters p's prior (cross-fitted, as the
calibration of several metrics).

The futility check (protocol.rules.eprocess_can_decide) then also asks whether the e-process
could reach its bar at the end of that posterior's (1 - futility) interval farther from 0, and
gives the pair up when it could not, as well as when its own check says so. A futility stop
never decides ±, so the error control is untouched whatever the prior says; what the prior
changes is which near-ties are worked on, and so the labels and the pairs decided.

Pure Python, no Django. Shapes are scalars per pair; ``LevelSums`` are sums over pairs, so a
pair's cross-fit is the study's sums less its own, and a round close that reads only some pairs
takes the others' sums from the rows (``protocol.state.Outside.levels``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scipy.stats import f as f_distribution

#: counted steps a pair needs before its estimate enters the other pairs' priors
MIN_ITEMS = 10
#: least spread (in mean label) the priors allow: no fit from few pairs is believed tighter
FLOOR = 0.05
#: other pairs (with MIN_ITEMS steps) the fit needs
MIN_PAIRS = 3
#: the F test's level below which the level is taken to explain the other pairs' margins (at
#: 0.05, a random metric on PandaLM's 10 pairs kept a chance fit often enough to lose 0.02 of the
#: pairs right over 20 seeds; at 0.01, 0.01: docs/results.md)
SIGNIFICANCE = 0.01


@dataclass(frozen=True)
class PairLevel:
    """One pair's part of the fit: level x (the metric's mean over all its items), estimate m
    (mean of its control-variate increments s - lam (m_i - c), an estimate of its mean human
    label), variance v of that mean ((sum of squared deviations + 1) / ((n + 1) n)), n steps."""

    level: float
    estimate: float
    variance: float
    n: int

    @classmethod
    def of(cls, level: float, increments: Sequence[float]) -> "PairLevel":
        """level: the metric's mean over the pair's items; increments: (n,) its counted
        control-variate increments."""
        n = len(increments)
        if n == 0:
            return cls(float(level), 0.0, math.inf, 0)
        estimate = math.fsum(increments) / n
        spread = math.fsum((x - estimate) ** 2 for x in increments)
        return cls(float(level), estimate, (spread + 1.0) / ((n + 1) * n), n)

    def sums(self) -> tuple[int, float, float, float, float]:
        """The pair's part of ``LevelSums`` (k, x^2, x m, m^2, v): zeros when it is not counted."""
        if not counted(self):
            return (0, 0.0, 0.0, 0.0, 0.0)
        return (1, self.level ** 2, self.level * self.estimate, self.estimate ** 2, self.variance)


@dataclass(frozen=True)
class LevelSums:
    """Sums over the pairs with at least MIN_ITEMS steps: count k and the sums of x^2, x m, m^2, v."""

    k: int = 0
    xx: float = 0.0
    xm: float = 0.0
    mm: float = 0.0
    v: float = 0.0

    @classmethod
    def of(cls, levels: Iterable[PairLevel | None], outside: Sequence = ()) -> "LevelSums":
        """The sums over ``levels`` and, for a partial state, the pairs it leaves out: ``outside``
        their five sums, each a float or floats whose exact sum it is (``Outside.levels``).
        Summed exactly (``math.fsum``), so the order of the pairs does not matter."""
        columns: list[list[float]] = [[] for _ in range(5)]
        for column, part in zip(columns, outside):
            column.extend(part if isinstance(part, tuple) else (part,))
        for pair in levels:
            if pair is not None:
                for column, value in zip(columns, pair.sums()):
                    column.append(value)
        k, xx, xm, mm, v = (math.fsum(column) for column in columns)
        return cls(int(round(k)), xx, xm, mm, v)

    def without(self, pair: PairLevel | None) -> "LevelSums":
        """The sums less ``pair``'s own part (its cross-fit), when it is counted."""
        if not counted(pair):
            return self
        k, xx, xm, mm, v = pair.sums()
        return LevelSums(self.k - k, self.xx - xx, self.xm - xm, self.mm - mm, self.v - v)


def counted(pair: PairLevel | None) -> bool:
    return pair is not None and pair.n >= MIN_ITEMS


@dataclass(frozen=True)
class LevelPrior:
    """The fit over the other pairs: slope beta, residual spread tau2, explained share r2,
    variance of beta."""

    beta: float
    tau2: float
    r2: float
    beta_variance: float


def level_prior(others: LevelSums) -> LevelPrior | None:
    """The fit of the module doc over the other pairs' sums; None with fewer than MIN_PAIRS of
    them, no level among them, or a slope the F test does not tell from 0. (A ridge penalty of 1 item, tried first, shrank beta three-fold
    at PandaLM's levels of about 0.25, Sum x^2 ~ 0.5, and centred the prior near no preference:
    docs/results.md.)

    >>> level_prior(LevelSums(k=8, xx=2.0, xm=1.8, mm=2.0, v=0.08)).r2 > 0.8
    True
    >>> level_prior(LevelSums(k=2, xx=1.0, xm=0.9, mm=1.0, v=0.04)) is None
    True
    """
    if others.k < MIN_PAIRS or others.xx <= 1e-12:
        return None
    beta = others.xm / others.xx
    residual = others.mm - 2 * beta * others.xm + beta * beta * others.xx
    if SIGNIFICANCE and f_distribution.sf((others.mm - residual) / max(residual / (others.k - 1), 1e-300), 1,
                                          others.k - 1) > SIGNIFICANCE:
        return None
    tau2 = max((residual - others.v) / (others.k - 1), FLOOR ** 2)
    total = max((others.mm - others.v) / others.k, FLOOR ** 2)
    r2 = max(0.0, 1.0 - tau2 / total)
    return LevelPrior(beta, tau2, r2, (tau2 + others.v / others.k) / others.xx)


def margin_posterior(pair: PairLevel, prior: LevelPrior | None) -> tuple[float, float] | None:
    """(mean, sd) of the pair's mean human label given its estimate and the prior; None when
    the prior says nothing (no fit, r2 = 0) or the pair has no step."""
    if prior is None or prior.r2 <= 0 or pair.n == 0:
        return None
    prior_variance = prior.tau2 / prior.r2 + pair.level ** 2 * prior.beta_variance
    precision = 1.0 / pair.variance + 1.0 / prior_variance
    mean = (pair.estimate / pair.variance + prior.beta * pair.level / prior_variance) / precision
    return mean, precision ** -0.5


def margin_posteriors(levels: Sequence[PairLevel | None], indices: Iterable[int], outside: Sequence = ()
                      ) -> dict[int, tuple[float, float]]:
    """index -> (mean, sd) of ``margin_posterior`` for the pairs at ``indices``, each against
    the fit over every other pair: the others of ``levels`` and those a partial state leaves
    out (``outside``: their sums, ``LevelSums.of``); pairs without a posterior left out."""
    sums = LevelSums.of(levels, outside)
    out = {}
    for i in indices:
        if levels[i] is None:
            continue
        posterior = margin_posterior(levels[i], level_prior(sums.without(levels[i])))
        if posterior is not None:
            out[i] = posterior
    return out


