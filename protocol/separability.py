"""Separability of a comparison (Separability paper §2, App. D; docs/formulas.md §7).

For one input, system A has k sampled outputs a_1..a_k and system B has l outputs b_1..b_l.

- self-alignment  a(A, A) = mean over ordered i != j of s(a_i, a_j)
- cross-alignment a(A, B) = mean over all i, j of s(a_i, b_j)
- separability    δ = max(a(A, A), a(B, B)) − a(A, B)

Alignments of a *set* of comparisons are min-max normalised with one min and one max pooled
over all three columns (the paper's released code), so normalised δ ∈ [-1, 1].
``paper_compat=True`` reproduces that code's cross-alignment: it scores only i <= j and
mirrors the matrix, i.e. uses s(a_min(i,j), b_max(i,j)) for cell (i, j). That is NOT symmetric
in the two systems, which is why it is off by default.

Command line (``python -m protocol.separability --help``)::

    python -m protocol.separability BUNDLE --similarity rouge1 [--json]
    python -m protocol.separability --bench [--comparisons 1000] [--samples 5]

The bundle form prints one JSON object per (item, first, second) with at least two samples
per side: ``{"item", "first", "second", "self_first", "self_second", "cross",
"separability"}`` — all normalised over the bundle.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from protocol.bundle import BundleError, read_bundle
from protocol.similarity import PairSimilarity, get_similarity, similarity_names

# Starting spawned workers costs seconds (imports), so only large jobs gain from them
# (measured on 2 cores with ROUGE-1: docs/benchmarks.md, "The statistics").
PARALLEL_MIN_PAIRS = 150_000
CHUNK_PAIRS = 5_000


@dataclass(frozen=True)
class Alignments:
    """Self- and cross-alignments of n comparisons; every array has shape (n,)."""

    self_first: np.ndarray
    self_second: np.ndarray
    cross: np.ndarray

    @property
    def separability(self) -> np.ndarray:
        """δ = max(self_first, self_second) − cross; shape (n,)."""
        return separability(self.self_first, self.self_second, self.cross)

    def normalised(self) -> "Alignments":
        """The three columns min-max normalised with one pooled min and max."""
        return Alignments(*normalise(self.self_first, self.self_second, self.cross))

    def swapped(self) -> "Alignments":
        """The same comparisons with the two systems exchanged."""
        return Alignments(self.self_second, self.self_first, self.cross)

    def __len__(self) -> int:
        return len(self.cross)


@dataclass(frozen=True)
class ComparisonSeparability:
    """Separability of every (item, first, second) of a bundle with >= 2 samples per side.

    comparisons  tuple of (item, first system, second system), length n, canonical order
    raw          alignments as the similarity gives them
    normalised   alignments min-max normalised over all n comparisons
    """

    comparisons: tuple[tuple[str, str, str], ...]
    raw: Alignments
    normalised: Alignments
    similarity: str

    @property
    def separability(self) -> np.ndarray:
        """Normalised δ of every comparison; shape (n,)."""
        return self.normalised.separability

    def rows(self) -> list[dict]:
        """One dict per comparison in the command-line JSON format."""
        n = self.normalised
        delta = n.separability
        return [
            {
                "item": item,
                "first": first,
                "second": second,
                "self_first": float(n.self_first[i]),
                "self_second": float(n.self_second[i]),
                "cross": float(n.cross[i]),
                "separability": float(delta[i]),
            }
            for i, (item, first, second) in enumerate(self.comparisons)
        ]


def self_alignment(scores: np.ndarray) -> np.ndarray:
    """Mean off-diagonal similarity; scores (..., k, k) with k >= 2 -> (...)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim < 2 or scores.shape[-1] != scores.shape[-2] or scores.shape[-1] < 2:
        raise ValueError(f"self-alignment needs square (..., k, k) scores with k >= 2, got shape {scores.shape}")
    k = scores.shape[-1]
    diagonal = np.trace(scores, axis1=-2, axis2=-1)
    return (scores.sum(axis=(-2, -1)) - diagonal) / (k * (k - 1))


def cross_alignment(scores: np.ndarray, *, paper_compat: bool = False) -> np.ndarray:
    """Mean similarity over all sample pairs; scores (..., k, l), [i, j] = s(a_i, b_j) -> (...).

    ``paper_compat``: the released code's value, which reads cell (i, j) as
    s(a_min(i,j), b_max(i,j)) (needs k == l).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim < 2 or 0 in scores.shape[-2:]:
        raise ValueError(f"cross-alignment needs (..., k, l) scores with k, l >= 1, got shape {scores.shape}")
    if not paper_compat:
        return scores.mean(axis=(-2, -1))
    k = scores.shape[-1]
    if scores.shape[-2] != k:
        raise ValueError(f"paper_compat cross-alignment needs as many samples per side, got shape {scores.shape}")
    upper = np.triu(scores)
    mirrored = upper + np.swapaxes(np.triu(scores, 1), -1, -2)
    return mirrored.mean(axis=(-2, -1))


def separability(self_first: np.ndarray, self_second: np.ndarray, cross: np.ndarray) -> np.ndarray:
    """δ = max(self_first, self_second) − cross, elementwise; shapes (n,) -> (n,)."""
    return np.maximum(np.asarray(self_first, float), np.asarray(self_second, float)) - np.asarray(cross, float)


def normalise(
    self_first: np.ndarray, self_second: np.ndarray, cross: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min-max normalise the three (n,) columns with one min and one max pooled over all.

    When every value is equal there is nothing to tell apart: all results are 0.
    """
    columns = [np.asarray(c, dtype=float) for c in (self_first, self_second, cross)]
    if not (columns[0].shape == columns[1].shape == columns[2].shape) or columns[0].ndim != 1:
        raise ValueError(f"alignment columns must share one shape (n,), got {[c.shape for c in columns]}")
    stacked = np.stack(columns)
    if not np.all(np.isfinite(stacked)):
        raise ValueError("alignments contain NaN or infinite values")
    if stacked.size == 0:
        return tuple(columns)
    low, high = stacked.min(), stacked.max()
    if high == low:
        return tuple(np.zeros_like(c) for c in columns)
    return tuple((c - low) / (high - low) for c in columns)


def _pair_plan(first_samples, second_samples, paper_compat):
    """Flat list of text pairs, and for each the comparison, column (0 self-first, 1
    self-second, 2 cross) and weight, so each alignment is one weighted bincount."""
    left: list[str] = []
    right: list[str] = []
    owner: list[int] = []
    column: list[int] = []
    weight: list[float] = []
    for n, (a, b) in enumerate(zip(first_samples, second_samples)):
        a, b = list(a), list(b)
        k, l = len(a), len(b)
        if k < 2 or l < 2:
            raise ValueError(f"comparison {n} has {k} and {l} samples; self-alignment needs at least 2 per side")
        for col, texts in ((0, a), (1, b)):
            m = len(texts)
            # s is symmetric, so the mean over ordered i != j is the mean over i < j.
            for i in range(m):
                for j in range(i + 1, m):
                    left.append(texts[i]); right.append(texts[j])
                    owner.append(n); column.append(col); weight.append(2.0 / (m * (m - 1)))
        if paper_compat:
            if k != l:
                raise ValueError(f"comparison {n}: paper_compat needs as many samples per side, got {k} and {l}")
            for i in range(k):
                for j in range(i, k):
                    left.append(a[i]); right.append(b[j])
                    owner.append(n); column.append(2); weight.append((1.0 if i == j else 2.0) / (k * k))
        else:
            for i in range(k):
                for j in range(l):
                    left.append(a[i]); right.append(b[j])
                    owner.append(n); column.append(2); weight.append(1.0 / (k * l))
    return left, right, np.array(owner, dtype=int), np.array(column, dtype=int), np.array(weight)


_WORKER_SIMILARITY: PairSimilarity | None = None


def _init_worker(name: str) -> None:
    global _WORKER_SIMILARITY
    _WORKER_SIMILARITY = get_similarity(name)


def _score_chunk(first: list[str], second: list[str]) -> np.ndarray:
    return _WORKER_SIMILARITY(first, second)


def score_pairs(
    similarity: str | PairSimilarity,
    first: Sequence[str],
    second: Sequence[str],
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Similarity of many text pairs, over several processes when there are many; shape (n,).

    ``workers``: None = all CPU cores when there are at least PARALLEL_MIN_PAIRS distinct
    pairs (else 1). Worker processes need a similarity given by name.
    ``progress(done, total)`` is called as chunks of distinct pairs finish.
    """
    keys = [(a, b) if a <= b else (b, a) for a, b in zip(first, second)]
    unique = list(dict.fromkeys(keys))
    if workers is None:
        workers = (os.cpu_count() or 1) if len(unique) >= PARALLEL_MIN_PAIRS else 1
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    name = similarity if isinstance(similarity, str) else None
    chunks = [unique[i:i + CHUNK_PAIRS] for i in range(0, len(unique), CHUNK_PAIRS)]
    if workers == 1 or name is None or len(chunks) < 2:
        scorer = get_similarity(similarity) if isinstance(similarity, str) else similarity
        results, done = [], 0
        for chunk in chunks:
            results.append(scorer([p[0] for p in chunk], [p[1] for p in chunk]))
            done += len(chunk)
            if progress:
                progress(done, len(unique))
    else:
        get_similarity(name)  # fail here, in the caller, on an unknown or unavailable name
        # spawn, not fork: the caller may hold threads (jax, torch, a web server).
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(workers, len(chunks)), mp_context=context, initializer=_init_worker, initargs=(name,)
        ) as pool:
            futures = [pool.submit(_score_chunk, [p[0] for p in c], [p[1] for p in c]) for c in chunks]
            sizes = {future: len(chunk) for future, chunk in zip(futures, chunks)}
            done = 0
            for future in concurrent.futures.as_completed(futures):
                done += sizes[future]
                if progress:
                    progress(done, len(unique))
            results = [f.result() for f in futures]
    table = dict(zip(unique, np.concatenate(results).tolist())) if unique else {}
    return np.fromiter((table[k] for k in keys), dtype=float, count=len(keys))


def compute_alignments(
    first_samples: Sequence[Sequence[str]],
    second_samples: Sequence[Sequence[str]],
    similarity: str | PairSimilarity = "rouge1",
    *,
    paper_compat: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Alignments:
    """Raw alignments of n comparisons.

    first_samples[n], second_samples[n]  the sampled texts of each system for comparison n
    (each >= 2; sample counts may differ between comparisons and sides unless paper_compat).
    Returns Alignments with arrays of shape (n,).
    """
    if isinstance(first_samples, str) or isinstance(second_samples, str):
        raise ValueError("pass one sequence of sample texts per comparison, not a string")
    first_samples, second_samples = list(first_samples), list(second_samples)
    if len(first_samples) != len(second_samples):
        raise ValueError(
            f"first_samples and second_samples must list the same comparisons, got {len(first_samples)} and {len(second_samples)}"
        )
    n = len(first_samples)
    left, right, owner, column, weight = _pair_plan(first_samples, second_samples, paper_compat)
    scores = score_pairs(similarity, left, right, workers=workers, progress=progress)
    sums = np.bincount(owner * 3 + column, weights=scores * weight, minlength=3 * n).reshape(n, 3)
    return Alignments(sums[:, 0], sums[:, 1], sums[:, 2])


def bundle_comparisons(bundle) -> tuple[list[tuple[str, str, str]], list[list[str]], list[list[str]]]:
    """Every (item, first, second) of a bundle whose two systems have >= 2 samples there,
    with their sample texts in sample order (first < second by system name)."""
    samples: dict[str, dict[str, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    for output in bundle.outputs:
        samples[output.item][output.system].append((output.sample, output.text))
    comparisons, first_texts, second_texts = [], [], []
    for item in bundle.items:
        by_system = samples.get(item.id, {})
        systems = sorted(s for s, rows in by_system.items() if len(rows) >= 2)
        for i, first in enumerate(systems):
            for second in systems[i + 1:]:
                comparisons.append((item.id, first, second))
                first_texts.append([t for _, t in sorted(by_system[first])])
                second_texts.append([t for _, t in sorted(by_system[second])])
    return comparisons, first_texts, second_texts


def bundle_separability(
    bundle,
    similarity: str | PairSimilarity = "rouge1",
    *,
    paper_compat: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ComparisonSeparability:
    """Separability of every comparison in a study bundle (``protocol.bundle.Bundle``),
    normalised over the whole bundle. Comparisons with fewer than 2 samples are left out."""
    comparisons, first_texts, second_texts = bundle_comparisons(bundle)
    raw = compute_alignments(
        first_texts, second_texts, similarity, paper_compat=paper_compat, workers=workers, progress=progress
    )
    name = similarity if isinstance(similarity, str) else similarity.name
    return ComparisonSeparability(tuple(comparisons), raw, raw.normalised(), name)


# --- benchmark -----------------------------------------------------------------------------

_BENCH_VOCABULARY = (
    "the a of to and in for on with that was is said police report government people year "
    "new city official family court children company million state week told found two "
    "after before during since while women men school hospital team game season win loss "
    "storm fire water road car plane flight minister president election vote campaign law "
    "study research scientists data health doctors patients virus drug price market bank"
).split()


def synthetic_comparisons(comparisons: int, samples: int, *, words: int = 60, seed: int = 0):
    """Texts shaped like sampled summaries: per comparison a shared 'document' vocabulary,
    each system's samples perturb its own draft. Returns (first_samples, second_samples)."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array(_BENCH_VOCABULARY + [f"name{i}" for i in range(2000)])
    first_samples, second_samples = [], []
    for _ in range(comparisons):
        document = rng.choice(vocabulary, size=150)
        sides = []
        for _side in range(2):
            draft = rng.choice(document, size=words)
            texts = []
            for _s in range(samples):
                text = draft.copy()
                changed = rng.random(words) < 0.3
                text[changed] = rng.choice(document, size=int(changed.sum()))
                texts.append(" ".join(text) + ".")
            sides.append(texts)
        first_samples.append(sides[0])
        second_samples.append(sides[1])
    return first_samples, second_samples


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options (so ``protocol.bench`` can offer ``separability`` as a sub-command)."""
    parser.add_argument("--comparisons", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=5, help="samples per system and comparison")
    parser.add_argument("--similarity", default="rouge1", choices=similarity_names())
    parser.add_argument("--workers", type=int, default=None, help="processes (default: all cores when large)")


def run(args: argparse.Namespace) -> dict:
    """Time separability of synthetic comparisons; returns one flat dict of numbers."""
    first, second = synthetic_comparisons(args.comparisons, args.samples)
    start = time.perf_counter()
    raw = compute_alignments(first, second, args.similarity, workers=args.workers)
    delta = raw.normalised().separability
    seconds = time.perf_counter() - start
    pairs = len(first) * (args.samples * (args.samples - 1) + args.samples**2)
    return {
        "comparisons": args.comparisons,
        "samples": args.samples,
        "similarity": args.similarity,
        "text_pairs": pairs,
        "workers": args.workers if args.workers else "auto",
        "cpu_count": os.cpu_count(),
        "seconds": round(seconds, 3),
        "mean_separability": round(float(delta.mean()), 4),
    }


# --- command line ---------------------------------------------------------------------------

def _progress_printer() -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        print(f"separability: {done}/{total} text pairs scored", file=sys.stderr, flush=True)

    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.separability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", nargs="?", help="study bundle (.jsonl or .jsonl.gz)")
    parser.add_argument("--bench", action="store_true", help="time synthetic comparisons instead")
    parser.add_argument("--paper-compat", action="store_true", help="released code's cross-alignment")
    parser.add_argument("--json", action="store_true", help="JSON lines (the default) / one JSON object for --bench")
    add_arguments(parser)
    args = parser.parse_args(argv)

    if args.bench:
        result = run(args)
        if args.json:
            print(json.dumps(result))
        else:
            for key, value in result.items():
                print(f"{key:<18}  {value}")
        return 0
    if not args.bundle:
        parser.error("give a BUNDLE, or --bench")

    try:
        bundle = read_bundle(args.bundle)
    except (BundleError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = bundle_separability(
        bundle, args.similarity, paper_compat=args.paper_compat, workers=args.workers, progress=_progress_printer()
    )
    if not result.comparisons:
        print("error: no (item, system pair) with at least 2 samples per system", file=sys.stderr)
        return 1
    for row in result.rows():
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
