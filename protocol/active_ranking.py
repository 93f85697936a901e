"""An active Bradley–Terry design for ranking many systems (issue 22).

The merge sort of ``protocol.ranking_design`` asks the protocol to *decide* every pair it
compares, at a family-wise level: each comparison of two close neighbours runs until its
e-process reaches 1 / level or can no longer, which is what its labels pay for. A leaderboard
reads the order off a Bradley–Terry fit of every label, and to order two neighbours the fit
needs far fewer labels than a decision. This design spends labels where that fit is least sure
of the order and stops when the order is resolved to the study's stated resolution.

The fit
-------
Bradley–Terry log-strengths s (the leaderboard's estimator, ``leaderboard.fit_scores``, with
the replays' weak prior of tied pseudo-comparisons, ties counting half a win each, and half a
win to each side of every pair with labels, ``smoothed``) and their Laplace posterior:
covariance = pseudo-inverse of the Fisher information

    H = sum over pairs i < j of n_ij p_ij (1 - p_ij) (e_i - e_j)(e_i - e_j)^T,
    p_ij = 1 / (1 + exp(s_j - s_i)),  n_ij = labels of the pair plus the prior's pseudo-labels

(the scores are identified up to a constant; differences are not affected by it).

A neighbour (a, b) of the fitted order (a above b): d = s_a - s_b >= 0, sd = sqrt(Var(s_a -
s_b)), z = d / sd, and P(a and b are in the wrong order) ~= Phi(-z). With z* = Phi^-1(confidence)
and r the study's resolution:

    ordered   z >= z_o = Phi^-1(1 - (1 - confidence) / ORDER_BAR_FACTOR) (0.995 at 0.95): the
              order of the two is resolved at the confidence. The bar is stricter than z*
              because the claim is read off the fit at the design's stop, after many looks, for
              every neighbour: on tiers of exactly equal systems (the arena's ``tier_size``) a
              bar of z* reported about 5 % of the equal neighbours ordered, and as the design
              makes few ordered claims about unequal ones (it stops a pair once it is close),
              a quarter of its ordered claims were wrong (docs/ranking-results.md, "When the
              model does not hold"); the equal neighbours so claimed had stopped at an early
              look, where the margin's r counts little, or shared no labels at all. The stop
              does not depend on the bar (ordered implies close), so the labels do not either
    close     (d + r) / sd >= z* but not ordered: P(b is better than a by more than r) <=
              1 - confidence. The order is resolved *to the resolution* (log-odds units: 0.05 is
              a 51.25 % win rate): a reversal, if there is one, is smaller than r. This is the
              indifference-zone (epsilon-correct, "PAC") criterion of ranking by duels: without
              it two near-equal systems would take every item to be ordered. When the fit is by
              kind of prompt (``fit_by_kind``), sd^2 = v_labels + v_kinds and the part the kinds
              add is taken at the stricter z_k = Phi^-1(1 - (1 - confidence) /
              KINDS_CLOSE_BAR_FACTOR): close needs d + r >= sqrt(z*^2 v_labels + z_k^2 v_kinds),
              i.e. (d + r) / sd_close >= z* with sd_close^2 = v_labels + (z_k / z*)^2 v_kinds
              (``ActiveSettings.kinds_weight``). A claim whose uncertainty is mostly the kinds'
              is made only past its bar by a margin: at z_k = z* such claims were made just past
              it and held only at about the stated level (docs/ranking-results.md)
    spent     the pair cannot take more labels: its items (or ``max_labels``) are used up, or
              it has none and the design already sampled ``max_pairs`` pairs
    open      otherwise

The first round, with no labels, funds every neighbour of the start order (the metric's order,
or a seeded shuffle). After it the design keeps ``width`` rounds in flight: whenever a round
closes, the fit is redone and the open neighbours nearest to their stop, smallest (d + r) / sd
first, that have no round in flight are funded, ``batch`` labels each (fewer where fewer are
left), until ``width`` rounds are in flight. So a crowd always has rounds to work on while the
design is open (waiting for a whole step's last round left workers idle: docs/ranking-results.md). When
the order changes, its new neighbours are the pairs funded, so labels also fall on pairs a few
places apart, which the fit pools. The design stops when no neighbour is open and no round is in
flight (or ``budget`` is reached).

What it states
--------------
* The order: each neighbour's posterior probability of being misordered, Phi(-z), and their sum,
  the expected number of misordered neighbours; and at the stop, for every neighbour not spent,
  P(misordered by more than the resolution) <= 1 - confidence. A Bayesian approximation (Laplace, nearly flat
  prior), read after many looks: it is not a decision at any level, and its calibration is
  measured on known-truth arenas (docs/ranking-results.md).
* Decisions: the labels every sampled pair took are also run through the per-pair e-process at
  level gamma / max_pairs (``decision_level``; by default every pair, k (k - 1) / 2). Whether and when a pair is sampled depends only
  on labels already seen, so each e-process stays valid (optional continuation); at most
  ``max_pairs`` pairs are ever sampled, so P(any wrong decision, direct or implied by
  transitivity) <= gamma, under the same assumption as the sort's (a pair's labels say nothing
  about another pair's beyond the truth).

``active_step`` is resumable: from the labels known so far (a win matrix and the labels per
pair) and the rounds in flight it returns the labels to collect now, or that the design is
complete. Pure numpy.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import chi2

from .adaptive import ProtocolSettings
from .leaderboard import fit_scores
from .machine import open_pairs, with_pairs
from .ranking_design import closure, decide_pair, item_order, start_positions
from .state import DECIDED, EXHAUSTED, FILLED, FUTILE, PARKED, WAITING, PairState, ProtocolState, require_whole
from .state import OPEN as ROUND_OPEN
from .study_settings import KINDS_CLOSE_BAR_FACTOR, ORDER_BAR_FACTOR
from .study_settings import SETTINGS as STUDY_SETTINGS

Pair = tuple[int, int]

OPEN, ORDERED, CLOSE, SPENT = "open", "ordered", "close", "spent"


# The replays' prior (protocol.arena_replay.FIT_PRIOR_TIES): tied pseudo-comparisons between
# every two systems keep the fit finite when a system wins all its labels, weak enough that
# a sparse design's scores are not pulled together.
PRIOR_TIES = 0.01


@dataclass(frozen=True)
class ActiveSettings:
    """How the active design spends labels and when it stops.

    confidence  posterior probability at which a neighbour pair counts as close (resolved
                within the resolution); ordered claims are made at the stricter ``order_bar``
                and stated at the confidence
    resolution  smallest difference of log-strengths the study cares about: a neighbour pair
                is resolved when a reversal larger than this has posterior probability
                <= 1 - confidence
    batch       labels a funded pair takes in one round
    width       rounds kept in flight after the first (which funds every neighbour of the
                start order)
    max_labels  most labels one pair may take (0 = all of its items)
    budget      most labels in all (0 = no limit)
    max_pairs   most distinct pairs ever sampled (0 = every pair, k (k - 1) / 2): the count
                the decisions' level divides gamma by
    gamma       family-wise level of the decisions reported
    """

    # A study's defaults (the table of study settings, protocol/study_settings.py).
    confidence: float = STUDY_SETTINGS["ranking_confidence"].default
    resolution: float = STUDY_SETTINGS["ranking_resolution"].default
    batch: int = 25
    width: int = 10
    max_labels: int = 0
    budget: int = 0
    max_pairs: int = 0
    gamma: float = 0.05

    def __post_init__(self) -> None:
        for name in ("confidence", "gamma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1):
                raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
        if not (isinstance(self.resolution, (int, float)) and not isinstance(self.resolution, bool)
                and np.isfinite(self.resolution) and self.resolution >= 0):
            raise ValueError(f"resolution must be a finite number >= 0, got {self.resolution!r}")
        for name, low in (("batch", 1), ("width", 1), ("max_labels", 0), ("budget", 0), ("max_pairs", 0)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

    @property
    def stop_bar(self) -> float:
        """z* = Phi^-1(confidence): a neighbour is resolved (close) when (d + r) / sd reaches it."""
        return float(ndtri(self.confidence))

    @property
    def order_misorder(self) -> float:
        """(1 - confidence) / ORDER_BAR_FACTOR (0.005 at 0.95): the most posterior probability of
        being the other way round at which a neighbour is reported ordered; what every page that
        explains an ordered claim states (rounded so that it reads as it is: 0.005, not
        0.0050000000000000044)."""
        return round((1 - self.confidence) / ORDER_BAR_FACTOR, 12)

    @property
    def order_bar(self) -> float:
        """Phi^-1(1 - order_misorder): a neighbour is reported ordered when d / sd reaches it
        (stricter than ``stop_bar``; the module doc says why)."""
        return float(ndtri(1 - self.order_misorder))

    @property
    def kinds_close_misorder(self) -> float:
        """(1 - confidence) / KINDS_CLOSE_BAR_FACTOR (0.005 at 0.95): the tail the part of a close
        claim's uncertainty that kinds of prompt add is taken at (the module doc); what every page
        that explains a close claim by kind states (rounded as ``order_misorder``)."""
        return round((1 - self.confidence) / KINDS_CLOSE_BAR_FACTOR, 12)

    @property
    def kinds_close_bar(self) -> float:
        """z_k = Phi^-1(1 - kinds_close_misorder) (2.58 at 0.95)."""
        return float(ndtri(1 - self.kinds_close_misorder))

    @property
    def kinds_weight(self) -> float:
        """(z_k / z*)^2 (2.45 at 0.95): the weight of the kinds' variance in a close claim's sd, so
        that (d + r) / sd_close >= z* is d + r >= sqrt(z*^2 v_labels + z_k^2 v_kinds). At
        confidence 0.5 (z* = 0) every neighbour is close whatever the weight; it is then 1."""
        return (self.kinds_close_bar / self.stop_bar) ** 2 if self.stop_bar > 0 else 1.0

    def pair_limit(self, systems: int) -> int:
        """Most distinct pairs the design samples in a study of ``systems`` systems."""
        return self.max_pairs or max(1, systems * (systems - 1) // 2)

    def decision_level(self, systems: int) -> float:
        """The level every sampled pair's e-process decides at."""
        return float(self.gamma) / self.pair_limit(systems)

    def capacity(self, items: int) -> int:
        """Labels one pair may take, of its ``items``."""
        return min(items, self.max_labels) if self.max_labels else int(items)


def smoothed(wins: np.ndarray) -> np.ndarray:
    """(S, S) ``wins`` plus half a win to each side of every pair with labels (Jeffreys'
    correction). Without it a pair one system won every time has an infinite maximum and the
    Laplace approximation there an infinite variance: the clearest order would look the least
    sure and take every item of the pair. A pair with many labels barely moves."""
    wins = np.asarray(wins, dtype=float)
    labelled = (wins + wins.T) > 0
    return wins + 0.5 * labelled


@dataclass(frozen=True)
class Fit:
    """Bradley–Terry fit with its Laplace covariance.

    scores      (S,) log-strengths, mean 0
    covariance  (S, S) posterior covariance of the scores (pseudo-inverse of the information)
    kinds       (S, S) or None: the covariance the study's kinds of prompt add (``fit_by_kind``),
                the part of a difference's variance that more labels on the same prompts do
                not shrink; None when the labels carry no kinds
    kinds_low   (S, S) or None: a lower confidence bound of it (what the design can be sure
                more labels will not remove)
    kind_variance  the estimate of sigma^2, the variance of a system's effect on a kind
                (``fit_by_kind``; 0 without kinds)
    """

    scores: np.ndarray
    covariance: np.ndarray
    kinds: np.ndarray | None = None
    kinds_low: np.ndarray | None = None
    kind_variance: float = 0.0

    @staticmethod
    def _variance(c: np.ndarray | None, a: int, b: int) -> float:
        return 0.0 if c is None else max(float(c[a, a] + c[b, b] - 2 * c[a, b]), 0.0)

    def floor_sd(self, a: int, b: int) -> float:
        """Lower confidence bound of the sd of s_a - s_b that the sample of kinds adds, which
        more labels on the study's prompts cannot shrink (0 without kinds)."""
        return float(np.sqrt(self._variance(self.kinds_low, a, b)))

    def difference_sd(self, a: int, b: int, kinds_weight: float = 1.0) -> float:
        """sd of s_a - s_b: sqrt(v_labels + kinds_weight v_kinds) (``kinds_weight``: a close
        claim's, ``ActiveSettings.kinds_weight``; v_kinds 0 without kinds)."""
        return float(np.sqrt(max(self._variance(self.covariance, a, b), 1e-18)
                             + kinds_weight * self._variance(self.kinds, a, b)))

    def prompt_limited(self, a: int, b: int, margin: float, kinds_bar: float) -> bool:
        """Whether more labels on the study's prompts cannot resolve s_a - s_b: the kinds'
        part alone (its lower bound) keeps ``margin`` (difference + resolution) below
        ``kinds_bar`` sd's (``ActiveSettings.kinds_close_bar``, what a close claim needs of
        that part with no labels' noise left), and the labels' own sd is already no larger
        than that part (more labels would shrink only the smaller share of the uncertainty)."""
        floor = self.floor_sd(a, b)
        return floor > 0 and margin < kinds_bar * floor and self._variance(self.covariance, a, b) <= floor ** 2


def fit(wins: np.ndarray, *, prior_ties: float = PRIOR_TIES, start: np.ndarray | None = None) -> Fit:
    """The fit of a (S, S) win matrix (``leaderboard.win_matrix``: W[i, j] = times i beat j,
    a tie half to each), with half a win to each side of every pair that has labels
    (``smoothed``) and ``prior_ties`` tied pseudo-comparisons between every two systems.
    ``start``: the scores to start the solver from (``leaderboard.fit_scores``), e.g. the last
    fit's: the same fit, in fewer iterations."""
    wins = smoothed(wins)
    size = len(wins)
    scores = fit_scores(wins, prior_ties=prior_ties, start=start)
    played = wins + wins.T + prior_ties * (1 - np.eye(size))
    p = 1.0 / (1.0 + np.exp(scores[None, :] - scores[:, None]))
    weight = played * p * (1 - p)
    np.fill_diagonal(weight, 0.0)
    information = np.diag(weight.sum(axis=1)) - weight
    return Fit(scores=scores, covariance=np.linalg.pinv(information, hermitian=True))


def fit_by_kind(wins: np.ndarray, *, ties: np.ndarray, confidence: float, prior_ties: float = PRIOR_TIES,
                start: np.ndarray | None = None) -> Fit:
    """The fit of labels on prompts of K kinds, ``wins`` (K, S, S) (one win matrix per kind, a
    tie half a win each) and ``ties`` (K, S, S) (the tied labels of each pair on each kind,
    symmetric: ties[g, i, j] = ties[g, j, i]), with the uncertainty of the kinds' sample: an
    explicit prompt-kind model.

    Model: on kind g, system s has log-strength theta_s + u[s, g], the effects u[s, g] drawn
    for each kind with a common variance sigma^2 (the study's K kinds a sample of the kinds a
    population of prompts holds, over which u averages 0). The population's order is that of
    theta; the study's prompts estimate theta + mean_g u[., g], so a difference s_a - s_b
    carries, besides its labels' noise, the kinds' part of variance 2 sigma^2 / K, which more
    labels on the same prompts do not shrink.

    The scores and the labels' covariance are ``fit`` of the pooled labels (``wins.sum(0)``;
    with every pair's labels balanced over the kinds, ``stratified``, they estimate the kinds'
    mean). sigma^2 is estimated by the method of moments on the win-share scale, unbiased
    however few labels a kind holds: for every pair with at least 2 labels on every kind, the
    spread of its win share y_g over the kinds, var_g(y_g) (ddof 1), less the mean sampling
    variance of a share, mean_g (m_g - y_g^2) / (n_g - 1) with m_g = y_g - t_g / (4 n_g) the
    mean square of its n_g label values (1, 1/2 for each of its t_g ties, 0), estimates the
    kinds' variance of its win share, which divided by (ybar (1 - ybar))^2 (the delta method,
    ybar (1 - ybar) at least 0.05) is that of its log-odds, 2 sigma^2; the pairs are pooled
    with weights their labels and the result taken at least 0. (A tie varies less than a win
    or a loss: taken as one, y_g (1 - y_g) / (n_g - 1), the sampling variance was overstated
    and sigma^2 estimated at about 0.6 of its value on arenas with a fifth of ties,
    docs/ranking-results.md.) ``kinds`` = sigma^2 / K (I - 1 1^T / S) with
    sigma^2 at its upper confidence bound (chi-square on (K - 1)(S - 1) degrees of freedom: the
    estimate is noisy while the kinds have few labels), so that Var(s_a - s_b) gains
    2 sigma^2 / K; ``kinds_low`` the same at the lower confidence bound. Fewer than 2 kinds with labels, or no
    pair labelled on every kind, is ``fit``. ``start``: as ``fit``'s, for the pooled scores."""
    wins, ties = np.asarray(wins, dtype=float), np.asarray(ties, dtype=float)
    if wins.ndim != 3 or wins.shape[1] != wins.shape[2]:
        raise ValueError(f"wins by kind must be (K, S, S), got shape {wins.shape}")
    if ties.shape != wins.shape or np.any(ties < 0) or np.any(ties != ties.transpose(0, 2, 1)):
        raise ValueError(f"ties by kind must be symmetric counts >= 0 of the wins' shape {wins.shape}, "
                         f"got shape {ties.shape}")
    pooled = fit(wins.sum(axis=0), prior_ties=prior_ties, start=start)
    used = [g for g in range(len(wins)) if wins[g].sum() > 0]
    size, kinds = wins.shape[1], len(used)
    if kinds < 2:
        return pooled
    counts = wins[used] + wins[used].transpose(0, 2, 1)                                  # (K, S, S)
    first, second = np.nonzero(np.triu(np.all(counts >= 2, axis=0), k=1))
    if not len(first):
        return pooled
    n = counts[:, first, second]                                                         # (K, pairs)
    share = wins[used][:, first, second] / n
    square = share - ties[used][:, first, second] / (4 * n)                             # mean square of the labels
    between = share.var(axis=0, ddof=1) - np.mean((square - share ** 2) / (n - 1), axis=0)
    mean = share.mean(axis=0)
    slope = np.maximum(mean * (1 - mean), 0.05)                                          # d share / d log-odds
    weight = n.sum(axis=0)
    sigma2 = max(0.0, float(np.sum(weight * between / slope ** 2) / np.sum(weight)) / 2)
    shape = (np.eye(size) - 1.0 / size) * sigma2 / kinds
    df = (kinds - 1) * (size - 1)
    return replace(pooled, kinds=shape * df / chi2.ppf(1 - confidence, df),
                   kinds_low=shape * df / chi2.ppf(confidence, df), kind_variance=sigma2)


@dataclass(frozen=True)
class Neighbour:
    """One pair of neighbours of the fitted order: ``upper`` above ``lower`` (system indices).

    z         d / sd of the fitted difference
    misorder  posterior probability that they are in the wrong order, Phi(-z)
    margin    (d + resolution) / sd_close: the design's stop statistic, sd_close = sd with the
              kinds' part of the variance weighted by ``ActiveSettings.kinds_weight`` (= sd
              without kinds); P(misordered by more than the resolution) <= Phi(-margin)
    status    OPEN, ORDERED, CLOSE or SPENT
    """

    upper: int
    lower: int
    difference: float
    sd: float
    z: float
    misorder: float
    margin: float
    status: str

    @property
    def misorder_beyond_resolution(self) -> float:
        """Posterior probability that ``lower`` is better than ``upper`` by more than the
        resolution, Phi(-margin) (by kind of prompt an upper bound of it, the kinds' part
        weighted): what the stop bounds by 1 - confidence."""
        return float(ndtr(-self.margin))


@dataclass(frozen=True)
class ActiveStep:
    """Where the design stands given the labels so far.

    order       system indices, best first (the fit; ties by the start order)
    neighbours  (S - 1) the neighbour pairs of ``order``
    pending     pair (i, j), i < j -> labels to fund now (rounds to open besides those in flight)
    complete    nothing to fund and no round in flight: no neighbour is open, or the budget is
                spent
    kinds       kinds of prompt the fit was given (one win matrix each; 0: labels without kinds)
    kind_variance  the fit's estimate of sigma^2 (``fit_by_kind``; 0 without kinds)
    """

    order: tuple[int, ...]
    neighbours: tuple[Neighbour, ...]
    pending: Mapping[Pair, int]
    complete: bool
    kinds: int = 0
    kind_variance: float = 0.0

    @property
    def expected_misordered(self) -> float:
        """Expected number of misordered neighbours under the fit's posterior."""
        return float(sum(n.misorder for n in self.neighbours))

    def tiers(self) -> tuple[tuple[int, ...], ...]:
        """Runs of consecutive systems of the order whose neighbours are not ORDERED."""
        tiers, current = [], [self.order[0]]
        for neighbour in self.neighbours:
            if neighbour.status == ORDERED:
                tiers.append(tuple(current))
                current = []
            current.append(neighbour.lower)
        tiers.append(tuple(current))
        return tuple(tiers)


def step_fit(wins: np.ndarray, settings: ActiveSettings, ties: np.ndarray | None = None,
             start: np.ndarray | None = None) -> Fit:
    """The fit ``active_step`` makes of ``wins``, (S, S) or (K, S, S) by kind of prompt with its
    ``ties`` (K, S, S) (``fit_by_kind``; required by kind); ``start``: the scores to start the
    solver from (``fit``), e.g. the last step's fit's."""
    wins = np.asarray(wins, dtype=float)
    if wins.ndim != 3:
        return fit(wins, start=start)
    if ties is None:
        raise ValueError("a fit by kind of prompt needs the tied labels by kind (ties)")
    return fit_by_kind(wins, ties=ties, confidence=settings.confidence, start=start)


def fitted_order(current: Fit, start: Sequence[int]) -> np.ndarray:
    """System indices, best first, by the fit's scores, ties by ``start`` (the start order)."""
    start = np.asarray(start, dtype=np.int64)
    rank = np.empty(len(start), dtype=np.int64)
    rank[start] = np.arange(len(start))
    # Scores equal in exact arithmetic (systems with the same record) differ by the solver's
    # tolerance; rounded well above it, they tie and the start order decides.
    return np.lexsort((rank, -np.round(current.scores, 6)))


def _key(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def active_step(wins: np.ndarray, spent: Mapping[Pair, int], *, items: int | Mapping[Pair, int],
                start: Sequence[int], settings: ActiveSettings,
                in_flight: Mapping[Pair, int] = MappingProxyType({}), fitted: Fit | None = None,
                ties: np.ndarray | None = None) -> ActiveStep:
    """The rounds to open now.

    wins       (S, S) win matrix of every label so far (``leaderboard.win_matrix``), or (K, S, S)
               one per kind of prompt, with ``ties`` (K, S, S) its tied labels: the fit then
               states the kinds' uncertainty too (``fit_by_kind``), a close claim takes it at
               the stricter bar (the module doc), and a neighbour that only more kinds could
               resolve is spent
    spent      pair (i, j), i < j -> labels it took so far
    items      items per pair, or pair (i, j), i < j -> labels it can take in all (a pair not
               named can take none)
    start      (S,) the start order (system indices, best first): breaks the fit's ties, so
               the first round, with no labels, funds its neighbours
    in_flight  pair (i, j), i < j -> labels of its open round still to come: such a pair is not
               funded again, and the design funds only up to ``width`` rounds in flight
    fitted     the fit of ``wins`` (``step_fit``) when the caller made it already
    """
    wins = np.asarray(wins, dtype=float)
    size = wins.shape[-1] if wins.ndim else 0
    start = np.asarray(start, dtype=np.int64)
    if wins.ndim not in (2, 3) or wins.shape[-2:] != (size, size) or sorted(start.tolist()) != list(range(size)):
        raise ValueError(f"wins must be ({size}, {size}) or (kinds, {size}, {size}) and start a permutation of "
                         f"range({size}), got shape {wins.shape}")
    current = fitted if fitted is not None else step_fit(wins, settings, ties)
    order = fitted_order(current, start)
    z_star, order_bar, kinds_weight = settings.stop_bar, settings.order_bar, settings.kinds_weight
    if isinstance(items, Mapping):
        def capacity_of(key: Pair) -> int:
            return settings.capacity(items.get(key, 0))
    else:
        def capacity_of(key: Pair) -> int:
            return settings.capacity(items)
    sampled = len({key for key, n in spent.items() if n > 0} | set(in_flight))
    limit = settings.pair_limit(size)
    total = sum(spent.values()) + sum(in_flight.values())

    neighbours = []
    for a, b in zip(order[:-1], order[1:]):
        a, b = int(a), int(b)
        difference = float(current.scores[a] - current.scores[b])
        sd = current.difference_sd(a, b)
        z = difference / sd
        margin = (difference + settings.resolution) / current.difference_sd(a, b, kinds_weight)
        taken = spent.get(_key(a, b), 0)
        if z >= order_bar:
            status = ORDERED
        elif margin >= z_star:
            status = CLOSE
        elif (taken >= capacity_of(_key(a, b)) or (taken == 0 and sampled >= limit)
              or current.prompt_limited(a, b, difference + settings.resolution, settings.kinds_close_bar)):
            status = SPENT
        else:
            status = OPEN
        neighbours.append(Neighbour(upper=a, lower=b, difference=difference, sd=sd, z=z,
                                    misorder=float(ndtr(-z)), margin=margin, status=status))

    open_ = [n for n in neighbours if n.status == OPEN and _key(n.upper, n.lower) not in in_flight]
    order_position = {int(system): position for position, system in enumerate(order)}
    out_of_budget = bool(settings.budget) and total >= settings.budget
    pending: dict[Pair, int] = {}
    if open_ and not out_of_budget:
        if total == 0:
            chosen = open_[:limit]
        else:
            slots = max(0, settings.width - len(in_flight))
            chosen = sorted(open_, key=lambda n: (round(n.margin, 9), order_position[n.upper]))[:slots]
            fresh = [n for n in chosen if spent.get(_key(n.upper, n.lower), 0) == 0]
            unfunded = set(id(n) for n in fresh[max(0, limit - sampled):])
            chosen = [n for n in chosen if id(n) not in unfunded]
        left = settings.budget - total if settings.budget else None
        for n in chosen:
            key = _key(n.upper, n.lower)
            take = min(settings.batch, capacity_of(key) - spent.get(key, 0))
            if left is not None:
                take = min(take, left)
                left -= take
            if take > 0:
                pending[key] = take
    return ActiveStep(order=tuple(int(s) for s in order), neighbours=tuple(neighbours),
                      pending=MappingProxyType(pending), complete=not pending and not in_flight,
                      kinds=len(wins) if wins.ndim == 3 else 0, kind_variance=current.kind_variance)


# The design replayed ---------------------------------------------------------------------------
# The known-truth replay (arena_replay.replay_active) and the planner (plan.replay_active) drive
# the design on a table of labels: one loop, so that both replay what the app runs.

def _items_of(items: int | Mapping[Pair, int], key: Pair) -> int:
    return int(items.get(key, 0)) if isinstance(items, Mapping) else int(items)


def stratified(order: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """``order`` (n,) item indices rearranged so that the kinds of ``kinds`` (T,) take turns:
    the first item of each kind (in ``order``), then the second of each, ... (kinds by first
    appearance), so that every prefix of the result holds the kinds about equally often.

    >>> stratified(np.array([4, 0, 1, 3, 2, 5]), np.array([0, 0, 1, 1, 1, 0])).tolist()
    [4, 0, 3, 1, 2, 5]
    """
    order = np.asarray(order, dtype=np.int64)
    kind = np.asarray(kinds)[order]
    _, first, label = np.unique(kind, return_index=True, return_inverse=True)
    turn = np.empty(len(order), dtype=np.int64)
    for g in range(len(first)):
        where = np.flatnonzero(label == g)
        turn[where] = np.arange(len(where))
    return order[np.lexsort((first[label], turn))]


def active_run(labels_of: Callable[[int, int], np.ndarray], *, items: int | Mapping[Pair, int],
               start: Sequence[int], settings: ActiveSettings, seed: int,
               kinds: np.ndarray | None = None) -> tuple[ActiveStep, dict[Pair, int]]:
    """The design run to its stop on known labels, its rounds closing in the order they were
    opened (the design redone after each close), as the app runs it when rounds close oldest
    first. Returns the last step (the fitted order and its neighbours) and the labels each
    sampled pair took.

    labels_of(i, j)  (T,) the label of every item of pair i < j (system indices), +1 = i better
    items            items per pair, or pair (i, j), i < j -> its items
    A round's labels are the next items of its pair in ``item_order(seed, i, j, items)``.
    kinds            None, or (T,) the kind of every item: a pair's items then take turns over
                     the kinds (``stratified``) and the design fits by kind (``fit_by_kind``)
    """
    size = len(start)
    kinds = None if kinds is None else np.unique(np.asarray(kinds), return_inverse=True)[1]
    counts = empty_counts(size, None if kinds is None else int(kinds.max()) + 1)
    spent: dict[Pair, int] = {}
    in_flight: dict[Pair, int] = {}   # rounds open, in the order they were opened
    last: Fit | None = None
    while True:
        wins, ties = counts_wins(counts), None if kinds is None else counts_ties(counts)
        # each step's fit starts from the last one's scores, which one round's labels move
        # little: the same fit in about a third fewer of the solver's iterations
        last = step_fit(wins, settings, ties, start=None if last is None else last.scores)
        step = active_step(wins, spent, items=items, start=start, settings=settings,
                           in_flight=in_flight, fitted=last, ties=ties)
        in_flight.update(sorted(step.pending.items()))   # rounds opened together: by pair
        if not in_flight:
            return step, spent
        (i, j), take = next(iter(in_flight.items()))   # the oldest round closes
        del in_flight[i, j]
        taken = spent.get((i, j), 0)
        order = run_order(seed, i, j, _items_of(items, (i, j)), kinds)[taken: taken + take]
        add_labels(counts, i, j, labels_of(i, j)[order], None if kinds is None else kinds[order])
        spent[i, j] = taken + take


# Labels counted ---------------------------------------------------------------------------------
# One way of counting a pair's labels for the fit, whether they come from an arena's table (the
# replays), from the protocol's pairs (the app, ``active_inputs``) or are removed one by one
# (``fragility.order_removals``): counts (3, S, S), or (K, 3, S, S) one per kind of prompt, of
# the wins, ties and losses of the smaller index i over j > i (zero below the diagonal).

def empty_counts(size: int, kinds: int | None = None) -> np.ndarray:
    """Counts of no label: (3, size, size), or (kinds, 3, size, size) by kind."""
    return np.zeros((3, size, size) if kinds is None else (kinds, 3, size, size), dtype=np.int64)


def add_labels(counts: np.ndarray, i: int, j: int, values: np.ndarray, kinds: np.ndarray | None = None) -> None:
    """Add the labels ``values`` (n,) of systems i and j (+1 = i better, 0 a tie, -1 = j
    better) to ``counts`` (3, S, S), or (K, 3, S, S) with ``kinds`` (n,) each label's kind
    index, in place."""
    values = np.sign(np.asarray(values)).astype(np.int64)
    if i > j:
        i, j, values = j, i, -values
    outcome = 1 - values   # 0 a win of i, 1 a tie, 2 a loss
    if counts.ndim == 3:
        np.add.at(counts, (outcome, i, j), 1)
    else:
        np.add.at(counts, (np.asarray(kinds, dtype=np.int64), outcome, i, j), 1)


def counts_wins(counts: np.ndarray) -> np.ndarray:
    """The win matrix (S, S) of ``counts`` (3, S, S), or one per kind (K, S, S) of (K, 3, S, S):
    W[i, j] = the wins of i over j, a tie half a win each (``leaderboard.win_matrix``)."""
    half = counts[..., 1, :, :] / 2
    return counts[..., 0, :, :] + half + np.swapaxes(counts[..., 2, :, :] + half, -1, -2)


def counts_ties(counts: np.ndarray) -> np.ndarray:
    """The tied labels (..., S, S) of ``counts`` (..., 3, S, S), symmetric."""
    return counts[..., 1, :, :] + np.swapaxes(counts[..., 1, :, :], -1, -2)


def _kind_index(kinds: Mapping[str, str] | None) -> dict[str, int] | None:
    """Kind of prompt -> its index (kinds in sorted order), None without kinds."""
    return {kind: g for g, kind in enumerate(sorted(set(kinds.values())))} if kinds else None


def _count_pair(counts: np.ndarray, p: PairState, i: int, j: int, kinds: Mapping[str, str] | None,
                kind_index: dict[str, int] | None) -> None:
    """Add pair ``p``'s labels, its systems at positions i and j, to ``counts``: pooled, its
    human counts; by kind, each judged item once with the sign of its judgements' mean."""
    if kind_index is None:
        plus, tie, minus = (int(x) for x in p.human_counts)
        counts[:, min(i, j), max(i, j)] += (plus, tie, minus) if i < j else (minus, tie, plus)
    else:
        items = p.judged_items
        add_labels(counts, i, j, np.array([p.votes.get(item, 0) for item in items], dtype=float),
                   np.array([kind_index[kinds[item]] for item in items], dtype=np.int64))


def label_counts(pairs: Sequence[PairState], order: Sequence[str], kinds: Mapping[str, str] | None = None, *,
                 some: bool = False) -> np.ndarray:
    """(3, S, S) counts of the protocol's pairs, systems indexed by their position in ``order``
    (the start order), an item counted once with the sign of its judgements' mean; with
    ``kinds`` (item id -> kind of prompt) (K, 3, S, S), kinds in sorted order. What
    ``active_inputs`` fits, and what ``fragility`` removes labels from."""
    position = start_positions(pairs, order, some=some)
    kind_index = _kind_index(kinds)
    size = len(order)
    counts = empty_counts(size, None if kind_index is None else len(kind_index))
    for p in pairs:
        _count_pair(counts, p, position[p.first], position[p.second], kinds, kind_index)
    return counts


def run_order(seed: int, i: int, j: int, items: int, kinds: np.ndarray | None = None) -> np.ndarray:
    """The items pair i < j takes, in order: ``item_order``, with ``kinds`` taking turns over
    the kinds (``stratified``)."""
    order = item_order(seed, i, j, items)
    return order if kinds is None else stratified(order, kinds)


def active_decided(spent: Mapping[Pair, int], labels_of: Callable[[int, int], np.ndarray],
                   metric_of: Callable[[int, int], np.ndarray] | None, *, items: int | Mapping[Pair, int],
                   systems: int, settings: ActiveSettings, seed: int, batch: int,
                   kinds: np.ndarray | None = None) -> np.ndarray:
    """(S, S) bool: the decisions' partial order (transitive closure) after ``active_run``: every
    sampled pair's labels, in the order the run took them, through the per-pair e-process at
    ``settings.decision_level`` in rounds of ``batch``, betting on ``metric_of(i, j)`` (None:
    human only); ``kinds`` as ``active_run``'s."""
    level = settings.decision_level(systems)
    decided = []
    for (i, j), taken in sorted(spent.items()):
        protocol = ProtocolSettings(budget=taken, batch=batch, gamma=level, policy="adaptive", rule="eprocess",
                                    seed=seed)
        outcome = decide_pair(labels_of(i, j), settings=protocol,
                              order=run_order(seed, i, j, _items_of(items, (i, j)), kinds)[:taken],
                              metric=None if metric_of is None else metric_of(i, j))
        if outcome.decision:
            decided.append((i, j) if outcome.decision > 0 else (j, i))
    return closure(systems, decided)


# The design inside the app ------------------------------------------------------------------
# The app keeps one ProtocolState of all k (k - 1) / 2 pairs (one criterion, the e-process at
# ``decision_level``, family "none"). A pair the design has not funded is PARKED (judgements
# and all), which ``open_rounds`` never funds. ``active_advance`` runs after every close: the
# pair whose round closed is parked again, and the design tops the rounds in flight up to
# ``width``. Rounds closed in the order they were opened give exactly the replay's run
# (``arena_replay.replay_active``); a crowd closes them in its own order. The app's close passes
# a partial state: the pairs with labels or a round, and ``more`` for the neighbours it lacks.

@dataclass(frozen=True)
class ActiveInputs:
    """What ``active_step`` reads of the protocol's pairs (``active_inputs``).

    wins       (S, S), or (K, S, S) one per kind of prompt
    ties       None, or (K, S, S) the tied labels of each pair on each kind (symmetric)
    spent      pair (i, j), i < j -> its labels
    capacity   pair (i, j), i < j -> labels it may take in all
    in_flight  pair (i, j), i < j -> its open round's missing judgements
    """

    wins: np.ndarray
    ties: np.ndarray | None
    spent: dict[Pair, int]
    capacity: dict[Pair, int]
    in_flight: dict[Pair, int]


def active_inputs(pairs: Sequence[PairState], order: Sequence[str], kinds: Mapping[str, str] | None = None, *,
                  some: bool = False) -> ActiveInputs:
    """The counts of ``active_step`` from the protocol's pairs, systems indexed by their
    position in ``order`` (the start order). An item counts once, with the sign of its
    judgements' mean (a tie half a win each); a decided or exhausted pair can take no more; a
    pair with an open or filled round is in flight with its round's missing judgements.

    kinds  None, or item id -> its kind of prompt (every item of the study): wins and ties are
           then (K, S, S), one matrix per kind (kinds in sorted order), and ``active_step`` fits
           by kind (``fit_by_kind``)
    some   ``pairs`` are some of the study's (a partial state's, ``active_advance``)"""
    position = start_positions(pairs, order, some=some)
    size = len(order)
    kind_index = _kind_index(kinds)
    counts = empty_counts(size, None if kind_index is None else len(kind_index))
    spent: dict[Pair, int] = {}
    capacity: dict[Pair, int] = {}
    in_flight: dict[Pair, int] = {}
    for p in pairs:
        i, j = position[p.first], position[p.second]
        _count_pair(counts, p, i, j, kinds, kind_index)
        key = _key(i, j)
        spent[key] = int(p.judgements)
        capacity[key] = _capacity(p)
        if p.status in (ROUND_OPEN, FILLED):
            in_flight[key] = int(p.quota)
    return ActiveInputs(wins=counts_wins(counts), ties=None if kind_index is None else counts_ties(counts),
                        spent=spent, capacity=capacity, in_flight=in_flight)


def _capacity(pair: PairState) -> int:
    """Labels the design may still give a pair in all: none beyond its own once it is decided
    or exhausted."""
    return int(pair.judgements) if pair.status in (DECIDED, EXHAUSTED) else int(pair.capacity)


@dataclass
class LastFit:
    """A caller's memory of one study's last fit, kept between the design's steps (the app keeps
    one per study in each process): the next step's solver starts from its ``scores`` ((S,),
    systems in the start order; ``leaderboard.fit_scores``' ``start``: the same fit to the
    solver's tolerance, in fewer iterations) and leaves its own. Only a start, so a stale one
    (another process's close came between) gives the same fit, in more iterations."""

    scores: np.ndarray | None = None

    def start_for(self, size: int) -> np.ndarray | None:
        """The scores to start a fit of ``size`` systems from, or None (none yet, or another size)."""
        return self.scores if self.scores is not None and len(self.scores) == size else None


def active_advance(state: ProtocolState, order: Sequence[str], settings: ActiveSettings,
                   kinds: Mapping[str, str] | None = None,
                   more: Callable[[list[tuple[str, str]]], Sequence[PairState]] | None = None,
                   prepare: Callable[[ProtocolState, frozenset[int]], ProtocolState] | None = None,
                   last_fit: LastFit | None = None) -> ProtocolState:
    """Park the pairs whose round has closed and top the rounds in flight up to ``width``.

    order  system names, the start order (fixed for the study)
    kinds  None, or item id -> its kind of prompt (``active_inputs``): the fit is by kind
    more   for a partial state (``ProtocolState.outside``) that holds every pair with a
           judgement or a round, the others being parked with none (the app's round close
           reads no more: issue 41): ``more(keys)`` -> the pairs of ``keys`` (canonical
           (first, second)) that it leaves out. The step reads only the fitted order's
           neighbours beyond the pairs with labels; those the state lacks are read in
           (``machine.with_pairs``) after the fit and before the step, so the result holds
           them and is, pair for pair, the whole state's (a pair left out adds no win,
           nothing spent and no round in flight to the fit and the step)
    prepare  None, or ``prepare(state, indices)`` -> the state with the waiting pairs at
           ``indices`` (those about to open) given what their bets read at the opening, their
           ``prediction`` (``machine.calibrated``'s ``only``: the app's combined metrics,
           ``runtime.metrics_combined``); it may change nothing else. The design opens its
           rounds itself, so a caller's calibration before ``open_rounds`` would find none.
    last_fit None, or the study's ``LastFit``: the step's fit starts from it and leaves its own
    A pair whose round closed (waiting) is parked (``open_rounds`` would fund it again
    otherwise). Then ``active_step`` on every pair's counts and the rounds in flight: each pair
    it funds (a parked or futile one: futility only means its e-process cannot decide, its
    labels still inform the fit) gets a round of its share, within the budget left. Unchanged
    when nothing is to be funded (the rounds in flight are ``width``, or the design is
    complete).
    """
    partial = state.outside is not None
    if partial and more is None:
        require_whole(state, "the active design's step (or ``more``: the pairs it leaves out)")
    pairs = [replace(p, status=PARKED) if p.status == WAITING else p for p in state.pairs]
    inputs = active_inputs(pairs, order, kinds, some=partial)
    spent, capacity, in_flight = inputs.spent, inputs.capacity, inputs.in_flight
    if len(in_flight) >= settings.width:
        # no free slot (the first round's rounds still closing): the step would fund nothing,
        # so the fit is skipped
        return state if tuple(pairs) == state.pairs else replace(state, pairs=tuple(pairs))
    fitted = None
    if partial or last_fit is not None:
        fitted = step_fit(inputs.wins, settings, inputs.ties,
                          start=None if last_fit is None else last_fit.start_for(len(order)))
        if last_fit is not None:
            last_fit.scores = fitted.scores
    if partial:
        ranked = fitted_order(fitted, range(len(order)))
        held = {p.key for p in pairs}
        wanted = sorted({tuple(sorted((order[a], order[b]))) for a, b in zip(ranked[:-1], ranked[1:])} - held)
        extra = list(more(wanted)) if wanted else []
        if sorted(p.key for p in extra) != wanted:
            raise ValueError(f"more gave other pairs than the {len(wanted)} asked for")
        if extra:
            state = with_pairs(replace(state, pairs=tuple(pairs)), extra)
            pairs = list(state.pairs)
            position = {name: n for n, name in enumerate(order)}
            for p in extra:
                key = _key(position[p.first], position[p.second])
                spent[key], capacity[key] = int(p.judgements), _capacity(p)
    step = active_step(inputs.wins, spent, items=capacity, start=range(len(order)), settings=settings,
                       in_flight=in_flight, fitted=fitted, ties=inputs.ties)
    index = {p.key: n for n, p in enumerate(pairs)}
    budget = state.budget_left
    quotas = {}
    for (i, j), take in step.pending.items():
        a, b = order[i], order[j]
        n = index[(a, b) if a < b else (b, a)]
        pair = pairs[n]
        take = min(take, pair.remaining, budget)
        if take <= 0 or pair.status not in (PARKED, FUTILE):
            continue
        pairs[n] = replace(pair, status=WAITING)
        quotas[n] = take
        budget -= take
    if not quotas:
        return state if tuple(pairs) == state.pairs else replace(state, pairs=tuple(pairs))
    funded = replace(state, pairs=tuple(pairs))
    if prepare is not None:
        funded = prepare(funded, frozenset(quotas))
    return open_pairs(funded, quotas)


def active_start(state: ProtocolState, order: Sequence[str], settings: ActiveSettings,
                 prepare: Callable[[ProtocolState, frozenset[int]], ProtocolState] | None = None) -> ProtocolState:
    """Park every waiting pair of a fresh state (its capacity capped at ``max_labels``), then
    open the first step's rounds: every neighbour pair of the start order (``prepare`` as
    ``active_advance``'s).

    ValueError when a pair already holds judgements (imported with the bundle): the design
    funds every label it uses."""
    held = [p.key for p in state.pairs if p.judgements]
    if held:
        raise ValueError(f"the active ranking design starts with no human judgements; {len(held)} pairs hold "
                         f"some (first: {held[0]}): use the all-pairs design for a bundle with judgements")
    start_positions(state.pairs, order)
    cap = settings.max_labels
    parked = tuple(replace(p, status=PARKED, capacity=min(p.capacity, cap) if cap else p.capacity)
                   if p.status == WAITING else p for p in state.pairs)
    return active_advance(replace(state, pairs=parked), order, settings, prepare=prepare)


@dataclass(frozen=True)
class ActiveProgress:
    """Where an active ranking study stands (the app's dashboard).

    systems   (S,) names in the start order (the step's indices index them)
    step      the design's view of the counts now (fitted order, neighbours, pending)
    in_flight rounds open or filled now
    above     (S, S) bool over positions: the decisions' partial order (transitive closure)
    labels    human judgements so far
    level     the level every pair's e-process decides at
    """

    systems: tuple[str, ...]
    step: ActiveStep
    in_flight: int
    above: np.ndarray
    labels: int
    level: float

    @property
    def complete(self) -> bool:
        return self.step.complete and not self.in_flight

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.systems[i] for i in self.step.order)

    @property
    def tiers(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(self.systems[i] for i in tier) for tier in self.step.tiers())

    def decisions(self) -> dict[tuple[str, str], int]:
        """Every pair of names ordered by the decisions (canonical: first < second) -> +1 / -1."""
        out = {}
        for i, j in zip(*np.nonzero(self.above)):
            a, b = self.systems[i], self.systems[j]
            out[(a, b) if a < b else (b, a)] = 1 if a < b else -1
        return out


def active_progress(pairs: Sequence[PairState], order: Sequence[str], settings: ActiveSettings,
                    level: float, kinds: Mapping[str, str] | None = None) -> ActiveProgress:
    """The active study's progress: the step its counts give now and its decisions (``kinds``
    as ``active_inputs``'s)."""
    order = tuple(order)
    inputs = active_inputs(pairs, order, kinds)
    step = active_step(inputs.wins, inputs.spent, items=inputs.capacity, start=range(len(order)), settings=settings,
                       in_flight=inputs.in_flight, ties=inputs.ties)
    position = start_positions(pairs, order)
    decided = [(position[p.first], position[p.second]) if p.decision > 0 else (position[p.second], position[p.first])
               for p in pairs if p.decision]
    return ActiveProgress(systems=order, step=step, in_flight=sum(p.status in (ROUND_OPEN, FILLED) for p in pairs),
                          above=closure(len(order), decided), labels=sum(p.judgements for p in pairs),
                          level=float(level))
