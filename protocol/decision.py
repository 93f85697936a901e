"""The Bayesian decision function of one system pair (SPEC §4; Correction of Errors §3, Alg. 1).

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
  The posterior is then exactly
      Dir(q; N.sum(1) + 3 + m) * prod_c Dir(nu[c]; N[c] + 1) * prod_c' p[c']^(h[c'] - 2),
  p = nu^T q, because a uniform prior on p and on the columns of mu equals a Dir(1) prior on r
  times prod p^-2 (Dirichlet aggregation). The metric-only counts, which make the textbook
  data-augmentation Gibbs sampler mix slowly, are absorbed exactly into q. The remaining
  factor prod p^(h - 2) is handled by an independence Metropolis-Hastings sampler whose
  proposal carries the tail of that factor, so the importance weight is bounded above:
      log w = sum_c' |e_c'| sum_c t[c, c'] log mu[c, c'] <= sum_c' |e_c'| sum_c t log t,
  e = h - 2 in [-2, 0], t = (N + 1) / (N.sum(0) + 3). A bounded weight makes the sampler
  uniformly ergodic, with a high acceptance rate. Human-only counts above 2 per class are
  first turned into paired items by data augmentation (their latent metric labels are drawn
  from mu each step), which keeps e in [-2, 0].
  The estimator of theta recycles rejected proposals (E over the accept coin), theta's
  standard error is the spread of independent chain means, and sampling continues (up to a
  cap) while the standard error is above target or theta is within ``resolve_z`` standard
  errors of a threshold.

Every pair draws from its own random stream, seeded by (seed, its counts), so a pair's result
does not depend on which other pairs share the call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.special import betainc

CLASSES = (1, 0, -1)  # index 0 = "+", 1 = "=", 2 = "-"
_REVERSE = np.array([2, 1, 0])

FAST_DEFAULTS = dict(
    chains=64,             # independent IMH chains per pair; their spread gives theta_se
    first_steps=128,       # steps per chain in the first round (doubling afterwards)
    burn_in=16,            # steps discarded per chain
    target_se=0.0025,      # keep sampling until theta_se is below this ...
    resolve_z=3.0,         # ... and theta is this many standard errors from a threshold
    max_draws=1 << 19,     # per pair; pairs still unresolved then are reported unresolved
)
NUTS_DEFAULTS = dict(num_chains=5, num_warmup=2000, num_samples=10000,
                     chain_method="sequential", resolve_z=3.0)


# --------------------------------------------------------------------------------------------
# counts
# --------------------------------------------------------------------------------------------
def _as_count_array(value, shape: tuple[int, ...], name: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be an integer count array, got dtype {array.dtype}")
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} must be finite, got {array.tolist()}")
        if not np.all(array == np.round(array)):
            raise ValueError(f"{name} must hold integer counts, got {array.tolist()}")
    if np.any(array < 0):
        raise ValueError(f"{name} must be non-negative, got {array.tolist()}")
    result = array.astype(np.int64)
    result.setflags(write=False)
    return result


@dataclass(frozen=True, eq=False)
class PairCounts:
    """Counts of one system pair (class order +, =, -).

    paired:     (3, 3) int, N[c, c']: metric label c (rows), human label c' (columns)
    human_only: (3,) int, human labels of items without a metric label
    metric_only:(3,) int, m: metric labels of items without a human label
    """

    paired: np.ndarray
    human_only: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int64))
    metric_only: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int64))

    def __post_init__(self):
        object.__setattr__(self, "paired", _as_count_array(self.paired, (3, 3), "paired"))
        object.__setattr__(self, "human_only",
                           _as_count_array(self.human_only, (3,), "human_only"))
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

    def key(self) -> tuple[int, ...]:
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


def counts_from_labels(human_items, human_values, metric_items, metric_values) -> PairCounts:
    """Split labelled items into the counts of SPEC §4.

    human_items, human_values: (k,) item ids and labels in {-1, 0, 1}; an item may carry
        several human labels, each counts (and each is paired with the item's metric label).
    metric_items, metric_values: (j,) item ids and labels; at most one metric label per item.
    Metric labels of items that also have a human label go to ``paired`` only, never to m.
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
    paired = np.zeros((3, 3), np.int64)
    human_only = np.zeros(3, np.int64)
    for item, label in zip(human_items.tolist(), human_index.tolist()):
        if item in metric_of:
            paired[metric_of[item], label] += 1
        else:
            human_only[label] += 1
    judged = set(human_items.tolist())
    metric_only = np.zeros(3, np.int64)
    for item, label in metric_of.items():
        if item not in judged:
            metric_only[label] += 1
    return PairCounts(paired, human_only, metric_only)


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------
def decision_from_theta(theta: float, gamma: float = 0.05) -> int:
    """+1 if theta > 1 - gamma/2, -1 if theta < gamma/2, else 0."""
    _check_gamma(gamma)
    if theta > 1 - gamma / 2:
        return 1
    if theta < gamma / 2:
        return -1
    return 0


def _check_gamma(gamma):
    if not (isinstance(gamma, (int, float, np.floating)) and 0 < gamma < 1):
        raise ValueError(f"gamma must be a number in (0, 1), got {gamma!r}")


@dataclass(frozen=True)
class PairDecision:
    decision: int
    theta: float
    theta_se: float
    p_mean: tuple[float, float, float]
    resolved: bool
    draws: int


@dataclass(frozen=True, eq=False)
class DecisionBatch:
    """Decisions of P pairs.

    decision (P,) int8 in {-1, 0, 1}; theta (P,) = P(p+ > p- | data); theta_se (P,) its
    Monte-Carlo standard error; p_mean (P, 3) posterior mean of p; resolved (P,) bool, False
    when theta stayed within resolve_z standard errors of a threshold at the draw cap;
    draws (P,) int, posterior draws spent (0 for the closed form).
    """

    decision: np.ndarray
    theta: np.ndarray
    theta_se: np.ndarray
    p_mean: np.ndarray
    resolved: np.ndarray
    draws: np.ndarray

    def __len__(self):
        return len(self.theta)

    def pair(self, i: int) -> PairDecision:
        return PairDecision(int(self.decision[i]), float(self.theta[i]),
                            float(self.theta_se[i]),
                            tuple(float(x) for x in self.p_mean[i]),
                            bool(self.resolved[i]), int(self.draws[i]))


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


class _PairSampler:
    """IMH chains for one pair; see the module docstring for the construction."""

    def __init__(self, counts: PairCounts, seed: int, chains: int):
        self.counts = counts
        self.rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *counts.key()])))
        self.chains = chains
        h = counts.human_only
        self.augmented = np.maximum(h - 2, 0)  # human-only items given latent metric labels
        self.e = (h - self.augmented - 2).astype(float)  # in [-2, 0]
        self.abs_e = -self.e
        self.latent = np.zeros((chains, 3, 3))  # (C, c, c') latent paired counts
        if self.augmented.any():
            self.latent = self._draw_latent_from(
                np.broadcast_to(self._paired_beta(np.zeros((1, 3, 3)))
                                / self._paired_beta(np.zeros((1, 3, 3))).sum(1, keepdims=True),
                                (chains, 3, 3)))
        self.state = None
        self.sum_f = np.zeros(chains)
        self.sum_p = np.zeros((chains, 3))
        self.steps = 0

    def _paired_beta(self, latent):
        return self.counts.paired[None].astype(float) + latent + 1.0

    def _parameters(self, latent):
        """Proposal Dirichlet parameters and tilt weights t for latent counts (C, 3, 3)."""
        beta = self._paired_beta(latent)                        # (C, c, c')
        t = beta / beta.sum(1, keepdims=True)                   # (C, c, c'), columns sum to 1
        nu_alpha = beta - self.abs_e[None, None, :] * t          # (C, c, c')
        q_alpha = beta.sum(2) + self.counts.metric_only[None] \
            - (self.abs_e[None, None, :] * t).sum(2)             # (C, c)
        return q_alpha, nu_alpha, t

    def _propose(self, q_alpha, nu_alpha, steps):
        """Draw (C, S) proposals; returns log q (C,S,3), log nu (C,S,3,3)."""
        gq = self.rng.standard_gamma(np.broadcast_to(q_alpha[:, None, :],
                                                     (self.chains, steps, 3)))
        gnu = self.rng.standard_gamma(np.broadcast_to(nu_alpha[:, None, :, :],
                                                      (self.chains, steps, 3, 3)))
        log_q = np.log(gq) - np.log(gq.sum(-1, keepdims=True))
        log_nu = np.log(gnu) - np.log(gnu.sum(-1, keepdims=True))
        return log_q, log_nu

    def _summaries(self, log_q, log_nu, t):
        """(log w, f = 1[p+ > p-], p, log mu) of states; t broadcastable to (..., 3, 3)."""
        log_r = log_q[..., :, None] + log_nu                     # (..., c, c')
        p = np.exp(log_r).sum(-2)                                # (..., c')
        log_mu = log_r - np.log(p)[..., None, :]
        log_w = ((t * log_mu).sum(-2) * self.abs_e).sum(-1)
        return log_w, (p[..., 0] > p[..., 2]).astype(float), p, log_mu

    def _draw_latent_from(self, mu):
        """Latent metric labels of augmented human-only items: (C, c, c') from mu (C, c, c')."""
        latent = np.zeros((self.chains, 3, 3))
        for c_prime in range(3):
            k = int(self.augmented[c_prime])
            if k:
                probs = mu[:, :, c_prime]
                latent[:, :, c_prime] = self.rng.multinomial(k, probs / probs.sum(1, keepdims=True))
        return latent

    def proposals(self, steps: int):
        """Proposals of the latent-free chains (class axes first, contiguous per step).

        Returns log w (S, C), f = 1[p+ > p-] (S, C) and p (3, S, C).
        """
        q_alpha, nu_alpha, t = (x[0] for x in self._parameters(self.latent[:1]))
        shape = (steps, self.chains)
        gq = self.rng.standard_gamma(np.broadcast_to(q_alpha[:, None, None], (3, *shape)))
        gnu = self.rng.standard_gamma(np.broadcast_to(nu_alpha[:, :, None, None], (3, 3, *shape)))
        q_total = gq[0] + gq[1] + gq[2]
        nu_total = gnu[:, 0] + gnu[:, 1] + gnu[:, 2]                         # (c, S, C)
        r = (gq / q_total)[:, None] * (gnu / nu_total[:, None])             # (c, c', S, C)
        p = r[0] + r[1] + r[2]                                               # (c', S, C)
        # log w = sum_c' |e_c'| [sum_c t_cc' log(q_c nu_cc') - log p_c'], as matrix products
        tilt = t * self.abs_e[None, :]                                       # (c, c')
        kappa = tilt.sum(1)
        log_w = (np.tensordot(kappa, np.log(gq) - np.log(q_total) - np.log(nu_total), 1)
                 + np.tensordot(tilt.ravel(), np.log(gnu).reshape(9, *shape), 1)
                 - np.tensordot(self.abs_e, np.log(p), 1))
        return log_w, (p[0] > p[2]).astype(float), p

    def add(self, sum_f, sum_p, steps):
        self.sum_f += sum_f
        self.sum_p += sum_p
        self.steps += steps

    def _run_augmented(self, steps, burn_in):
        for step in range(steps + burn_in):
            q_alpha, nu_alpha, t = self._parameters(self.latent)
            log_q, log_nu = self._propose(q_alpha, nu_alpha, 1)
            proposal = self._summaries(log_q[:, 0], log_nu[:, 0], t)
            if self.state is None:
                self.state = proposal
                continue
            # the target and proposal changed with the latent counts: re-weigh the current state
            current_log_mu = self.state[3]
            current_w = ((t * current_log_mu).sum(-2) * self.abs_e).sum(-1)
            log_ratio = proposal[0] - current_w
            accept_prob = np.exp(np.minimum(log_ratio, 0.0))
            if step >= burn_in:
                self.sum_f += accept_prob * proposal[1] + (1 - accept_prob) * self.state[1]
                self.sum_p += (accept_prob[:, None] * proposal[2]
                               + (1 - accept_prob[:, None]) * self.state[2])
            accept = np.log(self.rng.random(self.chains)) < log_ratio
            self.state = tuple(np.where(accept.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)
                               for new, old in zip(proposal, self.state))
            self.latent = self._draw_latent_from(np.exp(self.state[3]))
        self.steps += steps

    def estimate(self):
        chain_theta = self.sum_f / self.steps
        theta = chain_theta.mean()
        se = chain_theta.std(ddof=1) / np.sqrt(self.chains)
        return theta, se, self.sum_p.sum(0) / (self.steps * self.chains)


def _independent_round(samplers: list[_PairSampler], steps: int, burn_in: int) -> None:
    """Advance the latent-free chains of several pairs by burn_in + steps IMH steps.

    The proposals do not depend on the chain state, so each pair draws all of them at once;
    only the accept/reject pass is sequential, vectorised over every pair's chains. Row 0 of
    the stacked arrays is each chain's current state, rows 1.. its proposals.
    """
    total = steps + burn_in
    parts = []
    for sampler in samplers:
        fresh = sampler.state is None
        log_w, f, p = sampler.proposals(total + fresh)
        if not fresh:
            state_w, state_f, state_p = sampler.state
            log_w = np.concatenate([state_w[None], log_w])
            f = np.concatenate([state_f[None], f])
            p = np.concatenate([state_p[:, None], p], axis=1)
        parts.append((log_w, f, p, np.log(sampler.rng.random((total, sampler.chains)))))
    log_w = np.concatenate([x[0] for x in parts], axis=1)       # (1 + T, sum C)
    f = np.concatenate([x[1] for x in parts], axis=1)           # (1 + T, sum C)
    p = np.concatenate([x[2] for x in parts], axis=2)           # (3, 1 + T, sum C)
    log_u = np.concatenate([x[3] for x in parts], axis=1)       # (T, sum C)
    current_index = np.zeros(log_w.shape[1], np.int64)
    current_w = log_w[0].copy()
    before = np.empty((total, log_w.shape[1]), np.int64)        # state index before each step
    log_ratio = np.empty((total, log_w.shape[1]))
    for step in range(total):
        before[step] = current_index
        np.subtract(log_w[step + 1], current_w, out=log_ratio[step])
        accept = log_u[step] < log_ratio[step]
        current_w = np.where(accept, log_w[step + 1], current_w)
        current_index = np.where(accept, step + 1, current_index)
    # Rao-Blackwellised over the accept coin: E[g(next state) | state, proposal]
    accept_prob = np.exp(np.minimum(log_ratio[burn_in:], 0.0))
    kept_before = before[burn_in:]
    f_before = np.take_along_axis(f, kept_before, axis=0)
    sum_f = (f_before + accept_prob * (f[burn_in + 1:] - f_before)).sum(0)
    p_before = np.take_along_axis(p, np.broadcast_to(kept_before, (3, *kept_before.shape)), 1)
    sum_p = (p_before + accept_prob * (p[:, burn_in + 1:] - p_before)).sum(1).T   # (sum C, 3)
    rows = np.arange(log_w.shape[1])
    start = 0
    for sampler in samplers:
        chains = slice(start, start + sampler.chains)
        start += sampler.chains
        index = current_index[chains]
        sampler.state = (log_w[index, rows[chains]], f[index, rows[chains]],
                         p[:, index, rows[chains]])
        sampler.add(sum_f[chains], sum_p[chains], steps)


def _decide_fast(counts: Sequence[PairCounts], gamma, seed, chains, first_steps, burn_in,
                 target_se, resolve_z, max_draws):
    size = len(counts)
    theta = np.zeros(size)
    se = np.zeros(size)
    p_mean = np.zeros((size, 3))
    draws = np.zeros(size, np.int64)
    samplers = {}
    for i, pair in enumerate(counts):
        if pair.metric_only.sum() == 0:
            n = pair.n
            theta[i] = closed_form_theta(n)
            p_mean[i] = (n + 1) / (n.sum() + 3)
        else:
            samplers[i] = _PairSampler(pair, seed, chains)
    steps = first_steps
    active = sorted(samplers)
    first = True
    while active:
        independent = [samplers[i] for i in active if not samplers[i].augmented.any()]
        if independent:
            _independent_round(independent, steps, burn_in if first else 0)
        for i in active:
            if samplers[i].augmented.any():
                samplers[i]._run_augmented(steps, burn_in if first else 0)
            theta[i], se[i], p_mean[i] = samplers[i].estimate()
            draws[i] = samplers[i].steps * chains
        first = False
        _, resolved = _decisions(theta, se, gamma, resolve_z)
        active = [i for i in active
                  if (se[i] > target_se or not resolved[i]) and 2 * draws[i] <= max_draws]
        # every active pair has run the same rounds; the next round doubles its draws
        steps = samplers[active[0]].steps if active else 0
    decision, resolved = _decisions(theta, se, gamma, resolve_z)
    return DecisionBatch(decision, theta, se, p_mean, resolved, draws)


# --------------------------------------------------------------------------------------------
# NUTS reference (the paper's sampler)
# --------------------------------------------------------------------------------------------
def _paper_model(paired, human, metric):
    import jax.numpy as jnp
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
        import numpyro
        from numpyro.infer import MCMC, NUTS

        numpyro.set_host_device_count(max(1, num_chains)) if chain_method == "parallel" else None
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
    for i, pair in enumerate(counts):
        key = jax.random.PRNGKey(int(seed) & 0x7FFFFFFF)
        key = jax.random.fold_in(key, hash(pair.key()) & 0x7FFFFFFF)
        runner.run(key, jnp.asarray(pair.paired, jnp.float32),
                   jnp.asarray(pair.n, jnp.float32), jnp.asarray(pair.metric_only, jnp.float32))
        p = np.asarray(runner.get_samples(group_by_chain=True)["p"], dtype=float)  # (C, S, 3)
        wins = (p[..., 0] > p[..., 2]).astype(float)
        theta[i] = wins.mean()
        p_mean[i] = p.reshape(-1, 3).mean(0)
        if 0 < theta[i] < 1:
            ess = float(effective_sample_size(wins[..., None])[0]) if num_chains > 1 else \
                float(effective_sample_size(wins[None, :, None])[0])
            se[i] = np.sqrt(theta[i] * (1 - theta[i]) / max(ess, 1.0))
    decision, resolved = _decisions(theta, se, gamma, resolve_z)
    draws = np.full(size, num_chains * num_samples, np.int64)
    return DecisionBatch(decision, theta, se, p_mean, resolved, draws)


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
        if name in ("chains", "first_steps", "max_draws", "num_chains", "num_samples") and \
                (not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if name in ("burn_in", "num_warmup") and (not isinstance(value, (int, np.integer))
                                                   or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if name in ("target_se", "resolve_z") and not (isinstance(value, (int, float))
                                                        and value >= 0):
            raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    if method == "fast" and merged["chains"] < 2:
        raise ValueError("chains must be at least 2 (theta_se comes from their spread)")
    return merged


def decide_many(counts: Sequence[PairCounts], *, gamma: float = 0.05, method: str = "fast",
                seed: int = 0, **options) -> DecisionBatch:
    """Decide P system pairs in one call.

    counts: P PairCounts. method "fast" (exact closed form / IMH sampler, options
    FAST_DEFAULTS) or "nuts" (the paper's numpyro NUTS, options NUTS_DEFAULTS).
    Returns a DecisionBatch of length P.
    """
    _check_gamma(gamma)
    counts = list(counts)
    for i, pair in enumerate(counts):
        if not isinstance(pair, PairCounts):
            raise ValueError(f"counts[{i}] must be a PairCounts, got {type(pair).__name__}")
    if method == "fast":
        return _decide_fast(counts, gamma, seed, **_options(FAST_DEFAULTS, options, method))
    if method == "nuts":
        return _decide_nuts(counts, gamma, seed, **_options(NUTS_DEFAULTS, options, method))
    raise ValueError(f"method must be 'fast' or 'nuts', got {method!r}")


def decide(counts: PairCounts, **options) -> PairDecision:
    """decide_many for one pair."""
    return decide_many([counts], **options).pair(0)


def warm_up() -> None:
    """Import and exercise the fast path once (call at worker start; no JIT is involved)."""
    decide_many([PairCounts(np.eye(3, dtype=int) * 5, metric_only=[5, 1, 3])],
                first_steps=8, burn_in=2, target_se=1.0, max_draws=64)
