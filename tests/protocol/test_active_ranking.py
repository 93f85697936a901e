"""Tests for protocol.active_ranking (the active Bradley–Terry design of issue 22) and its
known-truth replay (protocol.arena_replay.replay_active)."""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtr, ndtri

from protocol.active_ranking import (
    CLOSE,
    OPEN,
    ORDER_BAR_FACTOR,
    ORDERED,
    PRIOR_TIES,
    SPENT,
    ActiveSettings,
    active_advance,
    active_inputs,
    active_progress,
    active_run,
    active_start,
    active_step,
    add_labels,
    counts_ties,
    counts_wins,
    fit,
    fit_by_kind,
    stratified,
)
from protocol.adaptive import ProtocolSettings
from protocol.arena import ArenaSpec, make_arena
from protocol.leaderboard import win_matrix
from protocol.arena_replay import initial_order, replay_active, replay_all_pairs, replay_all_pairs_ebh, score
from protocol.machine import close_rounds, needed, open_rounds, record_judgements, start
from protocol.ranking_design import RankingSettings, item_order


def _log_likelihood(scores, wins, prior_ties):
    """Bradley–Terry log-likelihood of a win matrix plus the prior's tied pseudo-comparisons,
    written out independently of the module (no choix, no information matrix)."""
    size = len(wins)
    total = 0.0
    for i in range(size):
        for j in range(size):
            if i != j:
                weight = wins[i, j] + prior_ties / 2
                total += weight * -np.log1p(np.exp(scores[j] - scores[i]))
    return total


def _random_wins(rng, size, pairs):
    wins = np.zeros((size, size))
    spent = {}
    for _ in range(pairs):
        i, j = sorted(rng.choice(size, 2, replace=False))
        n = int(rng.integers(5, 60))
        share = rng.uniform(0.2, 0.8)
        won = rng.binomial(n, share)
        wins[i, j] += won
        wins[j, i] += n - won
        spent[int(i), int(j)] = spent.get((int(i), int(j)), 0) + n
    return wins, spent


def test_fit_is_the_maximum_and_its_covariance_the_inverse_curvature():
    """Scores: the gradient of the log-likelihood vanishes there. Covariance of differences:
    the inverse of the negative Hessian of the log-likelihood by finite differences, in the
    coordinates s_1 .. s_{S-1} - s_0 (tolerance 1e-3 relative)."""
    rng = np.random.default_rng(3)
    size = 6
    raw, _ = _random_wins(rng, size, 12)
    result = fit(raw)
    wins = raw + 0.5 * ((raw + raw.T) > 0)          # the half win each side of a labelled pair
    step = 1e-4
    gradient = [(_log_likelihood(result.scores + step * np.eye(size)[a], wins, PRIOR_TIES)
                 - _log_likelihood(result.scores - step * np.eye(size)[a], wins, PRIOR_TIES)) / (2 * step)
                for a in range(size)]
    assert np.max(np.abs(gradient)) < 1e-4

    def shifted(delta):    # scores with s_0 fixed and the others moved by delta (S - 1,)
        return result.scores + np.concatenate([[0.0], delta])

    m = size - 1
    hessian = np.empty((m, m))
    for a in range(m):
        for b in range(m):
            ea, eb = np.eye(m)[a] * step, np.eye(m)[b] * step
            hessian[a, b] = (_log_likelihood(shifted(ea + eb), wins, PRIOR_TIES)
                             - _log_likelihood(shifted(ea - eb), wins, PRIOR_TIES)
                             - _log_likelihood(shifted(-ea + eb), wins, PRIOR_TIES)
                             + _log_likelihood(shifted(-ea - eb), wins, PRIOR_TIES)) / (4 * step * step)
    reference = np.linalg.inv(-hessian)          # covariance of s_a - s_0, a = 1 .. S-1
    for a in range(1, size):
        assert result.difference_sd(a, 0) ** 2 == pytest.approx(reference[a - 1, a - 1], rel=1e-3)
    for a, b in ((1, 2), (3, 5)):
        expected = reference[a - 1, a - 1] + reference[b - 1, b - 1] - 2 * reference[a - 1, b - 1]
        assert result.difference_sd(a, b) ** 2 == pytest.approx(expected, rel=1e-3)


def test_first_round_funds_every_neighbour_of_the_start_order():
    start = [3, 0, 4, 1, 2]
    step = active_step(np.zeros((5, 5)), {}, items=200, start=start, settings=ActiveSettings(batch=40))
    assert step.order == tuple(start)
    assert dict(step.pending) == {(0, 3): 40, (0, 4): 40, (1, 4): 40, (1, 2): 40}
    assert not step.complete
    assert all(n.status == OPEN and n.misorder == pytest.approx(0.5) for n in step.neighbours)


def test_clear_order_is_ordered_and_complete():
    size = 5
    wins = np.zeros((size, size))
    for i in range(size - 1):          # 0 beats 1 beats 2 ...: 180 to 20 each
        wins[i, i + 1], wins[i + 1, i] = 180, 20
    spent = {(i, i + 1): 200 for i in range(size - 1)}
    step = active_step(wins, spent, items=2000, start=[4, 3, 2, 1, 0], settings=ActiveSettings())
    assert step.order == (0, 1, 2, 3, 4)
    assert [n.status for n in step.neighbours] == [ORDERED] * 4
    assert step.complete and not step.pending
    assert step.tiers() == ((0,), (1,), (2,), (3,), (4,))
    assert step.expected_misordered == pytest.approx(sum(ndtr(-n.z) for n in step.neighbours))


def test_near_equal_pair_is_close_once_a_reversal_beyond_the_resolution_is_unlikely():
    """520 to 480 (d ~ 0.08, sd ~ 0.063): not ordered at 0.95 (z ~ 1.3), but a reversal by more
    than the resolution 0.05 has posterior probability Phi(-2.1) < 0.05, so the pair is close and
    takes no more labels. Under the earlier rule (stop only when the whole interval lies within
    the resolution) it stayed open and would have taken every item (seen)."""
    wins = np.array([[0, 520, 55], [480, 0, 55], [5, 5, 0]], dtype=float)
    spent = {(0, 1): 1000, (0, 2): 60, (1, 2): 60}
    settings_ = ActiveSettings(confidence=0.95, resolution=0.05)
    step = active_step(wins, spent, items=2000, start=[0, 1, 2], settings=settings_)
    assert step.order == (0, 1, 2)
    near, clear = step.neighbours
    assert near.status == CLOSE and clear.status == ORDERED and step.complete
    assert 1.0 < near.z < 1.645
    assert near.margin == pytest.approx((near.difference + 0.05) / near.sd)
    assert near.misorder_beyond_resolution == pytest.approx(ndtr(-near.margin)) and near.misorder_beyond_resolution <= 0.05
    # an equal pair at a resolution too fine for its 2,000 items: nothing left to spend on it
    wins[0, 1] = wins[1, 0] = 1000
    spent[0, 1] = 2000
    step = active_step(wins, spent, items=2000, start=[0, 1, 2], settings=ActiveSettings(resolution=0.01))
    assert step.neighbours[0].status == SPENT and step.complete
    assert step.tiers()[0] == (0, 1)
    step = active_step(wins, spent, items=4000, start=[0, 1, 2], settings=ActiveSettings(resolution=0.01))
    assert step.neighbours[0].status == OPEN and step.pending == {(0, 1): 25}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_at_the_stop_every_neighbour_not_spent_is_resolved_to_the_resolution(seed):
    """Run to its stop on a small arena: every neighbour not spent has P(misordered by more than
    the resolution) <= 1 - confidence, and the ordered ones P(misordered) <= 1 - confidence."""
    arena = make_arena(ArenaSpec(systems=6, prompts=200, seed=seed, gap=0.2))
    settings_ = ActiveSettings(confidence=0.9, resolution=0.05)
    size = len(arena.names)
    wins, spent = np.zeros((size, size)), {}
    start = initial_order(arena, metric=False, seed=seed)
    while not (step := active_step(wins, spent, items=200, start=start, settings=settings_)).complete:
        for (i, j), take in step.pending.items():
            taken = spent.get((i, j), 0)
            values = arena.human(i, j)[item_order(seed, i, j, 200)[taken: taken + take]]
            wins[i, j] += np.count_nonzero(values > 0) + 0.5 * np.count_nonzero(values == 0)
            wins[j, i] += np.count_nonzero(values < 0) + 0.5 * np.count_nonzero(values == 0)
            spent[i, j] = taken + take
    for n in step.neighbours:
        assert n.status in (ORDERED, CLOSE, SPENT)
        if n.status != SPENT:
            assert ndtr(-n.margin) <= 0.1 + 1e-12
        if n.status == ORDERED:
            assert n.misorder <= 0.1 + 1e-12


def test_budget_and_pair_limit_are_never_exceeded():
    rng = np.random.default_rng(5)
    wins, spent = _random_wins(rng, 8, 6)
    total = sum(spent.values())
    step = active_step(wins, spent, items=100, start=list(range(8)),
                       settings=ActiveSettings(budget=total + 70, batch=50, width=4, max_pairs=len(spent) + 1))
    assert sum(step.pending.values()) <= 70
    new = [pair for pair in step.pending if pair not in spent]
    assert len(new) <= 1
    assert all(spent.get(pair, 0) + n <= 100 for pair, n in step.pending.items())
    spent_out = active_step(wins, spent, items=100, start=list(range(8)), settings=ActiveSettings(budget=total))
    assert spent_out.complete and not spent_out.pending


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(3, 7))
def test_relabelling_systems_relabels_the_step(seed, size):
    rng = np.random.default_rng(seed)
    wins, spent = _random_wins(rng, size, int(rng.integers(1, 10)))
    start = rng.permutation(size)
    perm = rng.permutation(size)           # system s is called perm[s]
    moved = np.zeros_like(wins)
    moved[np.ix_(perm, perm)] = wins
    moved_spent = {tuple(sorted((int(perm[i]), int(perm[j])))): n for (i, j), n in spent.items()}
    settings_ = ActiveSettings(width=2)
    step = active_step(wins, spent, items=300, start=start, settings=settings_)
    other = active_step(moved, moved_spent, items=300, start=perm[start], settings=settings_)
    assert other.order == tuple(int(perm[s]) for s in step.order)
    assert [n.status for n in other.neighbours] == [n.status for n in step.neighbours]
    assert [n.z for n in other.neighbours] == pytest.approx([n.z for n in step.neighbours], rel=1e-6, abs=1e-9)
    assert [n.margin for n in other.neighbours] == pytest.approx([n.margin for n in step.neighbours], rel=1e-6)
    assert dict(other.pending) == {tuple(sorted((int(perm[i]), int(perm[j])))): n for (i, j), n in step.pending.items()}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(3, 7))
def test_swapping_every_outcome_mirrors_the_order(seed, size):
    """Every label reversed (the win matrix transposed) and the start order reversed: the
    order is reversed, the neighbours' z and statuses mirrored."""
    rng = np.random.default_rng(seed)
    wins, spent = _random_wins(rng, size, int(rng.integers(1, 10)))
    start = rng.permutation(size)
    step = active_step(wins, spent, items=300, start=start, settings=ActiveSettings())
    mirror = active_step(wins.T.copy(), spent, items=300, start=start[::-1], settings=ActiveSettings())
    assert mirror.order == step.order[::-1]
    assert [n.status for n in mirror.neighbours] == [n.status for n in step.neighbours[::-1]]
    assert [n.z for n in mirror.neighbours] == pytest.approx([n.z for n in step.neighbours[::-1]], rel=1e-6, abs=1e-9)


def test_settings_name_what_is_wrong():
    with pytest.raises(ValueError, match="confidence"):
        ActiveSettings(confidence=1.0)
    with pytest.raises(ValueError, match="resolution"):
        ActiveSettings(resolution=-0.1)
    with pytest.raises(ValueError, match="batch"):
        ActiveSettings(batch=0)
    with pytest.raises(ValueError, match="permutation"):
        active_step(np.zeros((3, 3)), {}, items=10, start=[0, 0, 1], settings=ActiveSettings())
    assert ActiveSettings().decision_level(50) == pytest.approx(0.05 / 1225)
    assert ActiveSettings(max_pairs=98).decision_level(50) == pytest.approx(0.05 / 98)


def test_null_arenas_decide_no_pair():
    """All systems equal: every decision the design reports is false. 20 studies of 8 systems
    drive the replay's whole path (rounds chosen by the fit, then each sampled pair's
    e-process at gamma / pairs): none may decide a pair. At per-pair level gamma 3 of the 20
    would (seen with ``decision_level`` patched to return gamma)."""
    studies_with_false = 0
    for seed in range(20):
        arena = make_arena(ArenaSpec(systems=8, prompts=300, seed=seed, gap=0.0))
        result = replay_active(arena, ActiveSettings(confidence=0.9, resolution=0.3), seed=seed)
        assert result.labels > 0
        studies_with_false += result.false_pairs > 0 or result.ordered_pairs > 0
    assert studies_with_false == 0


def test_orders_a_known_truth_arena_with_fewer_labels_than_all_pairs():
    """12 systems x 600 prompts (gap 0.3): the design's fitted order reverses no more true
    neighbours than the fit of all pairs at the family-wise level, for fewer labels."""
    arena = make_arena(ArenaSpec(systems=12, prompts=600, seed=1))
    active = replay_active(arena, ActiveSettings(confidence=0.9), seed=1)
    everything = replay_all_pairs(arena, RankingSettings(seed=1), family=True)
    assert active.labels < everything.labels / 2
    assert active.wrong_adjacent_fit <= everything.wrong_adjacent_fit + 1
    assert active.wrong_adjacent == active.wrong_adjacent_fit      # its order is its fit
    assert active.false_pairs == 0
    assert active.stated_misordered >= 0


def _drive_state(arena, settings_, *, seed):
    """The design inside a ProtocolState, as the app runs it: active_start, then rounds filled
    with the arena's labels in ``item_order`` and closed one at a time, the oldest first, while
    the other rounds are open, ``active_advance`` and ``open_rounds`` after every close.
    Returns (final state, names in start order, and after each close the rounds open and the
    open neighbours of the design's fit that have none)."""
    size, prompts = len(arena.names), len(arena.items)
    names = arena.names
    start_order = [names[s] for s in initial_order(arena, metric=False, seed=seed)]
    capacities = {(a, b): prompts for n, a in enumerate(names) for b in names[n + 1:]}
    protocol = ProtocolSettings(budget=10 ** 7, batch=settings_.batch, gamma=settings_.decision_level(size),
                                policy="adaptive", rule="eprocess", family="none", seed=seed)
    state = active_start(start(protocol, capacities), start_order, settings_)
    index = {name: n for n, name in enumerate(names)}
    opened: list[tuple[str, str]] = []       # open rounds, oldest first
    in_flight = []                           # rounds open after each advance
    while True:
        want = needed(state)
        opened = [key for key in opened if key in want] + sorted(key for key in want if key not in opened)
        if not want:
            break
        # one round filled and closed at a time, the oldest, the others still open
        (a, b), quota = opened[0], want[opened[0]]
        i, j = index[a], index[b]
        taken = state.pair(a, b).judgements
        items = item_order(seed, i, j, prompts)[taken: taken + quota]
        state = record_judgements(state, a, b, [str(t) for t in items], arena.human(i, j)[items])
        opened.pop(0)                        # closed: if funded again, its new round is the newest
        state = open_rounds(active_advance(close_rounds(state), start_order, settings_))
        open_now = set(needed(state))
        step = active_progress(state.pairs, start_order, settings_, settings_.decision_level(size)).step
        idle = [n for n in step.neighbours if n.status == OPEN
                and tuple(sorted((start_order[n.upper], start_order[n.lower]))) not in open_now]
        in_flight.append((len(open_now), len(idle)))
    return state, start_order, in_flight


def test_the_app_loop_spends_exactly_what_the_replay_spends():
    """A ProtocolState driven round by round (the app's path: parked pairs, rounds opened by
    active_advance, closes) asks for the same labels on the same pairs as the synchronous
    replay, and ends with the same fitted order."""
    arena = make_arena(ArenaSpec(systems=10, prompts=300, seed=2))
    settings_ = ActiveSettings(confidence=0.9)
    state, start_order, in_flight = _drive_state(arena, settings_, seed=2)
    replay = replay_active(arena, settings_, seed=2)
    assert state.spent == replay.labels
    # after every close the design keeps ``width`` rounds open, or every open neighbour has one,
    # and never more: a crowd is not left waiting for a step's last round (seen failing when
    # the step ignored the rounds in flight: 20 open at once; and with the steps of the first
    # version, which waited for their last round with open neighbours unfunded)
    assert max(count for count, _ in in_flight) == settings_.width
    assert all(count == settings_.width or idle == 0 for count, idle in in_flight)
    progress = active_progress(state.pairs, start_order, settings_, settings_.decision_level(10))
    assert progress.complete and progress.labels == replay.labels
    fitted = [arena.names.index(name) for name in progress.order]
    assert score(arena, fitted, None)["wrong_adjacent"] == replay.wrong_adjacent
    sampled = sum(1 for p in state.pairs if p.judgements)
    assert sampled == replay.pairs_asked
    assert all(p.status != "waiting" for p in state.pairs)


def test_a_pair_one_system_always_won_is_ordered_not_uncertain():
    """30 to 0 on each neighbour: without the half-win correction the fit's maximum is at
    infinity and the Laplace variance with it, so z fell to 0 and the design would have spent
    every item of every pair (seen: every neighbour open, then spent). (At confidence 0.99 the
    ordered bar is a posterior of 0.999, z 3.09, above these pairs' z of about 2.9: so the
    default confidence here.)"""
    size = 4
    wins = np.zeros((size, size))
    for i in range(size - 1):
        wins[i, i + 1] = 30
    spent = {(i, i + 1): 30 for i in range(size - 1)}
    step = active_step(wins, spent, items=200, start=[3, 2, 1, 0], settings=ActiveSettings())
    assert step.order == (0, 1, 2, 3)
    assert [n.status for n in step.neighbours] == [ORDERED] * 3 and step.complete


def test_all_pairs_with_ebh_runs_the_family_together():
    """The app's default all-pairs study (e-BH over the pairs at γ) replayed: on null arenas
    (12 equal systems x 300 prompts, 10 seeds) no study decides a pair, where deciding each
    pair at γ on its own does in 8 of 10 (measured); on a known-truth arena it spends between
    the per-pair and the family-wise runs and decides nothing false."""
    for seed in range(10):
        null = make_arena(ArenaSpec(systems=12, prompts=300, seed=seed, gap=0.0))
        assert replay_all_pairs_ebh(null, RankingSettings(seed=seed)).ordered_pairs == 0
    arena = make_arena(ArenaSpec(systems=16, prompts=500, seed=0))
    settings_ = RankingSettings(seed=0)
    ebh = replay_all_pairs_ebh(arena, settings_)
    assert replay_all_pairs(arena, settings_).labels < ebh.labels < replay_all_pairs(arena, settings_, family=True).labels
    assert ebh.false_pairs == 0 and ebh.ordered_pairs > 0


def test_what_the_stop_states_holds_on_known_truth_arenas():
    """At the stop every neighbour not spent is resolved: a reversal by more than the resolution
    has posterior probability <= 1 - confidence. On known-truth arenas (10 systems x 400 prompts,
    gap 0.2, 8 seeds) the share of resolved neighbours that the Bradley–Terry fit of every label
    reverses by more than the resolution stays within 1 - confidence."""
    resolved = wrong = 0
    for seed in range(8):
        arena = make_arena(ArenaSpec(systems=10, prompts=400, seed=seed, gap=0.2))
        result = replay_active(arena, ActiveSettings(confidence=0.9, resolution=0.05), seed=seed)
        resolved += result.resolved_neighbours
        wrong += result.resolved_wrong
    # measured: 1 of 65; with the margin's resolution counted four times over, 8 of 72 (seen failing)
    assert resolved >= 50
    assert wrong <= 0.1 * resolved


# Kinds of prompt (issue 39) ---------------------------------------------------------------------

def _no_ties(wins):
    return np.zeros_like(np.asarray(wins, dtype=float))


def test_fit_by_kind_states_the_kinds_variance_by_the_formula_written_out():
    """Independent reference, two systems and three kinds, from the labels themselves: each
    kind's label values (1 a win of the first, 1/2 a tie, 0 a loss), their mean y_g and the
    variance of that mean, np.var(values, ddof=1) / n_g; the kinds' variance of the share
    var(y) (ddof 1) less the mean of those, over (ybar (1 - ybar))^2, is 2 sigma^2; the
    difference's variance gains 2 sigma^2 / 3 at sigma^2's upper 0.95 bound on (3 - 1)(2 - 1) =
    2 degrees of freedom, 2 / chi2_2(0.05) = 2 / 0.102587 (tables). With ties, taking a tie to
    vary as a win or a loss (y (1 - y) / (n - 1)) gives 0.0089 instead of 0.0256 here."""
    won = np.array([20, 12, 17])
    tied = np.array([14, 16, 12])
    lost = np.array([8, 14, 13])
    values = [np.repeat([1.0, 0.5, 0.0], (w, t, l)) for w, t, l in zip(won, tied, lost)]
    wins = np.zeros((3, 2, 2))
    wins[:, 0, 1], wins[:, 1, 0] = won + tied / 2, lost + tied / 2
    ties = np.zeros((3, 2, 2))
    ties[:, 0, 1] = ties[:, 1, 0] = tied
    y = np.array([v.mean() for v in values])
    mean = y.mean()
    between = np.var(y, ddof=1) - np.mean([np.var(v, ddof=1) / len(v) for v in values])
    sigma2 = between / (mean * (1 - mean)) ** 2 / 2
    assert sigma2 == pytest.approx(0.02555, abs=1e-5)
    result = fit_by_kind(wins, ties=ties, confidence=0.95)
    assert result.kind_variance == pytest.approx(sigma2, rel=1e-9)
    pooled = fit(wins.sum(axis=0))
    assert np.allclose(result.scores, pooled.scores)
    model = pooled.difference_sd(0, 1) ** 2
    assert result.difference_sd(0, 1) ** 2 == pytest.approx(model + 2 * sigma2 / 3 * 2 / 0.102587, rel=1e-4)
    # the lower bound, 2 / chi2_2(0.95) = 2 / 5.991465
    assert result.floor_sd(0, 1) ** 2 == pytest.approx(2 * sigma2 / 3 * 2 / 5.991465, rel=1e-5)
    # one kind: the plain fit, no kinds' part
    single = fit_by_kind(wins[:1], ties=ties[:1], confidence=0.95)
    assert single.kinds is None and single.difference_sd(0, 1) == pytest.approx(fit(wins[0]).difference_sd(0, 1))


def test_fit_by_kind_recovers_the_kinds_variance_from_few_labels_a_kind():
    """Simulated from the model it states, with 6 labels per pair and kind (the early rounds):
    log-odds of a over b on kind g theta_a - theta_b + u[a, g] - u[b, g], u ~ N(0, 0.5^2). The
    mean estimate over 300 studies is within 20 % of sigma^2 = 0.25 (measured 0.21: the delta
    method's linear step understates effects this large, a win share being bounded)."""
    rng = np.random.default_rng(0)
    size, kinds, sigma = 6, 8, 0.5
    estimates = []
    for _ in range(300):
        theta = rng.normal(0, 0.3, size)
        u = rng.normal(0, sigma, (size, kinds))
        wins = np.zeros((kinds, size, size))
        for i in range(size):
            for j in range(i + 1, size):
                p = 1 / (1 + np.exp(-(theta[i] - theta[j] + u[i] - u[j])))
                won = rng.binomial(6, p)
                wins[:, i, j], wins[:, j, i] = won, 6 - won
        estimates.append(fit_by_kind(wins, ties=_no_ties(wins), confidence=0.95).kind_variance)
    assert np.mean(estimates) == pytest.approx(sigma ** 2, rel=0.2)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(3, 6), kinds=st.integers(2, 5))
def test_fit_by_kind_follows_relabelled_and_swapped_systems(seed, size, kinds):
    """Systems renamed: scores and the kinds' part renamed. Every outcome swapped (each kind's
    win matrix transposed): scores negated, every difference's sd unchanged. The kinds listed in
    another order: nothing changes."""
    rng = np.random.default_rng(seed)
    wins = np.stack([_random_wins(rng, size, int(rng.integers(size, 3 * size)))[0] for _ in range(kinds)])
    ties = _no_ties(wins)
    base = fit_by_kind(wins, ties=ties, confidence=0.9)
    perm = rng.permutation(size)
    moved = np.zeros_like(wins)
    moved[:, perm[:, None], perm[None, :]] = wins
    renamed = fit_by_kind(moved, ties=ties, confidence=0.9)
    assert renamed.scores[perm] == pytest.approx(base.scores, abs=1e-6)
    assert renamed.kind_variance == pytest.approx(base.kind_variance, rel=1e-9, abs=1e-12)
    swapped = fit_by_kind(wins.transpose(0, 2, 1).copy(), ties=ties, confidence=0.9)
    assert swapped.scores == pytest.approx(-base.scores, abs=1e-6)
    reordered = fit_by_kind(wins[::-1].copy(), ties=ties, confidence=0.9)
    assert reordered.kind_variance == pytest.approx(base.kind_variance, rel=1e-9, abs=1e-12)
    for a in range(size):
        for b in range(a + 1, size):
            sd = base.difference_sd(a, b)
            assert renamed.difference_sd(int(perm[a]), int(perm[b])) == pytest.approx(sd, rel=1e-5)
            assert swapped.difference_sd(a, b) == pytest.approx(sd, rel=1e-5)
            assert swapped.floor_sd(a, b) == pytest.approx(base.floor_sd(a, b), rel=1e-6, abs=1e-12)


def test_stratified_items_take_turns_over_the_kinds():
    kinds = np.arange(90) % 3
    order = stratified(np.random.default_rng(1).permutation(90), kinds)
    assert sorted(order.tolist()) == list(range(90))
    for prefix in range(1, 91):
        counts = np.bincount(kinds[order[:prefix]], minlength=3)
        assert counts.max() - counts.min() <= 1


def test_on_an_arena_with_prompt_kinds_the_kinds_keep_the_statement():
    """Fails on the design without kinds (issue 39): on an arena whose systems are strong on
    some of 10 kinds of prompt and weak on others (effect sd 0.5, the study's kinds a sample of
    the population's), the neighbours it reports resolved are reversed by more than the
    resolution in the population more often than the 5 % it states (1 of 18 here); told the
    kinds, none is, and none it reports ordered is wrong."""
    arena = make_arena(ArenaSpec(systems=20, prompts=1000, seed=1, prompt_types=10, type_sd=0.5))
    today = replay_active(arena, ActiveSettings(), seed=1)
    kinds = replay_active(arena, ActiveSettings(), seed=1, by_kind=True)
    assert today.resolved_wrong_population / today.resolved_neighbours > 0.05
    assert kinds.resolved_wrong_population == 0 and kinds.confident_wrong == 0


# Tiers of equal systems (issue 39) --------------------------------------------------------------

def test_on_tiers_of_equal_systems_few_ordered_claims_are_wrong_and_the_labels_do_not_move():
    """Fails with the ordered bar at z* = Phi^-1(confidence) (issue 39): on arenas with tiers of 3
    exactly equal systems (12 x 300, seeds 0-5) the design reported 13 neighbours ordered at
    0.95, 8 of them exactly equal or reversed (seen). The design stops a pair once it is close,
    so it makes few ordered claims about unequal systems, and the equal neighbours that cross z*
    (about 5 % of them, after many looks) dominate its claims. At the stricter bar
    (``ActiveSettings.order_bar``) the claims hold at the stated level. The stop does not depend
    on the bar, so on the default arena the labels are those of the rule before (7,825 on 12 x
    300, seeds 0-2, recorded with it) and the statement about resolved neighbours still holds."""
    claims = wrong = 0
    for seed in range(6):
        arena = make_arena(ArenaSpec(systems=12, prompts=300, seed=seed, tier_size=3))
        result = replay_active(arena, ActiveSettings(), seed=seed)
        claims += result.confident_neighbours
        wrong += result.confident_wrong
    assert wrong <= (1 - ActiveSettings().confidence) * claims
    labels = resolved = resolved_wrong = 0
    for seed in range(3):
        result = replay_active(make_arena(ArenaSpec(systems=12, prompts=300, seed=seed)), ActiveSettings(), seed=seed)
        labels += result.labels
        resolved += result.resolved_neighbours
        resolved_wrong += result.resolved_wrong
    assert abs(labels - 7_825) <= 0.1 * 7_825
    assert resolved >= 20 and resolved_wrong <= 0.05 * resolved


def test_the_ordered_bar_is_stricter_than_the_stop_and_follows_the_confidence():
    for confidence in (0.8, 0.9, 0.95, 0.99):
        settings_ = ActiveSettings(confidence=confidence)
        assert settings_.stop_bar == pytest.approx(ndtri(confidence))
        assert 1 - ndtr(settings_.order_bar) == pytest.approx((1 - confidence) / ORDER_BAR_FACTOR)
        assert settings_.order_bar > settings_.stop_bar
    # 56 to 44 of 100 with r = 0 (z ~ 1.2): ordered under a bar of z* = 0.84 (confidence 0.8),
    # close under the ordered bar of 0.98 (2.05)
    wins = np.array([[0, 56], [44, 0]], dtype=float)
    step = active_step(wins, {(0, 1): 100}, items=100, start=[0, 1],
                       settings=ActiveSettings(confidence=0.8, resolution=0.0))
    (n,) = step.neighbours
    assert ndtri(0.8) < n.z < ActiveSettings(confidence=0.8).order_bar
    assert n.status == CLOSE and step.tiers() == ((0, 1),)


def test_the_app_state_gives_the_design_one_win_matrix_per_kind_of_prompt():
    """active_inputs with the items' kinds (the app's path, docs/ranking.md): each kind's win
    matrix counts the pair's items of that kind once, by the sign of their judgements' mean (a
    tie half a win each); the kinds' matrices add up to the pooled one, and the step fits by kind."""
    names = ["a", "b", "c"]
    protocol = ProtocolSettings(budget=100, batch=6, first_round=6, gamma=0.05, policy="adaptive", rule="eprocess",
                                family="none")
    state = open_rounds(start(protocol, {("a", "b"): 6, ("a", "c"): 6, ("b", "c"): 6}))
    kinds = {str(t): ("x", "y")[t % 2] for t in range(6)}
    values = {("a", "b"): [1, 1, -1, 0, 1, -1], ("a", "c"): [1, 1, 1, 1, 1, 0], ("b", "c"): [-1, 1, -1, 1, 0, 0]}
    for (a, b), labels in values.items():
        state = record_judgements(state, a, b, [str(t) for t in range(6)], labels)
    pooled = active_inputs(state.pairs, names)
    by_kind = active_inputs(state.pairs, names, kinds)
    assert by_kind.wins.shape == (2, 3, 3) and np.allclose(by_kind.wins.sum(axis=0), pooled.wins)
    assert pooled.ties is None
    assert ((by_kind.spent, by_kind.capacity, by_kind.in_flight)
            == (pooled.spent, pooled.capacity, pooled.in_flight))
    # kind "y" (items 1, 3, 5) of pair (a, b): +1, 0, -1 -> a 1.5 wins, b 1.5, one tie
    assert by_kind.wins[1, 0, 1] == by_kind.wins[1, 1, 0] == 1.5
    assert by_kind.wins[0, 0, 1] == 2 and by_kind.wins[0, 1, 0] == 1
    # the ties by kind, each pair's both ways: (a, b) one on "y"; (a, c) item 5 ("y"); (b, c)
    # items 4 ("x") and 5 ("y")
    expected = np.zeros((2, 3, 3))
    for g, i, j in ((1, 0, 1), (1, 0, 2), (0, 1, 2), (1, 1, 2)):
        expected[g, i, j] = expected[g, j, i] = 1
    assert np.array_equal(by_kind.ties, expected)
    settings_ = ActiveSettings()
    assert active_progress(state.pairs, names, settings_, 0.05, kinds).step.kinds == 2
    assert active_progress(state.pairs, names, settings_, 0.05).step.kinds == 0


def test_a_close_claim_by_kind_takes_the_kinds_part_at_the_stricter_bar():
    """Two systems labelled on four kinds of prompt, a over b on two of them and b over a on the
    others: most of their difference's uncertainty is the kinds'. At a resolution where
    (d + r) / sd reaches z* but d + r < sqrt(z*^2 v_labels + z_k^2 v_kinds) (z_k at
    (1 - confidence) / KINDS_CLOSE_BAR_FACTOR) the neighbour is not close; the same labels
    without their kinds are (no kinds' part: the bar is z*'s)."""
    shares = [(34, 6, 20), (30, 8, 22), (22, 8, 30), (26, 10, 24)]   # (a won, tied, b won) per kind
    wins, ties = np.zeros((4, 2, 2)), np.zeros((4, 2, 2))
    for g, (won, tied, lost) in enumerate(shares):
        wins[g, 0, 1], wins[g, 1, 0] = won + tied / 2, lost + tied / 2
        ties[g, 0, 1] = ties[g, 1, 0] = tied
    settings_ = ActiveSettings()
    model = fit_by_kind(wins, ties=ties, confidence=settings_.confidence)
    d = float(model.scores[0] - model.scores[1])
    z_star, z_kinds = settings_.stop_bar, settings_.kinds_close_bar
    labels_part = model._variance(model.covariance, 0, 1)
    kinds_part = model._variance(model.kinds, 0, 1)
    assert d > 0 and kinds_part > labels_part
    plain, strict = z_star * np.sqrt(labels_part + kinds_part), np.sqrt(z_star ** 2 * labels_part + z_kinds ** 2 * kinds_part)
    resolution = (plain + strict) / 2 - d      # between the two bars
    at = ActiveSettings(resolution=resolution)
    spent, items = {(0, 1): 240}, {(0, 1): 1000}
    (n,) = active_step(wins, spent, items=items, start=[0, 1], settings=at, ties=ties).neighbours
    assert (n.difference + resolution) / n.sd >= z_star      # today's rule: close
    assert n.margin < z_star and n.status == OPEN
    assert n.margin == pytest.approx((d + resolution) / np.sqrt(labels_part + at.kinds_weight * kinds_part))
    assert at.kinds_weight == pytest.approx((ndtri(1 - 0.05 / 10) / ndtri(0.95)) ** 2)
    (pooled,) = active_step(wins.sum(axis=0), spent, items=items, start=[0, 1], settings=at).neighbours
    assert pooled.status == CLOSE and pooled.margin == pytest.approx((pooled.difference + resolution) / pooled.sd)
    with pytest.raises(ValueError, match="tied labels by kind"):
        active_step(wins, spent, items=items, start=[0, 1], settings=at)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([-1, 0, 1]), st.integers(0, 2)),
                min_size=1, max_size=40))
def test_labels_counted_either_way_round_give_the_win_matrix_and_the_ties(labels):
    """add_labels of a pair given either way round (i > j flips the labels), summed into counts
    (3, S, S) or by kind (K, 3, S, S): counts_wins is leaderboard.win_matrix of the same labels
    (the pooled one, and each kind's), counts_ties the ties of each pair, and nothing is counted
    below the diagonal."""
    labels = [(i, j, v, g) for i, j, v, g in labels if i != j]
    pooled = np.zeros((3, 5, 5), dtype=np.int64)
    by_kind = np.zeros((3, 3, 5, 5), dtype=np.int64)
    for i, j, v, g in labels:
        add_labels(pooled, i, j, np.array([v]))
        add_labels(by_kind, i, j, np.array([v]), np.array([g]))
    first, second, values, kinds = (np.array([row[k] for row in labels], dtype=np.int64).reshape(-1) for k in range(4))
    assert np.array_equal(counts_wins(pooled), win_matrix(5, first, second, values))
    assert np.array_equal(counts_wins(by_kind).sum(axis=0), win_matrix(5, first, second, values))
    for g in range(3):
        mine = kinds == g
        assert np.array_equal(counts_wins(by_kind[g]), win_matrix(5, first[mine], second[mine], values[mine]))
    ties = np.zeros((5, 5))
    for i, j, v, _ in labels:
        ties[i, j] += v == 0
        ties[j, i] += v == 0
    assert np.array_equal(counts_ties(pooled), ties)
    assert not np.tril(pooled.sum(axis=0)).any() and not np.tril(by_kind.sum(axis=(0, 1))).any()


def test_a_fit_started_from_the_last_one_is_the_same_fit_in_fewer_iterations(solver_iterations):
    """One more round of one pair moves the fit little: started from the fit before it, the
    solver reaches the same scores (to 1e-8, its tolerance being 1e-10 on the parameters) in
    fewer iterations than from its own start."""
    rng = np.random.default_rng(4)
    size = 30
    wins = np.zeros((size, size))
    for i, j in [(i, i + 1) for i in range(size - 1)] + [tuple(rng.choice(size, 2, replace=False)) for _ in range(60)]:
        won = rng.integers(0, 11)
        wins[i, j] += won
        wins[j, i] += 10 - won
    before = fit(wins).scores
    wins[0, 1] += 7
    wins[1, 0] += 3
    solver_iterations.clear()
    cold = fit(wins)
    cold_iterations = len(solver_iterations)
    solver_iterations.clear()
    warm = fit(wins, start=before)
    assert np.allclose(warm.scores, cold.scores, atol=1e-8)
    assert np.allclose(warm.covariance, cold.covariance, atol=1e-8)
    assert len(solver_iterations) < cold_iterations
    with pytest.raises(ValueError, match=r"start must be \(30,\)"):
        fit(wins, start=before[:-1])


def test_the_design_run_starts_each_fit_from_the_last(solver_iterations, monkeypatch):
    """``active_run`` (the replays' and the planner's loop) starts each step's fit from the
    last step's scores: the same run, labels and order, with fewer solver iterations than
    fitting every step from scratch (what it did before)."""
    import protocol.active_ranking as active_ranking

    arena = make_arena(ArenaSpec(systems=12, prompts=300, seed=5, gap=0.3, prompt_types=3, type_sd=0.5))
    kinds = arena.kinds
    warm_step, warm_spent = active_run(arena.human, items=300, start=list(range(12)), settings=ActiveSettings(),
                                       seed=5, kinds=kinds)
    warm_iterations = len(solver_iterations)
    scratch = active_ranking.fit_scores
    monkeypatch.setattr(active_ranking, "fit_scores", lambda wins, *, prior_ties, start=None: scratch(wins, prior_ties=prior_ties))
    solver_iterations.clear()
    cold_step, cold_spent = active_run(arena.human, items=300, start=list(range(12)), settings=ActiveSettings(),
                                       seed=5, kinds=kinds)
    assert warm_spent == cold_spent and warm_step.order == cold_step.order
    assert [n.status for n in warm_step.neighbours] == [n.status for n in cold_step.neighbours]
    assert len(solver_iterations) > warm_iterations > 0


def test_prepare_sees_the_funded_pairs_waiting_and_their_rounds_open_with_what_it_set():
    """``prepare`` (the app's calibration of combined metrics) runs on exactly the pairs the
    step funds, while they still wait, and their rounds open with the prediction it set (their
    bets read it from the opening on). Fails on a design that opened its rounds before any
    caller could predict them."""
    names = [f"s{n}" for n in range(5)]
    capacities = {(a, b): 40 for n, a in enumerate(names) for b in names[n + 1:]}
    protocol = ProtocolSettings(budget=10 ** 5, batch=4, gamma=0.05, policy="adaptive", rule="eprocess",
                                family="none", seed=0)
    seen = []

    def prepare(state, indices):
        seen.append(sorted(indices))
        assert all(state.pairs[i].status == "waiting" for i in indices)
        pairs = list(state.pairs)
        for i in indices:
            pairs[i] = replace(pairs[i], prediction=MappingProxyType({str(t): 0.25 for t in range(40)}))
        return replace(state, pairs=tuple(pairs))

    state = active_start(start(protocol, capacities), names, ActiveSettings(), prepare)
    opened = [i for i, p in enumerate(state.pairs) if p.status == "open"]
    assert seen == [opened] and len(opened) == len(names) - 1       # the start order's neighbours
    assert all(state.pairs[i].prediction for i in opened)
    assert not any(p.prediction for p in state.pairs if p.status != "open")
