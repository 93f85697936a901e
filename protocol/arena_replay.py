"""Known-truth replays of the ranking designs on a synthetic arena (issue 22).

Every design sees the same arena (protocol.arena) and the same human labels, and is scored
against the true order:

    labels            human labels spent
    tau               Kendall tau between the design's order and the true order
    adjacent_labels   of those, labels spent on pairs of neighbours in the true order: such a
                      pair is implied by no other, so every design that decides it pays them
    wrong_adjacent    pairs of neighbours in the true order that the design's order reverses
                      (of k - 1)
    resolved_adjacent neighbours in the true order that the design DECIDED correctly
                      (directly or by transitivity): what the error statement covers
    ordered_pairs     pairs the design reports as decided (its partial order)
    false_pairs       of those, pairs contradicting the truth
    tau_fit, wrong_adjacent_fit
                      the same for the order a leaderboard fits to the design's labels
                      (``fitted_order``: Bradley–Terry over every label the design spent,
                      whatever pair it was spent on), so that designs are compared with one
                      estimator of the order as well as with their own

Designs
-------
``all_pairs``   every pair decided by the per-pair protocol (adaptive + e-process) at level
                gamma, the protocol's default statement; order: Copeland (decided wins minus
                losses), then the share of won labels
``ranking``     the merge-sort design of protocol.ranking_design at its settings (error
                "fwer" by default: P(any wrong pair of the partial order) <= gamma)
``oracle``      a reference, not a design: labels only on the neighbours of the true order
                (``replay_neighbours_oracle``)
``active``      the active Bradley–Terry design of protocol.active_ranking: labels where the fit
                of all labels so far is least sure of two neighbours, until every neighbour
                is ordered (posterior P(reversed) <= ``ActiveSettings.order_misorder``), or
                close to the resolution at the confidence; decisions by
                each sampled pair's e-process at gamma / (k (k - 1) / 2); order: its fit
                (``stated_misordered``: the fit's expected number of misordered neighbours;
                ``confident_neighbours``: neighbours it reports ordered (stated at the confidence),
                ``confident_wrong``: of those, the ones the truth orders otherwise or ties;
                ``resolved_neighbours``: neighbours it reports ordered or close, ``resolved_wrong``:
                of those, the ones that the Bradley–Terry fit of every label of every pair
                (``population_scores``) reverses by more than the resolution, and
                ``resolved_wrong_direct`` the ones the pair's own log-odds on all its prompts
                (``Arena.log_odds``) reverse by more than the resolution, and
                ``resolved_wrong_population`` the ones the population's scores (``true_scores``:
                the prompts the study's are a sample of) reverse by more than the resolution)
``uniform``     the Arena's baseline: labels on uniformly random (pair, item) draws, ordered
                by a Bradley–Terry fit (protocol.leaderboard.fit_scores, choix); it decides no
                pair. Run at the ranking design's label count of the same seed.

With ``metric=True`` the pair decisions bet on the metric's labels (the e-process uses them,
the decision stays the human margin's) and the ranking starts from the metric's order (mean
metric score); the human-only variants use neither.

    python -m protocol.arena_replay --systems 16 --prompts 500 --seeds 0 1 2 [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy.stats import kendalltau

from .active_ranking import CLOSE, ORDERED, ActiveSettings, active_decided, active_run
from .adaptive import ProtocolSettings, run_rounds, start
from .arena import Arena, ArenaSpec, make_arena
from .leaderboard import fit_scores, win_matrix
from .ranking_design import (
    REFINE,
    PairOutcome,
    RankingSettings,
    decide_pair,
    human_theta,
    item_order,
    pair_outcome,
    rank,
    start_order,
)

DESIGNS = ("all_pairs", "all_pairs_fwer", "ranking", "uniform")


@dataclass(frozen=True)
class DesignResult:
    """One design on one arena (fields as in the module doc)."""

    design: str
    systems: int
    prompts: int
    seed: int
    metric: bool
    labels: int
    adjacent_labels: int
    tau: float
    wrong_adjacent: int
    resolved_adjacent: int
    ordered_pairs: int
    false_pairs: int
    pairs_asked: int
    level: float
    seconds: float
    tau_fit: float = float("nan")
    wrong_adjacent_fit: int = -1
    stated_misordered: float = float("nan")
    confident_neighbours: int = -1
    confident_wrong: int = -1
    resolved_neighbours: int = -1
    resolved_wrong: int = -1
    resolved_wrong_direct: int = -1
    resolved_wrong_population: int = -1


# The fit's prior: tied pseudo-comparisons between every two systems keep the scores finite
# when a system wins every label it got; the leaderboard's 0.5 pulls the scores of a sparse
# design (a sort compares each system with few others) together enough to misorder about five
# more neighbours at k = 50, so the replays fit with a prior 50 times weaker.
FIT_PRIOR_TIES = 0.01


def _fit(size: int, first, second, values) -> np.ndarray:
    """Order (system indices, best first, ties by index) of the Bradley–Terry fit of labels
    ``values`` (n,) in {+1, 0, -1} on pairs (``first``, ``second``) (n,)."""
    scores = fit_scores(win_matrix(size, first, second, values), prior_ties=FIT_PRIOR_TIES)
    return np.lexsort((np.arange(size), -scores))


def fitted_order(arena: Arena, spent: Mapping[tuple[int, int], int], *, seed: int) -> np.ndarray:
    """The order (system indices, best first) a leaderboard fits to the labels a design spent.

    ``spent`` maps a pair of system indices to the labels the design took on it: a replay's
    run of a pair takes its first labels in ``item_order(seed, i, j, prompts)`` (a capped or
    refined run a prefix of it). Bradley–Terry over all of them (``FIT_PRIOR_TIES``): an
    estimate of the order that pools every pair; it decides nothing.
    """
    prompts = len(arena.items)
    chunks = [(i, j, item_order(seed, i, j, prompts)[:n]) for (i, j), n in spent.items() if n > 0]
    if not chunks:
        raise ValueError("no labels to fit an order to")
    first = np.concatenate([np.full(len(items), i) for i, _, items in chunks])
    second = np.concatenate([np.full(len(items), j) for _, j, items in chunks])
    values = np.concatenate([arena.human(i, j)[items] for i, j, items in chunks])
    return _fit(len(arena.names), first, second, values)


def population_scores(arena: Arena) -> np.ndarray:
    """(S,) Bradley–Terry log-strengths fitted to every label of every pair (each pair's label on
    every prompt): what the active design's fit estimates, on this study's prompts."""
    size = len(arena.names)
    first, second = np.triu_indices(size, k=1)
    wins = sum(win_matrix(size, np.full(len(arena.items), i), np.full(len(arena.items), j), arena.human(i, j))
               for i, j in zip(first.tolist(), second.tolist()))
    return fit_scores(wins, prior_ties=FIT_PRIOR_TIES)


def true_scores(arena: Arena) -> np.ndarray:
    """(S,) Bradley–Terry log-strengths of the population of prompts (``Arena.population_wins``,
    as if every pair had been judged a million times on prompts drawn from it): the order and
    the differences a study's prompts are a sample of. With prompt types, cycles or ties it
    differs from ``population_scores`` (the study's own prompts) and is what a claim about the
    systems, not about the study's prompts, is about."""
    return fit_scores(arena.population_wins() * 1e6, prior_ties=FIT_PRIOR_TIES)


def _fit_score(arena: Arena, order) -> dict:
    quality = score(arena, order, None)
    return dict(tau_fit=quality["tau"], wrong_adjacent_fit=quality["wrong_adjacent"])


def score(arena: Arena, order, above: np.ndarray | None) -> dict:
    """Quality of an order (system indices, best first) and of a partial order ``above``
    ((S, S) bool over system indices, [i, j] = i decided above j; None = no decision)."""
    size = len(arena.names)
    truth = arena.true_order
    place = np.empty(size, dtype=np.int64)
    place[list(order)] = np.arange(size)
    tau = float(kendalltau(place[list(truth)], np.arange(size)).statistic)
    wrong = sum(int(place[a] > place[b]) for a, b in zip(truth, truth[1:]))
    if above is None:
        return dict(tau=tau, wrong_adjacent=wrong, resolved_adjacent=0, ordered_pairs=0, false_pairs=0)
    resolved = sum(int(above[a, b]) for a, b in zip(truth, truth[1:]))
    stronger = arena.strengths[:, None] > arena.strengths[None, :]
    return dict(tau=tau, wrong_adjacent=wrong, resolved_adjacent=resolved, ordered_pairs=int(above.sum()),
                false_pairs=int((above & ~stronger).sum()))


def _adjacent(arena: Arena) -> set[tuple[int, int]]:
    """Pairs of neighbours in the true order, as (smaller index, larger index)."""
    truth = arena.true_order
    return {(min(a, b), max(a, b)) for a, b in zip(truth, truth[1:])}


def _compare(arena: Arena, settings: RankingSettings, metric: bool, level_systems: int):
    prompts = len(arena.items)

    def compare(i: int, j: int, stage: str) -> PairOutcome:
        """Systems i and j (indices, oriented as given: +1 = i better) in ``stage``."""
        cap = settings.capacity(stage, prompts)
        return decide_pair(arena.human(i, j), settings=settings.protocol(level_systems, cap),
                           order=item_order(settings.seed, i, j, prompts, cap),
                           metric=arena.metric_labels(i, j) if metric else None)

    return compare


def _all_pairs_order(size: int, outcomes: Mapping[tuple[int, int], PairOutcome]) -> tuple[np.ndarray, np.ndarray]:
    """An all-pairs run's own order and partial order from every pair's outcome ((i, j), i < j,
    +1 = i better): order by decided wins minus losses (Copeland), then the share of won
    labels; ``above`` (S, S) the direct decisions (every pair was run)."""
    above = np.zeros((size, size), dtype=bool)
    copeland, won, judged = np.zeros(size), np.zeros(size), np.zeros(size)
    for (i, j), outcome in outcomes.items():
        if outcome.decision:
            winner, loser = (i, j) if outcome.decision > 0 else (j, i)
            above[winner, loser] = True
            copeland[winner] += 1
            copeland[loser] -= 1
        won[i] += outcome.margin
        won[j] -= outcome.margin
        judged[[i, j]] += outcome.labels
    return np.lexsort((np.arange(size), -won / np.maximum(judged, 1), -copeland)), above


def replay_all_pairs(arena: Arena, settings: RankingSettings, *, metric: bool = False,
                     family: bool = False) -> DesignResult:
    """Every pair run to its end (``settings.max_labels`` caps it) at level gamma, or with
    ``family`` at gamma / (k (k - 1) / 2): Bonferroni over all pairs, the all-pairs protocol
    with the ranking's family-wise statement."""
    began = time.perf_counter()
    size = len(arena.names)
    pairs = size * (size - 1) // 2
    level = settings.gamma / pairs if family else settings.gamma
    prompts = len(arena.items)
    cap = settings.capacity(REFINE, prompts)
    protocol = replace(settings.protocol(size, cap), gamma=level)

    def compare(i: int, j: int, stage: str) -> PairOutcome:
        return decide_pair(arena.human(i, j), settings=protocol, order=item_order(settings.seed, i, j, prompts, cap),
                           metric=arena.metric_labels(i, j) if metric else None)

    outcomes = {(i, j): compare(i, j, REFINE) for i in range(size) for j in range(i + 1, size)}
    order, above = _all_pairs_order(size, outcomes)
    spent = {pair: outcome.labels for pair, outcome in outcomes.items()}
    adjacent = _adjacent(arena)
    return DesignResult(design="all_pairs_fwer" if family else "all_pairs", systems=size, prompts=prompts,
                        seed=arena.spec.seed, metric=metric, labels=sum(spent.values()),
                        adjacent_labels=sum(n for pair, n in spent.items() if pair in adjacent),
                        **score(arena, order, above),
                        pairs_asked=pairs, level=level,
                        seconds=time.perf_counter() - began,
                        **_fit_score(arena, fitted_order(arena, spent, seed=settings.seed)))


def replay_all_pairs_ebh(arena: Arena, settings: RankingSettings, *, metric: bool = False) -> DesignResult:
    """Every pair run together through the protocol's loop with the app's default family
    control, e-BH over the study's pairs at gamma (false discovery rate <= gamma): a pair's
    bar depends on the others' evidence, so the pairs cannot be run one by one. Each round's
    labels are the next items of the pair in ``item_order(settings.seed, ...)``; a run capped
    at ``settings.max_labels``."""
    began = time.perf_counter()
    size, prompts = len(arena.names), len(arena.items)
    cap = settings.capacity(REFINE, prompts)
    names = arena.names
    capacities = {(names[i], names[j]): cap for i in range(size) for j in range(i + 1, size)}
    labels_of = None
    if metric:
        labels_of = {(names[i], names[j]): {str(t): int(v) for t, v in enumerate(arena.metric_labels(i, j))}
                     for i in range(size) for j in range(i + 1, size)}
    protocol = ProtocolSettings(budget=len(capacities) * cap, batch=settings.batch, gamma=settings.gamma,
                                policy="adaptive", rule="eprocess", family="ebh", seed=settings.seed)
    index = {name: n for n, name in enumerate(names)}

    def collect(state, want):
        for (a, b), quota in want.items():
            i, j = index[a], index[b]
            taken = state.pair(a, b).judgements
            items = item_order(settings.seed, i, j, prompts)[taken: taken + quota]
            yield a, b, [str(t) for t in items], arena.human(i, j)[items]

    state = run_rounds(start(protocol, capacities, labels_of), collect, decide=human_theta)
    outcomes = {(index[p.first], index[p.second]): pair_outcome(p) for p in state.pairs}
    order, above = _all_pairs_order(size, outcomes)
    spent = {pair: outcome.labels for pair, outcome in outcomes.items()}
    adjacent = _adjacent(arena)
    return DesignResult(design="all_pairs_ebh", systems=size, prompts=prompts, seed=arena.spec.seed, metric=metric,
                        labels=int(state.spent), adjacent_labels=int(sum(n for p, n in spent.items() if p in adjacent)),
                        **score(arena, order, above), pairs_asked=len(capacities), level=settings.gamma,
                        seconds=time.perf_counter() - began,
                        **_fit_score(arena, fitted_order(arena, spent, seed=settings.seed)))


def initial_order(arena: Arena, *, metric: bool, seed: int) -> np.ndarray:
    """The sort's starting order: by mean metric score (best first) with the metric, else a
    seeded shuffle (system indices)."""
    return start_order(len(arena.names), seed=seed, scores=arena.metric.mean(axis=1) if metric else None)


def replay_ranking(arena: Arena, settings: RankingSettings, *, metric: bool = False) -> DesignResult:
    began = time.perf_counter()
    size = len(arena.names)
    start = initial_order(arena, metric=metric, seed=settings.seed)
    by_system = _compare(arena, settings, metric, size)
    result = rank([arena.names[s] for s in start], lambda i, j, stage: by_system(int(start[i]), int(start[j]), stage), settings)
    index = {name: s for s, name in enumerate(arena.names)}
    order = [index[name] for name in result.order]
    above = np.zeros((size, size), dtype=bool)
    above[np.ix_(start, start)] = result.above
    adjacent = _adjacent(arena)
    by_systems = {tuple(sorted((int(start[i]), int(start[j])))): n for (i, j), n in result.spent.items()}
    adjacent_labels = sum(n for pair, n in by_systems.items() if pair in adjacent)
    return DesignResult(design="ranking", systems=size, prompts=len(arena.items), seed=arena.spec.seed,
                        metric=metric, labels=result.labels, adjacent_labels=adjacent_labels,
                        **score(arena, order, above),
                        pairs_asked=result.runs, level=result.level,
                        seconds=time.perf_counter() - began,
                        **_fit_score(arena, fitted_order(arena, by_systems, seed=settings.seed)))


def replay_active(arena: Arena, settings: ActiveSettings, *, metric: bool = False, seed: int = 0,
                  batch: int = 50, by_kind: bool = False) -> DesignResult:
    """The active Bradley–Terry design (protocol.active_ranking) run to its stop, its rounds
    closing in the order they were opened (the design redone after each close): a round's
    labels are the next items of its pair in ``item_order(seed, ...)``; then every
    sampled pair's labels go through the per-pair e-process at ``settings.decision_level``
    (betting on the metric's labels with ``metric``), whose decisions and their transitive
    closure are the partial order scored. The design's own order is its fit. ``by_kind``: the
    design knows every prompt's kind (``Arena.kinds``), takes a pair's items in turns over the
    kinds and states the kinds' uncertainty (``active_ranking.fit_by_kind``)."""
    began = time.perf_counter()
    size, prompts = len(arena.names), len(arena.items)
    start = initial_order(arena, metric=metric, seed=seed)
    kinds = arena.kinds if by_kind else None
    step, spent = active_run(arena.human, items=prompts, start=start, settings=settings, seed=seed, kinds=kinds)
    level = settings.decision_level(size)
    above = active_decided(spent, arena.human, arena.metric_labels if metric else None, items=prompts,
                           systems=size, settings=settings, seed=seed, batch=batch, kinds=kinds)
    adjacent = _adjacent(arena)
    confident = [n for n in step.neighbours if n.status == ORDERED]
    resolved = [n for n in step.neighbours if n.status in (ORDERED, CLOSE)]
    strengths = population_scores(arena) if resolved else np.zeros(size)
    population = true_scores(arena) if resolved else np.zeros(size)
    fitted = step.order if by_kind else fitted_order(arena, spent, seed=seed)
    return DesignResult(design="active", systems=size, prompts=prompts, seed=arena.spec.seed, metric=metric,
                        labels=int(sum(spent.values())),
                        adjacent_labels=int(sum(n for pair, n in spent.items() if pair in adjacent)),
                        **score(arena, step.order, above), pairs_asked=len(spent), level=level,
                        seconds=time.perf_counter() - began, **_fit_score(arena, fitted),
                        stated_misordered=step.expected_misordered,
                        confident_neighbours=len(confident),
                        confident_wrong=sum(arena.truth(n.upper, n.lower) <= 0 for n in confident),
                        resolved_neighbours=len(resolved),
                        resolved_wrong=int(sum(strengths[n.upper] - strengths[n.lower] < -settings.resolution
                                               for n in resolved)),
                        resolved_wrong_direct=int(sum(arena.log_odds(n.upper, n.lower) < -settings.resolution
                                                      for n in resolved)),
                        resolved_wrong_population=int(sum(population[n.upper] - population[n.lower]
                                                          < -settings.resolution for n in resolved)))


def replay_uniform(arena: Arena, labels: int, *, seed: int) -> DesignResult:
    """``labels`` labels on uniformly random pairs and items, ordered by Bradley–Terry."""
    began = time.perf_counter()
    size, prompts = len(arena.names), len(arena.items)
    rng = np.random.default_rng([seed, 17])
    first, second = np.triu_indices(size, k=1)
    chosen = rng.integers(0, len(first), labels)
    items = rng.integers(0, prompts, labels)
    values = np.empty(labels, dtype=np.int64)
    for p in np.unique(chosen):
        where = chosen == p
        values[where] = arena.human(int(first[p]), int(second[p]))[items[where]]
    scores = fit_scores(win_matrix(size, first[chosen], second[chosen], values))
    order = np.lexsort((np.arange(size), -scores))
    fitted = _fit(size, first[chosen], second[chosen], values)
    return DesignResult(design="uniform", systems=size, prompts=prompts, seed=arena.spec.seed, metric=False,
                        labels=int(labels), adjacent_labels=0, **score(arena, order, None), pairs_asked=len(np.unique(chosen)),
                        level=float("nan"), seconds=time.perf_counter() - began, **_fit_score(arena, fitted))


def replay_neighbours_oracle(arena: Arena, per_pair: int, *, seed: int) -> DesignResult:
    """A reference no design can run: ``per_pair`` labels on each of the k - 1 pairs of
    neighbours in the TRUE order (the pairs no other decision can imply), and nothing else,
    ordered by the fit of those labels. What ordering the neighbours costs when finding the
    order is free."""
    began = time.perf_counter()
    size, prompts = len(arena.names), len(arena.items)
    if not 0 < per_pair <= prompts:
        raise ValueError(f"per_pair must lie in [1, {prompts}], got {per_pair}")
    spent = {pair: per_pair for pair in _adjacent(arena)}
    order = fitted_order(arena, spent, seed=seed)
    labels = per_pair * len(spent)
    return DesignResult(design="oracle", systems=size, prompts=prompts, seed=arena.spec.seed, metric=False,
                        labels=labels, adjacent_labels=labels, **score(arena, order, None),
                        pairs_asked=len(spent), level=float("nan"), seconds=time.perf_counter() - began,
                        **_fit_score(arena, order))


def replay(spec: ArenaSpec, settings: RankingSettings, *, metric_variants=(False, True),
           family: bool = True) -> list[DesignResult]:
    """All designs on the arena of ``spec``: all-pairs (per-pair gamma, as the protocol decides
    each pair), the ranking design (at ``settings``), uniform random pairs at the human-only
    ranking's label count; each with and without the metric as asked."""
    arena = make_arena(spec)
    settings = replace(settings, seed=spec.seed)
    out = []
    for metric in metric_variants:
        # all pairs: each pair run to its end at level gamma (the protocol's per-pair statement)
        # and at gamma / pairs (the ranking's family-wise statement)
        out.append(replay_all_pairs(arena, settings, metric=metric))
        if family:
            out.append(replay_all_pairs(arena, settings, metric=metric, family=True))
        out.append(replay_ranking(arena, settings, metric=metric))
    ranked = next(r for r in out if r.design == "ranking")
    out.append(replay_uniform(arena, ranked.labels, seed=spec.seed))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.arena_replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--gap", type=float, default=ArenaSpec.gap)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--error", choices=("fwer", "per_pair"), default="fwer")
    parser.add_argument("--sort-labels", type=int, default=RankingSettings.sort_labels,
                        help="most labels per comparison of the sort stage (0 = uncapped, no refinement)")
    parser.add_argument("--max-labels", type=int, default=0, help="most labels per pair (0 = all prompts)")
    parser.add_argument("--human-only", action="store_true", help="skip the metric variants")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    try:
        settings = RankingSettings(gamma=args.gamma, error=args.error, sort_labels=args.sort_labels,
                                   max_labels=args.max_labels)
        specs = [ArenaSpec(systems=args.systems, prompts=args.prompts, seed=seed, gap=args.gap) for seed in args.seeds]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for spec in specs:
        for row in replay(spec, settings, metric_variants=(False,) if args.human_only else (False, True)):
            if args.json:
                print(json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                  for k, v in asdict(row).items()}), flush=True)
            else:
                print(f"{row.design:10s} metric={int(row.metric)} seed={row.seed} labels={row.labels:7d} "
                      f"adj_labels={row.adjacent_labels:6d} tau={row.tau:.3f} wrong_adj={row.wrong_adjacent:2d} resolved_adj={row.resolved_adjacent:2d} "
                      f"ordered={row.ordered_pairs:4d} false={row.false_pairs} asked={row.pairs_asked} "
                      f"{row.seconds:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
