"""Tests of protocol.decision against docs/formulas.md §4 oracles, an independent Gibbs sampler and NUTS."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from protocol.decision import (
    DecisionBatch, PairCounts, PairDecision, closed_form_theta, counts_from_labels, decide,
    decide_many, decision_from_theta, posterior_draws,
)

# docs/formulas.md §4 count-set oracles: N (metric rows, human columns), m, theta, E[p] (S1 only)
S1 = PairCounts([[15, 4, 5], [1, 2, 1], [6, 4, 12]], metric_only=[520, 30, 400])
S2 = PairCounts([[10, 1, 0], [1, 5, 1], [1, 0, 6]], metric_only=[300, 120, 180])
S3 = PairCounts([[20, 8, 10], [3, 6, 3], [9, 8, 18]], metric_only=[400, 160, 390])
SPEC_SETS = [(S1, 0.826), (S2, 0.969), (S3, 0.528)]
ORACLE_ROUNDING = 0.0005    # docs/formulas.md §4 gives these thetas to three decimals
Z = 4.0                     # Monte-Carlo tolerance in standard errors

count = st.integers(0, 40)
pair_counts = st.builds(
    PairCounts,
    st.lists(count, min_size=9, max_size=9).map(lambda x: np.reshape(x, (3, 3))),
    st.lists(st.integers(0, 6), min_size=3, max_size=3),
    st.lists(st.integers(0, 300), min_size=3, max_size=3))


# ---------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("n, theta", [((22, 10, 18), 0.733645), ((12, 6, 7), 0.868412),
                                      ((30, 5, 10), 0.999275), ((10, 0, 25), 0.005665)])
def test_closed_form_matches_spec_oracles(n, theta):
    assert closed_form_theta(np.array(n)) == pytest.approx(theta, abs=1e-6)
    result = decide(PairCounts(np.zeros((3, 3)), human_only=n))
    assert result.theta == pytest.approx(theta, abs=1e-6)
    assert result.theta_se == 0 and result.draws == 0 and result.resolved
    np.testing.assert_allclose(result.p_mean, (np.array(n) + 1) / (sum(n) + 3))
    assert result.decision == decision_from_theta(theta)


def test_without_metric_only_items_paired_human_labels_count_and_metric_labels_do_not():
    paired = PairCounts([[10, 2, 1], [3, 2, 2], [1, 2, 6]])   # human columns: (14, 6, 9)
    assert decide(paired).theta == pytest.approx(closed_form_theta(np.array([14, 6, 9])))


def test_closed_form_is_a_plain_monte_carlo_probability():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.array([12, 6, 7]) + 1.0, size=400_000)
    estimate = (p[:, 0] > p[:, 2]).mean()
    assert closed_form_theta(np.array([12, 6, 7])) == pytest.approx(estimate, abs=0.003)


# ---------------------------------------------------------------------------- reference count sets (docs/formulas.md §4)
@pytest.mark.parametrize("counts, theta", SPEC_SETS)
def test_fast_matches_spec_count_set_oracles(counts, theta):
    result = decide(counts, seed=3)
    assert result.draws > 0 and result.theta_se > 0
    assert abs(result.theta - theta) <= Z * result.theta_se + ORACLE_ROUNDING


def test_fast_posterior_mean_of_p_matches_spec_s1():
    result = decide(S1, seed=4)
    np.testing.assert_allclose(result.p_mean, [0.4625, 0.1852, 0.3523], atol=0.002)


@pytest.mark.parametrize("counts", [
    S3,
    # sparse human ties: the most variable importance weights in the benchmark
    PairCounts([[5, 0, 0], [2, 0, 1], [1, 0, 3]], metric_only=[86, 42, 55]),
])
def test_theta_se_is_honest_across_seeds(counts):
    # the spread of independent estimates must agree with the reported standard errors
    runs = [decide(counts, seed=s, target_se=0.01, resolve_z=0.0) for s in range(150)]
    thetas = np.array([run.theta for run in runs])
    se = np.sqrt(np.mean([run.theta_se ** 2 for run in runs]))
    assert 0.75 < thetas.std(ddof=1) / se < 1.3   # 150 runs: the ratio is good to ~6%


@pytest.mark.parametrize("counts", [
    # many empty cells: no paired item at all, two, or two with human-only labels
    PairCounts([[0, 0, 0], [0, 0, 0], [0, 0, 0]], [0, 0, 0], [20, 4, 15]),
    PairCounts([[1, 0, 0], [0, 0, 0], [0, 0, 1]], [0, 0, 0], [45, 6, 35]),
    PairCounts([[2, 0, 0], [0, 0, 0], [0, 0, 2]], [8, 1, 6], [45, 6, 35]),
    PairCounts([[4, 0, 0], [0, 0, 0], [0, 0, 0]], [1, 0, 0], [10, 3, 30]),
])
def test_theta_se_on_sets_with_many_empty_cells_matches_the_error_against_the_exact_sum(counts):
    # the importance sampler's reported standard error against its actual error (the exact
    # sum over the metric-only splits is the truth), at a fixed number of draws
    from protocol.decision import exact_posterior

    truth = exact_posterior(counts)[0]
    errors, ses = [], []
    for seed in range(100):
        runs = decide_many([counts], seed=seed, first_draws=4096, max_draws=4096, target_se=1.0,
                           resolve_z=0.0, fallback=False)
        errors.append(runs.theta[0] - truth)
        ses.append(runs.theta_se[0])
    ratio = np.sqrt(np.mean(np.square(errors))) / np.sqrt(np.mean(np.square(ses)))
    assert 0.75 < ratio < 1.35   # 100 runs: the ratio is good to ~7 %


def test_s2_near_the_edge_keeps_sampling_until_resolved_or_reports_it():
    resolved = decide(S2, seed=1)          # theta ~ 0.969, 0.006 below the 0.975 edge
    assert resolved.resolved and resolved.draws > 2048
    assert abs(resolved.theta - 0.975) > 3 * resolved.theta_se
    capped = decide(S2, seed=1, first_draws=512, max_draws=1024, fallback=False)
    assert capped.draws == 1024 and not capped.resolved and capped.decision == 0
    # with the fallback, the cap before the wanted precision hands the pair to MCMC (600
    # metric-only items make the exact sum too costly)
    fallen_back = decide(S2, seed=1, first_draws=512, max_draws=1024)
    assert fallen_back.method == "gibbs" and fallen_back.resolved and fallen_back.decision == 0


# ---------------------------------------------------------------------------- independent oracle
def gibbs_theta(counts: PairCounts, chains=256, steps=1200, burn_in=200, seed=0):
    """docs/formulas.md §4 data-augmentation Gibbs sampler, Rao-Blackwellised theta; chain-spread SE."""
    rng = np.random.default_rng(seed)
    paired = counts.paired.astype(float)
    n = counts.n.astype(float)
    m = counts.metric_only
    p = rng.dirichlet(n + 1, size=chains)
    mu = np.stack([rng.dirichlet(paired[:, c] + 1, size=chains) for c in range(3)], axis=2)
    totals = np.zeros(chains)
    for step in range(steps):
        latent = np.zeros((chains, 3, 3))
        for c in range(3):
            weights = mu[:, c, :] * p
            latent[:, c, :] = rng.multinomial(m[c], weights / weights.sum(1, keepdims=True))
        a = n + 1 + latent.sum(1)
        if step >= burn_in:
            totals += closed_form_theta(a - 1)
        p = np.array([rng.dirichlet(row) for row in a])
        for c in range(3):
            alpha = paired[:, c][None] + 1 + latent[:, :, c]
            gammas = rng.standard_gamma(alpha)
            mu[:, :, c] = gammas / gammas.sum(1, keepdims=True)
    chain_theta = totals / (steps - burn_in)
    return chain_theta.mean(), chain_theta.std(ddof=1) / np.sqrt(chains)


@pytest.mark.slow
@pytest.mark.parametrize("counts", [
    PairCounts([[6, 1, 2], [1, 3, 1], [2, 0, 5]], human_only=[4, 1, 3], metric_only=[30, 8, 25]),
    PairCounts([[3, 0, 1], [0, 0, 0], [1, 0, 2]], human_only=[0, 2, 9], metric_only=[20, 5, 12]),
    PairCounts([[9, 2, 0], [2, 4, 3], [0, 1, 8]], metric_only=[40, 10, 20]),
])
def test_fast_matches_an_independent_gibbs_sampler_with_human_only_items(counts):
    reference, reference_se = gibbs_theta(counts)
    result = decide(counts, seed=2, target_se=0.002)
    assert abs(result.theta - reference) <= Z * np.hypot(result.theta_se, reference_se)


@pytest.mark.slow
def test_fast_matches_the_nuts_reference_on_the_same_counts():
    pairs = [S1, PairCounts([[4, 1, 0], [1, 1, 0], [0, 1, 3]], metric_only=[60, 20, 50])]
    nuts = decide_many(pairs, method="nuts", num_chains=2, num_warmup=300, num_samples=3000)
    fast = decide_many(pairs, seed=5)
    assert np.all(nuts.theta_se > 0)
    assert np.all(np.abs(fast.theta - nuts.theta) <= Z * np.hypot(fast.theta_se, nuts.theta_se))
    np.testing.assert_allclose(fast.p_mean, nuts.p_mean, atol=0.01)


# ---------------------------------------------------------------------------- symmetry, batching
@settings(max_examples=25, deadline=None)
@given(pair_counts)
def test_swapping_the_systems_mirrors_every_result(counts):
    options = dict(seed=7, first_draws=256, max_draws=1024)
    forward, backward = decide(counts, **options), decide(counts.swapped(), **options)
    assert backward.theta == pytest.approx(1 - forward.theta, abs=1e-12)
    assert backward.decision == -forward.decision
    assert backward.theta_se == forward.theta_se and backward.resolved == forward.resolved
    np.testing.assert_allclose(backward.p_mean, forward.p_mean[::-1], atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(pair_counts)
def test_swapped_sampler_runs_agree_within_error_without_the_mirror(counts):
    # the two orientations are sampled from different streams when the seed differs
    first = decide(counts, seed=1, first_draws=512, max_draws=2048)
    second = decide(counts.swapped(), seed=2, first_draws=512, max_draws=2048)
    assert abs(second.theta - (1 - first.theta)) <= 5 * np.hypot(first.theta_se,
                                                                 second.theta_se) + 1e-9


def test_batched_results_equal_single_pair_results():
    pairs = [S1, PairCounts.empty(), S2.swapped(), PairCounts(np.eye(3, dtype=int) * 4),
             S3, PairCounts([[2, 0, 0], [0, 0, 0], [0, 0, 1]], [3, 0, 0], [5, 0, 9])]
    batch = decide_many(pairs, seed=11)
    assert isinstance(batch, DecisionBatch) and len(batch) == len(pairs)
    assert batch.decision.dtype == np.int8 and batch.p_mean.shape == (len(pairs), 3)
    for i, pair in enumerate(pairs):
        assert batch.pair(i) == decide(pair, seed=11)
    single_thread = decide_many(pairs, seed=11, threads=1)
    np.testing.assert_array_equal(single_thread.theta, batch.theta)


def test_no_pairs_give_an_empty_batch():
    batch = decide_many([])
    assert len(batch) == 0 and batch.p_mean.shape == (0, 3)


def test_empty_pair_is_undecided_at_one_half():
    result = decide(PairCounts.empty())
    assert isinstance(result, PairDecision)
    assert result == PairDecision(0, 0.5, 0.0, (1 / 3, 1 / 3, 1 / 3), True, 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=3, max_size=3))  # below float saturation
def test_closed_form_grows_with_first_system_wins(n):
    n = np.array(n)
    assert closed_form_theta(n + [1, 0, 0]) > closed_form_theta(n)
    assert closed_form_theta(n + [0, 0, 1]) < closed_form_theta(n)
    assert closed_form_theta(n) + closed_form_theta(n[::-1]) == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------- decisions
@pytest.mark.parametrize("theta, gamma, expected", [
    (0.976, 0.05, 1), (0.975, 0.05, 0), (0.5, 0.05, 0), (0.025, 0.05, 0), (0.024, 0.05, -1),
    (0.96, 0.1, 1), (0.04, 0.1, -1)])
def test_decision_from_theta(theta, gamma, expected):
    assert decision_from_theta(theta, gamma) == expected


def test_gamma_changes_the_decision():
    counts = PairCounts(np.zeros((3, 3)), human_only=[12, 6, 7])   # theta 0.868
    assert decide(counts, gamma=0.05).decision == 0
    assert decide(counts, gamma=0.3).decision == 1


# ---------------------------------------------------------------------------- counts
def test_counts_from_labels_splits_items_as_spec_section_4():
    counts = counts_from_labels(
        human_items=["a", "a", "b", "c", "d"], human_values=[1, 0, -1, 1, 0],
        metric_items=["a", "b", "e", "f", "g"], metric_values=[-1, -1, 1, 1, 0])
    expected_paired = np.zeros((3, 3), int)
    expected_paired[2, 0] = 1      # item a: metric -, human + and = -> sign of the mean +
    expected_paired[2, 2] = 1      # item b: metric -, human -
    np.testing.assert_array_equal(counts.paired, expected_paired)
    np.testing.assert_array_equal(counts.human_only, [1, 1, 0])     # c (+), d (=)
    np.testing.assert_array_equal(counts.metric_only, [2, 1, 0])    # e, f (+), g (=)
    np.testing.assert_array_equal(counts.n, [2, 1, 1])


def test_counts_from_labels_of_the_swapped_pair_is_the_swapped_counts():
    rng = np.random.default_rng(0)
    human_items, metric_items = rng.integers(0, 40, 60), rng.permutation(50)[:35]
    human_values, metric_values = rng.integers(-1, 2, 60), rng.integers(-1, 2, 35)
    forward = counts_from_labels(human_items, human_values, metric_items, metric_values)
    backward = counts_from_labels(human_items, -human_values, metric_items, -metric_values)
    assert backward == forward.swapped()
    assert forward.paired.sum() + forward.human_only.sum() == len(set(human_items))
    assert forward.metric_only.sum() == 35 - len(set(metric_items) & set(human_items))


@pytest.mark.parametrize("args, message", [
    ((["a"], [1], ["a", "a"], [1, 0]), "more than one metric label"),
    ((["a"], [2], [], []), "human_values"),
    ((["a"], [1], ["b"], [0.5]), "metric_values"),
    ((["a", "b"], [1], [], []), "same length"),
])
def test_counts_from_labels_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        counts_from_labels(*args)


def test_pair_counts_properties():
    counts = PairCounts([[1, 2, 3], [4, 5, 6], [7, 8, 9]], [1, 0, 2], [3, 4, 5])
    np.testing.assert_array_equal(counts.n, [13, 15, 20])
    swapped = counts.swapped()
    np.testing.assert_array_equal(swapped.paired, [[9, 8, 7], [6, 5, 4], [3, 2, 1]])
    np.testing.assert_array_equal(swapped.human_only, [2, 0, 1])
    np.testing.assert_array_equal(swapped.metric_only, [5, 4, 3])
    assert swapped.swapped() == counts and swapped != counts
    assert PairCounts.empty().n.tolist() == [0, 0, 0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(paired=[[1, 0, 0], [0, -1, 0], [0, 0, 1]]), "paired must be non-negative"),
    (dict(paired=np.eye(3, dtype=int), metric_only=[1.5, 0, 0]), "metric_only must hold integer counts"),
    (dict(paired=np.eye(2, dtype=int)), r"paired must have shape \(3, 3\)"),
    (dict(paired=np.eye(3, dtype=int), human_only=[1, 2]), "human_only must have shape"),
    (dict(paired=np.eye(3, dtype=int), metric_only=[1, -2, 0]), "metric_only must be non-neg"),
    (dict(paired=np.eye(3, dtype=int), metric_only=[1, np.nan, 0]), "metric_only must be finite"),
    (dict(paired=np.eye(3, dtype=bool)), "integer count array"),
    (dict(paired=[["a"] * 3] * 3), "integer count array"),
])
def test_bad_counts_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PairCounts(**kwargs)


def test_integral_float_counts_are_accepted():
    assert PairCounts(np.eye(3) * 2.0) == PairCounts(np.eye(3, dtype=int) * 2)


@pytest.mark.parametrize("call, message", [
    (lambda: decide_many([S1], method="laplace"), "method"),
    (lambda: decide_many([S1], chains=4), "unknown option"),
    (lambda: decide_many([S1], gamma=1.5), "gamma"),
    (lambda: decide_many([S1], max_draws=0), "max_draws"),
    (lambda: decide_many([np.eye(3)]), r"counts\[0\] must be a PairCounts"),
])
def test_bad_calls_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------------------- exact draws
def test_posterior_draws_without_metric_only_items_are_the_dirichlet_posterior():
    counts = PairCounts([[5, 1, 0], [2, 3, 1], [0, 1, 4]], human_only=[1, 4, 0])
    draws = posterior_draws(counts, 40_000, seed=1)
    alpha = counts.n + 1.0
    mean, var = alpha / alpha.sum(), alpha * (alpha.sum() - alpha) / alpha.sum() ** 2 / (
        alpha.sum() + 1)
    assert draws.shape == (40_000, 3)
    np.testing.assert_allclose(draws.mean(0), mean, atol=Z * np.sqrt(var / 40_000).max())
    np.testing.assert_allclose(draws.var(0), var, rtol=0.05)


def test_posterior_draws_agree_with_the_weighted_theta():
    draws = posterior_draws(S1, 60_000, seed=2)
    wins = draws[:, 0] > draws[:, 2]
    assert abs(wins.mean() - 0.826) <= Z * np.sqrt(0.826 * 0.174 / 60_000) + ORACLE_ROUNDING
    np.testing.assert_allclose(draws.mean(0), [0.4625, 0.1852, 0.3523], atol=0.002)


def _theta_in_child(_):
    return decide_many([S1, S3], seed=9).theta.tolist()


@pytest.mark.filterwarnings("ignore:os.fork")   # JAX, if an earlier test imported it
def test_a_forked_worker_can_decide_after_its_parent_did():
    # Celery/gunicorn fork workers after warm-up; the parent's thread pool must not be reused
    import multiprocessing

    parent = decide_many([S1, S3], seed=9).theta.tolist()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.map_async(_theta_in_child, [0]).get(timeout=60)[0]
    assert child == parent


def test_a_clear_pair_reports_a_nonzero_standard_error_and_stops_early():
    counts = PairCounts([[40, 1, 0], [2, 9, 0], [0, 1, 3]], metric_only=[600, 90, 20])
    result = decide(counts)
    assert result.theta == 1.0 and result.decision == 1 and result.resolved
    assert 0 < result.theta_se < 0.01 and result.draws == 2048


# ---------------------------------------------------------------------------- failing regime
def _compositions(total):
    return [(a, b, total - a - b) for a in range(total + 1) for b in range(total + 1 - a)]


def brute_force_theta(counts: PairCounts) -> float:
    """theta by enumerating every latent split L of the metric-only items (tiny m only).

    P(L | data) ∝ prod_cc' C(N + L, L) * prod_c' Gamma(n + 1 + k) / Gamma(N.sum(0) + 3 + k),
    k = L.sum(0) (Dirichlet-multinomial marginals); theta | L is the Dirichlet closed form.
    """
    from itertools import product
    from scipy.special import gammaln

    paired, n = counts.paired.astype(float), counts.n.astype(float)
    log_weights, thetas = [], []
    for rows in product(*(_compositions(int(m)) for m in counts.metric_only)):
        split = np.array(rows, float)
        k = split.sum(0)
        log_weights.append((gammaln(paired + 1 + split) - gammaln(paired + 1)
                            - gammaln(split + 1)).sum()
                           + (gammaln(n + 1 + k) - gammaln(paired.sum(0) + 3 + k)).sum())
        thetas.append(closed_form_theta(n + k))
    weights = np.exp(np.array(log_weights) - max(log_weights))
    return float(weights @ np.array(thetas) / weights.sum())


def reference_theta(counts: PairCounts) -> float:
    """The same sum as brute_force_theta, one row of L at a time over (k+, k=): the marginal
    weight of each (k+, k=) is a 2-D convolution of the rows' kernels (in linear space after
    each factor's maximum is taken out, so the terms it loses are below 1e-300 of the largest)."""
    from scipy.signal import convolve2d
    from scipy.special import gammaln

    paired, n = counts.paired.astype(float), counts.n.astype(float)
    log_state, state = 0.0, np.ones((1, 1))
    for c, m in enumerate(counts.metric_only.tolist()):
        split = np.arange(m + 1, dtype=float)
        s0, s1 = np.meshgrid(split, split, indexing="ij")
        s2 = m - s0 - s1
        inside = s2 >= 0
        s2 = np.where(inside, s2, 0.0)
        log_kernel = sum(gammaln(paired[c, col] + 1 + part) - gammaln(paired[c, col] + 1) - gammaln(part + 1)
                         for col, part in enumerate((s0, s1, s2)))
        log_kernel = np.where(inside, log_kernel, -np.inf)
        top = log_kernel.max()
        state = convolve2d(state, np.exp(log_kernel - top))
        log_state += top + np.log(state.max())
        state /= state.max()
    total = int(counts.metric_only.sum())
    k0, k1 = np.nonzero(state > 0)
    k = np.stack([k0, k1, total - k0 - k1], axis=1).astype(float)
    log_weight = np.log(state[k0, k1]) + (gammaln(n + 1 + k) - gammaln(paired.sum(0) + 3 + k)).sum(1)
    weight = np.exp(log_weight - log_weight.max())
    return float(weight @ closed_form_theta(n + k) / weight.sum())


@pytest.mark.parametrize("counts", [
    PairCounts([[1, 0, 0], [0, 0, 0], [0, 0, 1]], [30, 2, 20], [4, 1, 3]),
    PairCounts([[2, 1, 0], [0, 1, 0], [1, 0, 3]], [0, 1, 0], [5, 0, 2]),
])
def test_the_row_by_row_reference_equals_brute_force_enumeration(counts):
    assert reference_theta(counts) == pytest.approx(brute_force_theta(counts), abs=1e-12)


FEW_PAIRED = ([[0, 0, 0], [0, 0, 0], [0, 0, 0]], [[1, 0, 0], [0, 0, 0], [0, 0, 1]],
              [[3, 1, 0], [0, 0, 0], [0, 1, 1]], [[15, 4, 5], [1, 2, 1], [6, 4, 12]])
REGIME_GRID = [PairCounts(paired, human_only, metric_only)
               for paired in FEW_PAIRED
               for human_only in ([0, 0, 0], [40, 5, 30], [200, 20, 170])
               for metric_only in ([20, 4, 15], [45, 6, 35])]


def test_every_pair_reports_its_sampler_diagnostics():
    batch = decide_many([PairCounts.empty(), S1, REGIME_GRID[-1]], seed=0)
    assert batch.method.tolist() == ["closed_form", "importance", "exact"]
    assert batch.ess[0] == np.inf and 200 <= batch.ess[1] <= batch.draws[1]
    assert batch.ess[2] == np.inf and batch.draws[2] == 0 and batch.theta_se[2] == 0
    assert batch.pair(1).method == "importance" and batch.pair(1).ess == batch.ess[1]


@pytest.mark.slow
def test_sampler_matches_the_exact_sum_in_the_failing_regime_over_20_seeds():
    # many human-only labels + metric-only labels + few paired items: the importance weights
    # collapse there; every pair must still be within 0.01 and never decided wrongly
    exact = np.array([reference_theta(counts) for counts in REGIME_GRID])
    worst, wrong = 0.0, []
    for seed in range(20):
        batch = decide_many(REGIME_GRID, seed=seed)
        worst = max(worst, float(np.abs(batch.theta - exact).max()))
        wrong += [(seed, i) for i in range(len(REGIME_GRID)) if batch.resolved[i]
                  and batch.decision[i] != decision_from_theta(exact[i])]
    assert worst <= 0.01 and wrong == []


def test_gibbs_fallback_matches_the_exact_sum_when_the_exact_sum_is_too_costly():
    counts = PairCounts([[3, 1, 0], [0, 0, 0], [0, 1, 1]], [200, 20, 170], [45, 6, 35])
    result = decide(counts, seed=4, exact_budget=0)
    assert result.method == "gibbs" and result.draws > 0 and result.theta_se > 0
    assert abs(result.theta - reference_theta(counts)) <= Z * result.theta_se
