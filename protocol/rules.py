"""The decision rules of the budgeted protocol (overview: ``protocol.adaptive``).

Bayesian theta thresholds (``protocol.decision``), the look levels of ``strict`` (Bonferroni,
Pocock), the betting e-process (bet, decision, futility), the posterior-predictive futility
of the Bayesian rule, and the adaptive round sizing. Pure functions of the data in
``protocol.state``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import betaincinv, betaln, ndtri
from scipy.stats import binom
from scipy.stats import norm

from .allocation import design_weights
from .decision import PairCounts, closed_form_theta, counts_from_labels, decide_many
from .control_variate import step_factor
from .state import ADAPTIVE, MAX_BET, PairState, ProtocolSettings, full_step, sign_of

def round_size(settings: ProtocolSettings, pair: PairState) -> int:
    """Judgements to ask for in the pair's next round (before capping by what remains).

    paper: always ``batch``. adaptive with ``min_round < batch``: a pair whose theta is
    heading for a threshold gets just the labels it is expected to need, never fewer than
    ``min_round``: on the straight line of the current evidence, z = Phi^-1(theta) grows like
    sqrt(judgements), so reaching z* = Phi^-1(1 - level/2) takes about
    judgements * ((z* / z)^2 - 1) more labels.
    """
    if settings.policy != ADAPTIVE:
        return settings.batch
    if not pair.theta:
        return min(settings.first_round, settings.batch)
    if settings.min_round >= settings.batch or settings.strict:
        # strict spends its level over a fixed number of looks, so rounds keep their size
        return settings.batch
    z = abs(float(ndtri(min(max(pair.theta[-1], 1e-12), 1 - 1e-12))))
    target = float(ndtri(1 - look_level(settings, pair.capacity) / 2))
    if z < 1e-6:
        return settings.batch
    expected = pair.judgements * ((target / z) ** 2 - 1)
    return int(min(settings.batch, max(settings.min_round, math.ceil(expected))))



def bet(paired, human_only, metric_only, *, max_bet: float = MAX_BET, confusion=None,
        metric_weight: float | None = None) -> float:
    """The e-process bet on the next item's human label (module doc), in [-max_bet, max_bet].

    paired (3, 3) metric rows x human columns, human_only (3,), metric_only (3,) metric labels
    of the unjudged items other than the one bet on. The human labels of the metric-only items
    are imputed with the +1-smoothed confusion P(human | metric) of ``confusion`` ((3, 3)
    counts, e.g. pooled over the study's pairs, ProtocolSettings.confusion) or of the pair's
    own paired counts, then r = (n+ + 1/2) / (n+ + n- + 1) and b = 2 r - 1, clipped.
    """
    paired = np.asarray(paired, dtype=float)
    human = paired.sum(axis=0) + np.asarray(human_only, dtype=float)
    table = paired if confusion is None else np.asarray(confusion, dtype=float)
    given_metric = (table + 1.0) / (table.sum(axis=1, keepdims=True) + 3.0)   # rows: metric
    imputed = np.asarray(metric_only, dtype=float) @ given_metric
    if metric_weight is not None and imputed.sum() > metric_weight:
        # the metric as a prior worth ``metric_weight`` labels: its imputed counts would
        # otherwise outweigh the pair's human labels and pull every bet towards its shares
        imputed = imputed * (metric_weight / imputed.sum())
    wins, losses = human[0] + imputed[0], human[2] + imputed[2]
    r = (wins + 0.5) / (wins + losses + 1.0)
    return float(np.clip(2.0 * r - 1.0, -max_bet, max_bet))



def optimistic_win_share(wins: float, losses: float, futility: float) -> float:
    """The share of first-system wins among non-ties at the end of its (1 - futility) credible
    interval, Beta(wins + 1, losses + 1), farther from 1/2: the optimistic futility checks'
    ``r`` (e-process, final sign test, boundary). ``betaincinv`` is the Beta quantile itself,
    without scipy.stats' argument checks (the same values, a thirtieth of the time:
    docs/benchmarks.md), which were a tenth of a replay's time: the checks run for every
    undecided pair at every close.

    >>> round(float(optimistic_win_share(8, 2, 0.05)), 3)
    0.921
    """
    return max(betaincinv(wins + 1, losses + 1, 1 - futility), 1 - betaincinv(wins + 1, losses + 1, futility))


def eprocess_can_decide(pair: PairState, gamma: float, futility: float, threshold: float | None = None) -> bool:
    """Whether the pair's e-process can still reach 1/gamma on its remaining labels.

    Optimistic: the share r of first-system wins among non-ties is put at the end of its
    (1 - futility) credible interval (Beta(n+ + 1, n- + 1)) farther from 1/2, and the wealth
    grows at the Kelly rate KL(r || 1/2) per non-tie label (tie share as observed, +1
    smoothed). A futility stop never decides ±, so it cannot break the error control.
    threshold: the log wealth the pair must reach (default log(1 / gamma); under control
    across pairs the family rule's current bar, ``family_thresholds``).
    """
    wins, _, losses = (float(x) for x in pair.human_counts)
    return _reaches(pair, optimistic_win_share(wins, losses, futility),
                    math.log(1.0 / gamma) if threshold is None else threshold)


def _non_tie_share(pair: PairState) -> float:
    """The pair's share of non-ties, +1 smoothed."""
    wins, ties, losses = (float(x) for x in pair.human_counts)
    return (wins + losses + 1) / (wins + ties + losses + 2)


def _reaches(pair: PairState, r: float, threshold: float) -> bool:
    """Whether the wealth reaches ``threshold`` on the remaining labels growing at the Kelly rate
    KL(r || 1/2) per non-tie label, r the optimistic win share among non-ties."""
    r = min(r, 1 - 1e-9)
    rate = r * math.log(2 * r) + (1 - r) * math.log(2 * (1 - r))
    return pair.log_evidence + pair.remaining * _non_tie_share(pair) * rate >= threshold


def margin_can_reach(pair: PairState, posterior: tuple[float, float], futility: float, threshold: float) -> bool:
    """``eprocess_can_decide`` with the win share taken from a normal posterior (mean, sd) of the
    pair's mean human label (protocol.level_prior.margin_posterior) instead of its own Beta
    interval: the end of the (1 - futility) interval farther from 0, as a share of the non-ties
    (tie share as observed, +1 smoothed), grown at the Kelly rate over the remaining labels."""
    mean, sd = posterior
    optimistic = abs(mean) + float(ndtri(1 - futility)) * sd
    return _reaches(pair, 0.5 + optimistic / (2 * _non_tie_share(pair)), threshold)


def eprocess_decision(pair: PairState, gamma: float, threshold: float | None = None) -> int:
    """±1 (the sign of the human margin) once log K >= threshold (default log(1 / gamma); the
    family rule passes its own, ``family_thresholds``), else 0."""
    if pair.log_evidence < (math.log(1.0 / gamma) if threshold is None else threshold):
        return 0
    estimate = cv_estimate(pair)
    if estimate != 0:
        return int(np.sign(estimate))
    margin = pair.human_counts[0] - pair.human_counts[2]
    return int(np.sign(margin))


def cv_estimate(pair: PairState) -> float:
    """sum over the pair's kept uniform-draw steps of s - lam (m - c): the control-variate
    estimate of its human margin (the human margin itself where lam = 0), whose sign the
    e-process decides once its wealth is large enough (the bets that grew it point that way).
    0 when no step has a metric term (the decision then takes the human margin's sign)."""
    steps = [full_step(step) for step in pair.steps]
    if not any(lam for *_, lam, _, _ in steps):
        return 0.0
    kept = set(pair.votes) if pair.votes else set(pair.judged_items)
    return float(sum(value - lam * (m - c) for item, value, _, rho, lam, m, c in steps if item in kept and rho == 1.0))


def look_level(settings: ProtocolSettings, capacity: int) -> float:
    """Decision level used at each look of a pair: gamma, or Pocock's level under strict."""
    if not settings.strict:
        return settings.gamma
    if settings.policy == ADAPTIVE:
        first = min(settings.first_round, settings.batch)
        looks = max(1, 1 + math.ceil(max(capacity - first, 0) / settings.batch))
    else:
        looks = max(1, math.ceil(capacity / settings.batch))
    if settings.spending == "pocock":
        return pocock_level(looks, settings.gamma)
    return settings.gamma / looks


@lru_cache(maxsize=256)
def pocock_level(looks: int, gamma: float, paths: int = 100_000) -> float:
    """Nominal two-sided level per look so that K equally spaced looks reject with prob. gamma.

    Under no difference the standardised sign statistic after k of K equal increments is
    S_k / sqrt(k) for a Gaussian random walk S; Pocock's constant c solves
    P(max_k |S_k| / sqrt(k) > c) = gamma (found by simulation with a fixed seed, so the
    level is reproducible), and the nominal level is 2 (1 - Phi(c)).
    """
    if looks < 1:
        raise ValueError(f"looks must be at least 1, got {looks}")
    if looks == 1:
        return gamma
    rng = np.random.default_rng(20230710)
    maxima = []
    chunk = max(1, 4_000_000 // looks)
    for start in range(0, paths, chunk):
        steps = rng.standard_normal((min(chunk, paths - start), looks))
        standardised = np.abs(np.cumsum(steps, axis=1)) / np.sqrt(np.arange(1, looks + 1))
        maxima.append(standardised.max(axis=1))
    critical = float(np.quantile(np.concatenate(maxima), 1 - gamma))
    return float(2 * norm.sf(critical))


def final_decision_probabilities(
    paired: np.ndarray,
    human_only: np.ndarray,
    metric_only: np.ndarray,
    remaining: np.ndarray,
    gamma: float | np.ndarray,
    *,
    draws: int = 2000,
    sweeps: int = 10,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """P(the human-only decision on all of a pair's labels will be +1, 0, -1), predictive.

    paired (P, 3, 3) metric rows x human columns; human_only (P, 3); metric_only (P, 3);
    remaining (P,) human labels still to come; gamma scalar or (P,). Returns (P, 3).

    p is drawn from the decision function's posterior, approximately: ``draws`` chains of
    the data-augmentation Gibbs sampler (docs/formulas.md §4) start from the human-only posterior
    Dir(n + 1) and run ``sweeps`` sweeps, so the metric labels of the not yet judged items
    pull p towards what they predict (a chain that has not mixed fully is still wider than
    the posterior: the estimate errs towards "not futile"). The remaining labels are then
    ~ Multinomial(remaining, p) and the final theta is the closed form on all of them.
    """
    paired = np.asarray(paired, dtype=np.int64).reshape(-1, 3, 3)
    size = len(paired)
    human_only = np.asarray(human_only, dtype=np.int64).reshape(size, 3)
    metric_only = np.asarray(metric_only, dtype=np.int64).reshape(size, 3)
    remaining = np.asarray(remaining, dtype=np.int64).reshape(size)
    if np.any(remaining < 0):
        raise ValueError("remaining labels must not be negative")
    gamma = np.broadcast_to(np.asarray(gamma, dtype=float), (size,))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if size == 0:
        return np.zeros((0, 3))
    human = paired.sum(axis=1) + human_only  # (P, 3)

    def dirichlet(alpha):  # over the last axis, any batch shape
        g = rng.standard_gamma(alpha)
        return g / g.sum(axis=-1, keepdims=True)

    p = dirichlet(np.broadcast_to(human[:, None, :] + 1.0, (size, draws, 3)))
    if metric_only.any() and sweeps > 0:
        # mu[..., c, c'] = P(metric c | oracle c'); each column c' is Dirichlet(N[:, c'] + 1 + K[:, c'])
        column_alpha = np.swapaxes(paired, 1, 2)[:, None, :, :] + 1.0  # (P, 1, c', c)
        mu = np.swapaxes(dirichlet(np.broadcast_to(column_alpha, (size, draws, 3, 3))), -1, -2)
        counts = np.broadcast_to(metric_only[:, None, :], (size, draws, 3))
        for _ in range(sweeps):
            weights = mu * p[:, :, None, :]
            weights /= weights.sum(axis=-1, keepdims=True)
            latent = rng.multinomial(counts, weights)  # (P, D, c, c')
            p = dirichlet(human[:, None, :] + 1.0 + latent.sum(axis=2))
            mu = np.swapaxes(dirichlet(column_alpha + np.swapaxes(latent, -1, -2)), -1, -2)
    future = rng.multinomial(np.broadcast_to(remaining[:, None], (size, draws)), p)
    theta = closed_form_theta(human[:, None, :] + future)
    half = gamma[:, None] / 2
    plus = np.mean(theta > 1 - half, axis=1)
    minus = np.mean(theta < half, axis=1)
    return np.stack([plus, 1 - plus - minus, minus], axis=1)



def pair_counts(pair: PairState):
    """The pair's counts as protocol.decision.PairCounts (paired, human_only, metric_only).

    When every judged item has a recorded draw (PairState.draws), the human counts are
    design-weighted (protocol.decision.counts_from_labels(human_weights=...)).
    """
    paired = np.asarray(pair.paired, dtype=np.int64)
    human_only = np.asarray(pair.human_only, dtype=np.int64)
    metric_only = np.asarray(pair.metric_only, dtype=np.int64)
    if design_weighted(pair):
        weights = dict(zip((item for item, _ in pair.draws),
                           design_weights([chance for _, chance in pair.draws]).tolist()))
        items = sorted(pair.votes)
        metric_items = sorted(pair.metric)
        return counts_from_labels(items, [sign_of(pair.votes[i]) for i in items], metric_items,
                                  [pair.metric[i] for i in metric_items], human_weights=weights)
    return PairCounts(paired=paired, human_only=human_only, metric_only=metric_only)


def design_weighted(pair: PairState) -> bool:
    """Whether the pair's decision weights its items by their draws (every judged item has one)."""
    return bool(pair.draws) and {item for item, _ in pair.draws} == set(pair.judged_items) == set(pair.votes)



@dataclass(frozen=True)
class _ClosedFormBatch:
    theta: np.ndarray
    p_mean: np.ndarray


def decide_closed_form(counts: Sequence, *, gamma: float = 0.05, method: str = "fast", seed: int = 0) -> _ClosedFormBatch:
    """Exact decision function for counts without metric-only items (conjugate posterior;
    weighted counts too)."""
    human = np.array([np.asarray(c.paired).sum(axis=0) + np.asarray(c.human_only) for c in counts], dtype=float)
    if any(np.asarray(c.metric_only).sum() for c in counts):
        raise ValueError("the closed form only applies to counts without metric-only items")
    human = human.reshape(-1, 3)
    return _ClosedFormBatch(theta=closed_form_theta(human), p_mean=(human + 1) / (human.sum(axis=1, keepdims=True) + 3))


def default_decide(counts: Sequence, *, gamma: float, method: str, seed: int):
    if all(not np.asarray(c.metric_only).any() for c in counts):
        # Without metric-only items the posterior is conjugate: exact and instant.
        return decide_closed_form(counts, gamma=gamma)
    return decide_many(counts, gamma=gamma, method=method, seed=seed)



# --------------------------------------------------------------------------------------------
# e-process steps: unequal draws, rebuilds, control across the pairs of a study
# --------------------------------------------------------------------------------------------
def weighted_bet(values: Sequence[int]) -> float:
    """The bet of a step drawn with unequal chances: Kelly from the first-judgement values so
    far (values (k,) in {-1, 0, 1}, arrival order), r = (n+ + 1/2) / (n+ + n- + 1), b = 2 r - 1,
    clipped to MAX_BET. It uses no item's features, so it is the same for every candidate of the
    draw, and its sign is the sign of the running sum S of the values: under a finite null (the
    pair's items sum to 0, however the labels lie along separability) the remaining items sum
    to -S, so the inverse-probability step has expectation 1 - b rho_min S / ... <= 1 (module
    doc of protocol.adaptive)."""
    values = np.asarray(values, dtype=int)
    wins, losses = float(np.sum(values == 1)), float(np.sum(values == -1))
    r = (wins + 0.5) / (wins + losses + 1.0)
    return float(np.clip(2.0 * r - 1.0, -MAX_BET, MAX_BET))


def draw_rho(chance: float | None, smallest: float | None) -> float:
    """rho of a step: 1 for a uniform draw (no chance recorded), smallest / chance for an
    unequal one (in (0, 1]), 0 when the smallest chance of the draw is not known: the step
    then bets nothing, which keeps the e-process valid whatever the design."""
    if chance is None:
        return 1.0
    if smallest is None:
        return 0.0
    chance, smallest = float(chance), float(smallest)
    if not 0 < smallest <= chance <= 1:
        raise ValueError(f"the smallest chance of a draw must lie in (0, chance], got {smallest!r} for chance {chance!r}")
    return smallest / chance


def steps_log_evidence(steps: Sequence[tuple[str, int, float, float]], active, *,
                       mixture: float | None = None, weighted=frozenset()) -> float:
    """log wealth of the steps whose item is in ``active``.

    mixture None: sum of log(1 + bet value rho) (the bets made at the time). mixture a > 0:
    the uniform draws' steps (items not in ``weighted``) enter as one Beta(a, a) mixture of
    constant bets, the Bayes factor B(n+ + a, n- + a) / B(a, a) x 2^(n+ + n-) of their
    first-judgement values against fair coins (a test martingale under the item-flip null
    whatever the order and the rounds; a = 1/2 is the Krichevsky-Trofimov mixture), times the
    unequal draws' steps with their bets.
    """
    steps = [full_step(step) for step in steps]
    if mixture is None:
        return float(sum(math.log(step_factor(value, wager, rho, lam, m - c))
                         for item, value, wager, rho, lam, m, c in steps
                         if item in active and (value != 0 or lam * (m - c) != 0)))
    wins = losses = 0
    total = 0.0
    for item, value, wager, rho, lam, m, c in steps:
        if item not in active or (value == 0 and lam * (m - c) == 0):
            continue
        if item in weighted or lam != 0:
            # a control-variate step is no fair coin of its own: it keeps its bet
            total += math.log(step_factor(value, wager, rho, lam, m - c))
        elif value > 0:
            wins += 1
        else:
            losses += 1
    return total + mixture_log_evidence(wins, losses, mixture)


def mixture_log_evidence(wins: int, losses: int, a: float) -> float:
    """log of the Beta(a, a) mixture e-value of wins and losses against fair coins."""
    return float(betaln(wins + a, losses + a) - betaln(a, a) + (wins + losses) * math.log(2.0))


def family_thresholds(log_evidence: Sequence[float], gamma: float, family: str) -> tuple[np.ndarray, float]:
    """Which pairs of a study the family rule decides, and the log threshold of the next one.

    log_evidence (m,) every pair's log e-value (stopped pairs keep theirs). ``ebh``: e-BH
    (Wang & Ramdas 2022): with e sorted decreasingly, k* = max{k : e_(k) >= m / (gamma k)} and
    the k* largest are decided; the false discovery rate over the m pairs is <= gamma for
    e-values under any dependence (each pair's e-process stopped at its own stopping time is
    an e-value; exact when the pairs' labels are independent). A pair decided earlier keeps
    its e-value, so it stays in the set: k* never falls below the decided count.
    ``bonferroni``: e >= m / gamma (family-wise error <= gamma by the union bound and Ville's
    inequality). ``none``: e >= 1 / gamma per pair.
    Returns (decided (m,) bool, log threshold a pair not yet decided must reach now).
    """
    log_e = np.asarray(log_evidence, dtype=float).reshape(-1)
    m = len(log_e)
    if m == 0:
        return np.zeros(0, dtype=bool), math.log(1.0 / gamma)
    if family == "none":
        bar = math.log(1.0 / gamma)
        return log_e >= bar, bar
    if family == "bonferroni":
        bar = math.log(m / gamma)
        return log_e >= bar, bar
    if family != "ebh":
        raise ValueError(f"unknown family rule {family!r}")
    order = np.argsort(-log_e, kind="stable")
    ranks = np.arange(1, m + 1)
    passes = log_e[order] >= np.log(m / (gamma * ranks))
    k = int(ranks[passes].max()) if passes.any() else 0
    decided = np.zeros(m, dtype=bool)
    decided[order[:k]] = True
    return decided, math.log(m / (gamma * (k + 1))) if k < m else math.log(1.0 / gamma)


# --------------------------------------------------------------------------------------------
# spending part of the error where a pair's labels end (ProtocolSettings.final_share)
# --------------------------------------------------------------------------------------------
def final_level(settings: ProtocolSettings) -> float:
    """Level of the exact sign test on all of a pair's labels: final_share x gamma / 2, so that
    a rejection alone is worth final_share / level = 2 / gamma in the pair's e-value."""
    return settings.final_share * settings.gamma / 2


def sign_test_p(wins: float, losses: float) -> float:
    """Exact two-sided sign test p-value of wins against losses (ties left out)."""
    n = int(round(wins + losses))
    if n == 0:
        return 1.0
    k = int(round(max(wins, losses)))
    return float(min(1.0, 2 * binom.sf(k - 1, n, 0.5)))


def pair_log_e_value(pair: PairState, settings: ProtocolSettings) -> float:
    """log of the pair's e-value: the e-process wealth K, or with final_share w > 0
    (1 - w) K + w 1[all its labels are in and the exact sign test on them rejects at
    ``final_level``] / final_level. Both parts have expectation <= 1 under the null (the sign
    test is taken once, at a time fixed in advance: when the labels run out), so their mix is
    an e-value; the error left after the e-process's share is spent where the budget ends."""
    w = settings.final_share
    if w == 0:
        return pair.log_evidence
    wealth = (1 - w) * math.exp(min(pair.log_evidence, 700.0))
    if pair.remaining == 0 and pair.judgements > 0:
        wins, _, losses = (float(x) for x in pair.human_counts)
        level = final_level(settings)
        if sign_test_p(wins, losses) <= level:
            wealth += w / level
    return math.log(wealth) if wealth > 0 else -math.inf


def final_can_reject(pair: PairState, settings: ProtocolSettings) -> bool:
    """Whether the sign test on all the pair's labels can still reject (optimistic, as
    ``eprocess_can_decide``: the non-tie share r at the end of its (1 - futility) credible
    interval farther from 1/2, the remaining labels split at r)."""
    if settings.final_share == 0 or pair.remaining == 0:
        return False
    wins, ties, losses = (float(x) for x in pair.human_counts)
    futility = settings.futility
    r = optimistic_win_share(wins, losses, futility)
    non_tie = pair.remaining * (wins + losses + 1) / (wins + ties + losses + 2)
    lead = 1.0 if wins >= losses else -1.0
    return sign_test_p(wins + non_tie * (r if lead > 0 else 1 - r),
                       losses + non_tie * (1 - r if lead > 0 else r)) <= final_level(settings)


# --------------------------------------------------------------------------------------------
# rule "boundary": an exact binomial boundary per pair (a candidate, docs/results.md)
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def boundary_critical(steps: int, alpha: float) -> int:
    """Smallest c with P(max_{t <= steps} |S_t| >= c) <= alpha for a simple symmetric random walk
    S (exact, by dynamic programming over the walk absorbed at +-c). Under the item-flip null a
    pair's non-tie item labels are fair coins, so deciding when |n+ - n-| >= c at any looks
    (ties only delay the walk) has false ± chance <= alpha: a constant boundary on the sum
    scale is O'Brien-Fleming's shape, here exact for the binomial and valid for any number and
    spacing of looks up to ``steps`` non-ties."""
    if steps < 0 or not 0 < alpha < 1:
        raise ValueError(f"steps must be >= 0 and alpha in (0, 1), got {steps}, {alpha}")
    for c in range(1, steps + 2):
        alive = np.zeros(2 * c + 1)
        alive[c] = 1.0                      # index c is S = 0; indices 0 and 2c are absorbing
        crossed = 0.0
        for _ in range(steps):
            moved = np.zeros_like(alive)
            moved[1:] += 0.5 * alive[:-1]
            moved[:-1] += 0.5 * alive[1:]
            crossed += moved[0] + moved[-1]
            moved[0] = moved[-1] = 0.0
            alive = moved
        if crossed <= alpha:
            return c
    return steps + 1


def boundary_level(settings: ProtocolSettings, pairs: int) -> float:
    """Per-pair level of rule "boundary": gamma (family "none"), gamma / pairs ("bonferroni"),
    or gamma x boundary_share ("ebh": a crossing is then the e-value 1 / (gamma x share), which
    e-BH decides when at least share x pairs have crossed)."""
    if settings.family == "bonferroni":
        return settings.gamma / pairs
    if settings.family == "ebh":
        return settings.gamma * settings.boundary_share
    return settings.gamma


def boundary_decision(pair: PairState, level: float) -> int:
    """±1 once |n+ - n-| of the pair's item labels reaches boundary_critical(capacity, level)."""
    wins, _, losses = (float(x) for x in pair.human_counts)
    if abs(wins - losses) >= boundary_critical(int(pair.capacity), float(level)):
        return int(np.sign(wins - losses))
    return 0


def boundary_can_decide(pair: PairState, level: float, futility: float) -> bool:
    """Whether the pair can still reach its boundary (optimistic, as eprocess_can_decide)."""
    wins, ties, losses = (float(x) for x in pair.human_counts)
    r = optimistic_win_share(wins, losses, futility)
    non_tie = pair.remaining * (wins + losses + 1) / (wins + ties + losses + 2)
    reach = abs(wins - losses) + non_tie * (2 * r - 1)
    return reach >= boundary_critical(int(pair.capacity), float(level))
