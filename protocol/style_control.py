"""A style-controlled leaderboard: Bradley–Terry with covariates and sandwich intervals, the
model of the Arena's style control (``arena_rank.models.contextual_bradley_terry``, the
``arena-rank`` package), in numpy/scipy.

Model. Vote i compares systems a_i and b_i; y_i = 1 when a_i won, 0 when b_i won, 1/2 a tie.
Each vote carries the covariates x_i (F,): differences a_i − b_i of the two answers' style
(words, markdown headers, list items, bold spans) and the position the answer of a_i was
shown in (+1 left, −1 right, 0 unknown). Then

    P(a_i wins) = σ(θ[a_i] − θ[b_i] + z_iᵀ β),     z_i = (x_i − mean x) / sd x   (per column)

θ (S,) the systems' log-strengths, β (F,) the covariates' effects per standard deviation (a
column without variation is left at 0). Centring is arena-rank's (its ``from_pandas``), right
for the Arena, whose sides a and b are random, so mean x ≈ 0. evalapp's votes are in the
pair's canonical order: there mean x is the average style advantage of the canonical first
system, and subtracting it adds a constant to every logit of a canonical first system, which
the ratings then absorb wrongly. The app fits with ``center=False``: z_i = x_i / rms x, and the
model is unchanged by swapping the sides of any vote (x → −x, y → 1 − y). The fit minimises arena-rank's loss

    −(1/n) Σ w_i [y_i ℓ_i − softplus(ℓ_i)] + reg/2 · ‖β‖² (+ rating_reg/2 · ‖θ‖², 0 there),

ℓ_i the logit above, weights w_i = 1 / max(n_pair(i), min_pair_count) normalised to mean 1
(arena-rank's ``reweighted``: every pair of systems counts alike once it has min_pair_count
votes), or 1. The log-likelihood does not change when a constant is added to θ; the fit keeps
Σθ = 0 (where arena-rank's L-BFGS from 0 stays).

Scores are on the Arena's scale: 1000 + 400 / ln 10 · θ (400 points = odds of 10 : 1).

Intervals: the sandwich V = H⁻¹ G H⁻¹ / n, with H = (1/n) Σ w_i p_i (1 − p_i) u_i u_iᵀ
+ hessian_reg · I, u_i = (e_{a_i} − e_{b_i}, z_i), and G = (1/n) Σ_c s_c s_cᵀ −
(reg² / n) (0, β)(0, β)ᵀ, s_c the sum over the votes of cluster c of the score contributions
w_i (y_i − p_i) u_i. With each vote its own cluster this is arena-rank's estimate exactly;
clustering by prompt (the app's choice) makes it cluster-robust: votes on one prompt may
depend on each other (systems strong on some kinds of prompt, issue 39). Interval:
estimate ± z_{1−α/2} · √V_jj.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import norm

ARENA_SCALE = 400.0 / math.log(10.0)
ARENA_OFFSET = 1000.0
DEFAULT_REG = 1.0
DEFAULT_HESSIAN_REG = 1e-5
DEFAULT_MIN_PAIR_COUNT = 50
DEFAULT_LEVEL = 0.95

# The covariates the app measures on each pair of answers, in the order of the features
# matrix, with the unit an effect is stated per (what a reader can picture).
STYLE_FEATURES = ("words", "headers", "list_items", "bold", "position")
FEATURE_UNITS = {"words": 100.0, "headers": 1.0, "list_items": 1.0, "bold": 1.0, "position": 1.0}

_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)[^\n]*?\S\*\*|__(?=\S)[^\n]*?\S__")


def style_counts(text: str) -> tuple[int, int, int, int]:
    """(words, markdown headers, list items, bold spans) of one answer: words split on white
    space; an ATX header line (``# ...`` to ``###### ...``); a list item line (``-``, ``*``,
    ``+`` or ``1.`` / ``1)`` then text); a ``**bold**`` or ``__bold__`` span on one line."""
    return (len(text.split()), len(_HEADER.findall(text)), len(_LIST_ITEM.findall(text)), len(_BOLD.findall(text)))


def style_differences(first_text: str, second_text: str, shown_first_left: bool | None) -> tuple[float, ...]:
    """One vote's covariates in STYLE_FEATURES order: each count of ``first_text`` minus that of
    ``second_text``, and the position (+1 first shown on the left, −1 on the right, 0 unknown)."""
    a, b = style_counts(first_text), style_counts(second_text)
    position = 0.0 if shown_first_left is None else (1.0 if shown_first_left else -1.0)
    return (*(float(x - y) for x, y in zip(a, b)), position)


@dataclass(frozen=True)
class StyleLeaderboard:
    """The fit of S systems with F covariates on n votes (arrays in the order of ``systems``
    and ``features`` as given).

    rating            (S,) Arena-scale score 1000 + 400/ln10 · θ, Σθ = 0
    rating_low/high   (S,) its sandwich interval at ``level``
    rating_se         (S,) its standard error (Arena points)
    log_strength      (S,) θ
    coef              (F,) β: effect on the log-odds of the first system winning per standard
                      deviation of the covariate (arena-rank's ``coeffs``)
    coef_low/high     (F,) its interval
    per_unit          (F,) effect per ``units`` of the covariate on the log-odds (β / sd · unit)
    per_unit_low/high (F,) its interval
    feature_mean/sd   (F,) what the raw covariates were centred and scaled by (mean 0 and sd the
                      root mean square without centring; sd 1 for a column without variation)
    units             (F,) the amount of each covariate an effect is stated per
    votes             per system (S,): votes it took part in
    order             (S,) indices of ``systems`` best first
    """

    systems: tuple[str, ...]
    features: tuple[str, ...]
    rating: np.ndarray
    rating_low: np.ndarray
    rating_high: np.ndarray
    rating_se: np.ndarray
    log_strength: np.ndarray
    coef: np.ndarray
    coef_low: np.ndarray
    coef_high: np.ndarray
    per_unit: np.ndarray
    per_unit_low: np.ndarray
    per_unit_high: np.ndarray
    feature_mean: np.ndarray
    feature_sd: np.ndarray
    units: np.ndarray
    votes: np.ndarray
    order: np.ndarray
    n: int
    clusters: int
    level: float
    reg: float
    iterations: int


def pair_weights(first, second, min_pair_count: int = DEFAULT_MIN_PAIR_COUNT) -> np.ndarray:
    """(n,) arena-rank's inverse-propensity weights: 1 / max(votes of the vote's unordered pair,
    min_pair_count), normalised to mean 1."""
    lo, hi = np.minimum(first, second), np.maximum(first, second)
    _, inverse, counts = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True, return_counts=True)
    weights = 1.0 / np.maximum(counts[inverse.ravel()].astype(float), min_pair_count)
    return weights / weights.mean()


def strongly_connected(size: int, first, second, outcome) -> bool:
    """Whether the graph 'a beat b' (a tie: both ways) over the systems that have votes is
    strongly connected: without covariates, the condition for finite Bradley–Terry scores
    (Zermelo 1929); with it violated some system's score runs off to ±∞."""
    first, second, outcome = (np.asarray(v) for v in (first, second, outcome))
    used = np.unique(np.concatenate([first, second]))
    if len(used) <= 1:
        return True
    rows = np.concatenate([first[outcome > 0], second[outcome < 1]])
    cols = np.concatenate([second[outcome > 0], first[outcome < 1]])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(size, size))
    _, labels = connected_components(graph, directed=True, connection="strong")
    return len(np.unique(labels[used])) == 1


def fit_style_leaderboard(systems, first, second, outcome, features, feature_names, *,
                          units=None, reg: float = DEFAULT_REG, rating_reg: float = 0.0,
                          hessian_reg: float = DEFAULT_HESSIAN_REG, reweighted: bool = True,
                          min_pair_count: int = DEFAULT_MIN_PAIR_COUNT, clusters=None, center: bool = True,
                          level: float = DEFAULT_LEVEL, max_iterations: int = 100,
                          tolerance: float = 1e-12) -> StyleLeaderboard:
    """Fit the model of the module docstring by Newton's method.

    systems: S names; first, second: (n,) indices into ``systems``; outcome: (n,) 1 first won,
    0 second won, 0.5 tie; features: (n, F) raw covariates (first − second); feature_names: F;
    units: (F,) amounts to state effects per (default 1 each); clusters: (n,) labels of the
    votes' clusters for the sandwich (default: each vote its own, as arena-rank); center: subtract
    each covariate's mean before scaling by its standard deviation (arena-rank), else scale by its
    root mean square (votes in a canonical order: the module docstring).
    ValueError without votes; FloatingPointError when the scores are not finite (the win graph
    is not strongly connected: some systems won, or lost, every vote against the others) or the
    fit does not converge.
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    y = np.asarray(outcome, dtype=float)
    raw = np.asarray(features, dtype=float).reshape(len(y), -1)
    n, f, s = len(y), raw.shape[1], len(systems)
    if n == 0:
        raise ValueError("no votes")
    if not strongly_connected(len(systems), first, second, y):
        raise FloatingPointError("no finite Bradley–Terry scores: some systems won (or lost) every vote against "
                                 "the others")
    mean = raw.mean(axis=0) if center else np.zeros(f)
    sd = np.sqrt(((raw - mean) ** 2).mean(axis=0))
    sd = np.where(sd == 0, 1.0, sd)
    z = (raw - mean) / sd
    w = pair_weights(first, second, min_pair_count) if reweighted else np.ones(n)

    # u_i = (e_a − e_b, z_i): the design matrix of the logit, dense (n × (S + F)).
    design = np.zeros((n, s + f))
    rows = np.arange(n)
    design[rows, first] += 1.0
    design[rows, second] -= 1.0
    design[:, s:] = z
    penalty = np.concatenate([np.full(s, rating_reg), np.full(f, reg)])
    # The loss is flat along (1_S, 0): adding its outer product to the Newton matrix makes it
    # invertible without moving the step (the gradient is orthogonal to it), so Σθ stays 0.
    flat = np.concatenate([np.ones(s), np.zeros(f)])
    params = np.zeros(s + f)
    iterations = 0
    for iterations in range(1, max_iterations + 1):
        logit = design @ params
        p = 1.0 / (1.0 + np.exp(-logit))
        grad = -(design.T @ (w * (y - p))) / n + penalty * params
        hess = (design.T * (w * p * (1 - p))) @ design / n + np.diag(penalty) + np.outer(flat, flat) / s
        step = np.linalg.solve(hess, grad)
        params = params - step
        if np.max(np.abs(step)) < 1e-10 or np.max(np.abs(grad)) < tolerance:
            break
    else:
        raise FloatingPointError("the Bradley–Terry fit did not converge (a system won or lost all its votes?)")
    if np.max(np.abs(params[:s])) > 50:
        raise FloatingPointError("the Bradley–Terry scores run off: a system won or lost all its votes")

    theta, beta = params[:s], params[s:]
    logit = design @ params
    p = 1.0 / (1.0 + np.exp(-logit))
    hessian = (design.T * (w * p * (1 - p))) @ design / n + hessian_reg * np.eye(s + f)
    contributions = design * (w * (y - p))[:, None]
    if clusters is None:
        summed, n_clusters = contributions, n
    else:
        _, cluster_index = np.unique(np.asarray(clusters), return_inverse=True)
        n_clusters = int(cluster_index.max()) + 1
        summed = np.zeros((n_clusters, s + f))
        np.add.at(summed, cluster_index.ravel(), contributions)
    regularised = np.concatenate([np.zeros(s), beta])
    meat = summed.T @ summed / n - (reg ** 2 / n) * np.outer(regularised, regularised)
    inverse = np.linalg.inv(hessian)
    variance = np.diag(inverse @ meat @ inverse) / n
    se = np.sqrt(np.maximum(variance, 0.0))
    zq = float(norm.ppf(0.5 + level / 2))
    units = np.ones(f) if units is None else np.asarray(units, dtype=float)
    scale = units / sd
    involved = np.bincount(np.concatenate([first, second]), minlength=s)
    rating = ARENA_OFFSET + ARENA_SCALE * theta
    order = np.array(sorted(range(s), key=lambda k: (involved[k] == 0, -rating[k], k)), dtype=np.int64)
    return StyleLeaderboard(
        systems=tuple(systems), features=tuple(feature_names),
        rating=rating, rating_low=rating - zq * ARENA_SCALE * se[:s], rating_high=rating + zq * ARENA_SCALE * se[:s],
        rating_se=ARENA_SCALE * se[:s], log_strength=theta,
        coef=beta, coef_low=beta - zq * se[s:], coef_high=beta + zq * se[s:],
        per_unit=beta * scale, per_unit_low=(beta - zq * se[s:]) * scale, per_unit_high=(beta + zq * se[s:]) * scale,
        feature_mean=mean, feature_sd=sd, units=units, votes=involved, order=order,
        n=n, clusters=n_clusters, level=level, reg=reg, iterations=iterations,
    )


def win_chance(log_odds: float) -> float:
    """The chance that the answer with the covariate wins between two equally strong systems,
    when it changes the log-odds by ``log_odds`` (0.5 for no effect)."""
    return 1.0 / (1.0 + math.exp(-log_odds))
