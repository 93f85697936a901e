"""The by-kind active design's close claims that the population reverses by more than r, and
its estimate of sigma^2 (issue 39, docs/ranking-results.md "When the model does not hold").

    nice -n 10 .venv/bin/python scripts/report/ranking_kind_claims.py [--kinds 10] [--seeds 30]

For each seed the arena of ``ranking_robust.py`` (20 systems x 1,000 prompts, gap 0.3, K kinds
of effect sd 0.5) runs the design told the kinds (``active_run(kinds=)``) at its defaults.
Printed: every resolved neighbour the population's scores (``true_scores``) reverse by more
than r, with the posterior P(reversed by more than r) it was claimed at, its labels, the kinds'
share of its variance and its difference on the study's prompts (``population_scores``); then
per seed sigma^2 by ``fit_by_kind``'s moment estimator from the design's labels, the same with
a tie's own variance (a tie, 1/2, varies less than a win or a loss) in the sampling variance,
and the first from all 1,000 labels of the same pairs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.special import ndtr

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.active_ranking import (CLOSE, ORDERED, ActiveSettings, active_run, add_labels, counts_ties,  # noqa: E402
                                     counts_wins, empty_counts, run_order, step_fit)
from protocol.arena import ArenaSpec, make_arena  # noqa: E402
from protocol.arena_replay import initial_order, population_scores, true_scores  # noqa: E402


def moment_sigma2(wins: np.ndarray, ties: np.ndarray, with_ties: bool) -> float:
    """fit_by_kind's estimate of sigma^2 (with_ties: the sampling variance from the labels' values)."""
    counts = wins + wins.transpose(0, 2, 1)
    first, second = np.nonzero(np.triu(np.all(counts >= 2, axis=0), k=1))
    n = counts[:, first, second]
    share = wins[:, first, second] / n
    square = share - ties[:, first, second] / (4 * n) if with_ties else share
    between = share.var(axis=0, ddof=1) - np.mean((square - share ** 2) / (n - 1), axis=0)
    mean = share.mean(axis=0)
    slope = np.maximum(mean * (1 - mean), 0.05)
    weight = n.sum(axis=0)
    return max(0.0, float(np.sum(weight * between / slope ** 2) / np.sum(weight)) / 2)


def counted(arena, pairs, kinds, kind_count, size):
    """(wins, ties) of the labels of ``pairs`` ((i, j), item indices), counted as the design does."""
    counts = empty_counts(size, kind_count)
    for (i, j), items in pairs:
        add_labels(counts, i, j, arena.human(i, j)[items], kinds[items])
    return counts_wins(counts), counts_ties(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args(argv)
    settings, size, prompts = ActiveSettings(), 20, 1000
    resolved = wrong = 0
    for seed in range(args.seeds):
        arena = make_arena(ArenaSpec(systems=size, prompts=prompts, seed=seed, gap=0.3, prompt_types=args.kinds,
                                     type_sd=0.5))
        kinds = np.unique(arena.kinds, return_inverse=True)[1]
        step, spent = active_run(arena.human, items=prompts, start=initial_order(arena, metric=False, seed=seed),
                                 settings=settings, seed=seed, kinds=arena.kinds)
        taken = [((i, j), run_order(seed, i, j, prompts, kinds)[:t]) for (i, j), t in spent.items()]
        wins, ties = counted(arena, taken, kinds, args.kinds, size)
        full = [((i, j), np.arange(prompts)) for (i, j), t in spent.items() if t >= 2 * args.kinds]
        wins_all, ties_all = counted(arena, full, kinds, args.kinds, size)
        fitted = step_fit(wins, settings, ties)
        population, study = true_scores(arena), population_scores(arena)
        for n in step.neighbours:
            if n.status not in (ORDERED, CLOSE):
                continue
            resolved += 1
            a, b = n.upper, n.lower
            if population[a] - population[b] >= -settings.resolution:
                continue
            wrong += 1
            labels, kind_part = fitted._variance(fitted.covariance, a, b), fitted._variance(fitted.kinds, a, b)
            print(f"seed {seed} {a} above {b} ({n.status}): P(reversed beyond r) {ndtr(-n.margin):.3f}, "
                  f"{spent.get((min(a, b), max(a, b)), 0)} labels on the pair, kinds' share "
                  f"{kind_part / (labels + kind_part):.2f}, difference {n.difference:.3f} (population "
                  f"{population[a] - population[b]:.3f}, study's prompts {study[a] - study[b]:.3f})")
        print(f"seed {seed} sigma^2: design {moment_sigma2(wins, ties, False):.3f}, with ties' variance "
              f"{moment_sigma2(wins, ties, True):.3f}, all labels of the same pairs "
              f"{moment_sigma2(wins_all, ties_all, False):.3f}")
    print(f"{wrong} of {resolved} resolved neighbours reversed beyond r in the population")
    return 0


if __name__ == "__main__":
    sys.exit(main())
