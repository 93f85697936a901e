"""Sign tests, significance DAGs over systems, and comparison of two decision sets.

Decisions are integers in canonical pair order (first < second by name): ``+1`` = first
significantly better, ``-1`` = second significantly better, ``0`` = no significant
difference (docs/formulas.md §3, §5).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .leaderboard import bradley_terry, natural_key, natural_sorted
from .preferences import sign_of_mean_per_item

CORRECT = "Correct"
INVERSION = "Inversion"
OMISSION = "Omission"
INSERTION = "Insertion"
CATEGORIES = (CORRECT, INVERSION, OMISSION, INSERTION)

_DECISIONS = (-1, 0, 1)


def _check_decision(value, what: str) -> int:
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} decision must be -1, 0 or 1, got {value!r}") from None
    if as_int != value or as_int not in _DECISIONS:
        raise ValueError(f"{what} decision must be -1, 0 or 1, got {value!r}")
    return as_int


def decision_category(reference: int, candidate: int) -> str:
    """Category of a candidate decision judged against a reference decision (docs/formulas.md §5).

    Correct: same significant direction, or neither significant. Inversion: opposite
    significant directions. Omission: reference significant, candidate not. Insertion:
    reference not significant, candidate significant.

    >>> [decision_category(1, c) for c in (1, 0, -1)], decision_category(0, 1)
    (['Correct', 'Omission', 'Inversion'], 'Insertion')
    """
    reference = _check_decision(reference, "reference")
    candidate = _check_decision(candidate, "candidate")
    if reference == candidate:
        return CORRECT
    if reference == 0:
        return INSERTION
    if candidate == 0:
        return OMISSION
    return INVERSION


def compare_decisions(
    reference: Mapping[tuple[str, str], int], candidate: Mapping[tuple[str, str], int]
) -> dict[tuple[str, str], str]:
    """Category of every pair of ``reference`` (keys (first, second) in canonical order).

    A pair missing from ``candidate`` counts as undecided (0) there; a candidate pair
    absent from the reference is an error, because it cannot be judged.
    """
    extra = set(candidate) - set(reference)
    if extra:
        raise ValueError(f"candidate has pairs missing from the reference: {sorted(extra)}")
    return {
        pair: decision_category(reference[pair], candidate.get(pair, 0)) for pair in reference
    }


def category_rates(categories: Mapping[tuple[str, str], str]) -> dict[str, float]:
    """Fraction of pairs in each category (keys lower-case: correct, inversion, ...)."""
    total = len(categories)
    counts = {name: 0 for name in CATEGORIES}
    for category in categories.values():
        counts[category] += 1
    return {name.lower(): (counts[name] / total if total else float("nan")) for name in CATEGORIES}


# --------------------------------------------------------------------------------------
# Sign tests (docs/formulas.md §3)

ASYMPTOTIC = "asymptotic"
EXACT = "exact"


@dataclass(frozen=True)
class SignTest:
    """Sign test of per-pair counts; every field has the shape of the count arrays.

    statistic: z = (n+ - n-) / sqrt(n+ + n-) (0 when n+ + n- = 0).
    p_value: two-sided p (normal approximation or exact binomial, by ``method``).
    decision: +1 first wins, -1 second wins, 0 not significant (int8).
    """

    statistic: np.ndarray
    p_value: np.ndarray
    decision: np.ndarray
    method: str
    alpha: float


def _counts(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be numeric counts, got dtype {array.dtype}")
    if not np.all(np.isfinite(array)) or np.any(array < 0) or np.any(array != np.round(array)):
        raise ValueError(f"{name} must be finite non-negative whole numbers")
    return array.astype(np.int64)


def sign_test(n_plus, n_minus, alpha: float = 0.05, method: str = ASYMPTOTIC) -> SignTest:
    """Two-sided sign test on wins of the first (n_plus) and second (n_minus) system.

    Ties are discarded (they are not arguments). n_plus, n_minus: arrays of the same shape
    (any shape, e.g. (P,) pairs). ``method="asymptotic"`` (default) decides by the normal
    approximation: first wins when Phi(z) > 1 - alpha/2, second wins when Phi(z) < alpha/2.
    ``method="exact"`` uses the exact two-sided binomial test, p < alpha.

    30 wins against 10 is a decision for the first system; 12 against 10 is none:

    >>> test = sign_test([30, 12], [10, 10])
    >>> test.decision.tolist(), test.p_value.round(4).tolist()
    ([1, 0], [0.0016, 0.6698])
    """
    if method not in (ASYMPTOTIC, EXACT):
        raise ValueError(f"method must be {ASYMPTOTIC!r} or {EXACT!r}, got {method!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    wins = _counts(n_plus, "n_plus")
    losses = _counts(n_minus, "n_minus")
    if wins.shape != losses.shape:
        raise ValueError(f"n_plus and n_minus differ in shape: {wins.shape} vs {losses.shape}")
    trials = wins + losses
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(trials > 0, (wins - losses) / np.sqrt(np.maximum(trials, 1)), 0.0)
    cdf = special.ndtr(z)
    if method == ASYMPTOTIC:
        p_value = np.minimum(1.0, 2.0 * np.minimum(cdf, 1.0 - cdf))
        decision = np.where(cdf > 1 - alpha / 2, 1, np.where(cdf < alpha / 2, -1, 0))
    else:
        # The Binomial(n, 1/2) null is symmetric, so the two-sided p is twice the smaller tail.
        lower = stats.binom.cdf(wins, trials, 0.5)
        upper = stats.binom.sf(wins - 1, trials, 0.5)
        p_value = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
        decision = np.where(p_value < alpha, np.sign(wins - losses), 0)
    return SignTest(
        statistic=np.asarray(z, dtype=float),
        p_value=np.asarray(p_value, dtype=float),
        decision=np.asarray(decision, dtype=np.int8),
        method=method,
        alpha=alpha,
    )


def share_interval(wins: int, losses: int, alpha: float = 0.05) -> tuple[float, float, float]:
    """The share of non-tied judgements preferring the first system: its posterior mean and
    central 1 - ``alpha`` credible interval under a uniform prior, Beta(wins + 1, losses + 1).

    >>> share, low, high = share_interval(3, 1)
    >>> round(share, 4), round(low, 4), round(high, 4)
    (0.6667, 0.2836, 0.9473)
    """
    low, high = stats.beta.ppf([alpha / 2, 1 - alpha / 2], wins + 1, losses + 1)
    return (wins + 1) / (wins + losses + 2), float(low), float(high)


def label_counts(values) -> np.ndarray:
    """(n+, n=, n-) of a label vector in {-1, 0, 1}."""
    values = np.asarray(values)
    if values.size and not np.all(np.isin(values, (-1, 0, 1))):
        raise ValueError("labels must all be -1, 0 or 1")
    return np.array([np.sum(values == 1), np.sum(values == 0), np.sum(values == -1)], dtype=np.int64)


def decisions_from_counts(
    counts: Mapping[tuple[str, str], object], alpha: float = 0.05, method: str = ASYMPTOTIC
) -> dict[tuple[str, str], int]:
    """Sign-test decision per pair from (n+, n=, n-) counts, one vectorised test for all pairs."""
    pairs = list(counts)
    if not pairs:
        return {}
    table = np.array([np.asarray(counts[p]).reshape(-1) for p in pairs])
    if table.ndim != 2 or table.shape[1] != 3:
        raise ValueError("counts must be (n+, n=, n-) per pair")
    result = sign_test(table[:, 0], table[:, 2], alpha=alpha, method=method)
    return {pair: int(d) for pair, d in zip(pairs, result.decision)}


def decisions_from_labels(
    labels: Mapping[tuple[str, str], object], alpha: float = 0.05, method: str = ASYMPTOTIC
) -> dict[tuple[str, str], int]:
    """Sign-test decision per pair from label tables (anything with a ``values`` array).

    Tables with an ``items`` array count every item once, labelled with the sign of the mean
    of its labels (protocol.preferences.sign_of_mean_per_item: the item is the unit).
    """
    def per_item(table):
        if getattr(table, "items", None) is None:
            return table.values
        return sign_of_mean_per_item(table.items, table.values)[1]

    return decisions_from_counts(
        {pair: label_counts(per_item(table)) for pair, table in labels.items()}, alpha, method
    )


# --------------------------------------------------------------------------------------
# Significance DAG (docs/formulas.md §3)


@dataclass(frozen=True)
class RankingGraph:
    """Significance graph over systems: an edge winner -> loser per significant pair.

    edges: all significant edges, sorted. reduced_edges: the transitive reduction (edges
    inside a cycle are kept; between cycles the condensation is reduced). cycles: groups of
    systems that beat each other round a cycle (empty for a DAG), each sorted.
    """

    systems: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    reduced_edges: tuple[tuple[str, str], ...]
    cycles: tuple[tuple[str, ...], ...]

    @property
    def is_acyclic(self) -> bool:
        return not self.cycles


def edges_from_decisions(decisions: Mapping[tuple[str, str], int]) -> tuple[tuple[str, str], ...]:
    """Winner -> loser for every pair decided +1 (first wins) or -1 (second wins)."""
    edges = []
    for (first, second), decision in decisions.items():
        decision = _check_decision(decision, f"pair ({first}, {second})")
        if decision == 1:
            edges.append((first, second))
        elif decision == -1:
            edges.append((second, first))
    return tuple(sorted(edges))


def _adjacency(systems: tuple[str, ...], edges) -> np.ndarray:
    index = {s: i for i, s in enumerate(systems)}
    adjacency = np.zeros((len(systems), len(systems)), dtype=bool)
    for winner, loser in edges:
        if winner not in index or loser not in index:
            raise ValueError(f"edge ({winner}, {loser}) names a system not in the system list")
        if winner == loser:
            raise ValueError(f"self-loop on {winner!r}")
        adjacency[index[winner], index[loser]] = True
    return adjacency


def _reachability(adjacency: np.ndarray) -> np.ndarray:
    """reach[i, j]: a path of length >= 1 leads from i to j (boolean closure by squaring)."""
    reach = adjacency.copy()
    while True:
        extended = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
        if np.array_equal(extended, reach):
            return reach
        reach = extended


def _components(reach: np.ndarray) -> np.ndarray:
    """Component label per node: nodes on a common cycle share the smallest member index."""
    same = (reach & reach.T) | np.eye(len(reach), dtype=bool)
    return np.argmax(same, axis=1)


def transitive_reduction(systems, edges) -> tuple[tuple[str, str], ...]:
    """Edges u -> v kept unless v is also reached from u through another node.

    On a graph with cycles the reduction is taken on the condensation (each cycle one
    node) and the edges inside a cycle are kept, so the result is well defined.
    """
    systems = tuple(systems)
    adjacency = _adjacency(systems, edges)
    reach = _reachability(adjacency)
    component = _components(reach)
    same_component = component[:, None] == component[None, :]
    # Component-level graph: c -> d if any edge crosses; reach between distinct components.
    between = adjacency & ~same_component
    component_reach = reach & ~same_component
    # An inter-component edge u -> v is redundant when some w in another component than
    # u and v is reached from u and reaches v.
    redundant = (
        (component_reach.astype(np.int64) @ component_reach.astype(np.int64)) > 0
    ) & between
    keep = (adjacency & same_component) | (between & ~redundant)
    return tuple(sorted((systems[i], systems[j]) for i, j in zip(*np.nonzero(keep))))


def find_cycles(systems, edges) -> tuple[tuple[str, ...], ...]:
    """Groups of systems (strongly connected, size >= 2) that lie on a common cycle."""
    systems = tuple(systems)
    reach = _reachability(_adjacency(systems, edges))
    component = _components(reach)
    groups: dict[int, list[str]] = {}
    for i, c in enumerate(component):
        groups.setdefault(int(c), []).append(systems[i])
    return tuple(sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1))


def significance_graph(systems, decisions: Mapping[tuple[str, str], int]) -> RankingGraph:
    """Significance graph of a set of systems from per-pair decisions (any order of systems).

    A beats B and C, B beats C: the edge A → C is implied, so the reduced graph drops it.

    >>> graph = significance_graph(["C", "B", "A"], {("A", "B"): 1, ("B", "C"): 1, ("A", "C"): 1})
    >>> graph.reduced_edges, graph.cycles
    ((('A', 'B'), ('B', 'C')), ())
    """
    systems = tuple(sorted(set(systems)))
    if not systems:
        raise ValueError("no systems given")
    edges = edges_from_decisions(decisions)
    return RankingGraph(
        systems=systems,
        edges=edges,
        reduced_edges=transitive_reduction(systems, edges),
        cycles=find_cycles(systems, edges),
    )


def dag_layout(graph: RankingGraph) -> dict:
    """Layered layout as plain data for the dashboard.

    Layer 0 holds systems beaten by nobody; every other system sits one layer below the
    deepest system that beats it (longest path in the condensation, so systems on a common
    cycle share a layer). Within a layer, systems are ordered by more wins, then by name in
    natural order (M2 before M10).
    Returns ``{"nodes": [{"system", "layer", "position"}], "edges": [{"source", "target"}],
    "cycles": [[system, ...]]}`` with edges of the transitive reduction.
    """
    systems = graph.systems
    adjacency = _adjacency(systems, graph.edges)
    component = _components(_reachability(adjacency))
    labels = sorted(set(component.tolist()))
    cross = np.zeros((len(labels), len(labels)), dtype=bool)
    position_of = {c: k for k, c in enumerate(labels)}
    for i, j in zip(*np.nonzero(adjacency)):
        a, b = position_of[component[i]], position_of[component[j]]
        if a != b:
            cross[a, b] = True
    depth = np.zeros(len(labels), dtype=int)
    # Longest-path layering by repeated relaxation; the condensation is acyclic, so this
    # settles after at most (number of components) rounds.
    for _ in range(len(labels)):
        parents = np.where(cross, depth[:, None] + 1, 0).max(axis=0)
        updated = np.maximum(depth, parents)
        if np.array_equal(updated, depth):
            break
        depth = updated
    layer_of = {systems[i]: int(depth[position_of[component[i]]]) for i in range(len(systems))}
    wins = adjacency.sum(axis=1)
    nodes = []
    for layer in sorted(set(layer_of.values())):
        members = [i for i, s in enumerate(systems) if layer_of[s] == layer]
        members.sort(key=lambda i: (-wins[i], natural_key(systems[i])))
        nodes.extend(
            {"system": systems[i], "layer": layer, "position": position} for position, i in enumerate(members)
        )
    return {
        "nodes": nodes,
        "edges": [{"source": a, "target": b} for a, b in graph.reduced_edges],
        "cycles": [list(c) for c in graph.cycles],
    }


def graph_from_labels(
    systems, labels: Mapping[tuple[str, str], object], alpha: float = 0.05, method: str = ASYMPTOTIC
) -> RankingGraph:
    """Significance graph straight from a pairwise preference table (PairLabels per pair)."""
    return significance_graph(systems, decisions_from_labels(labels, alpha, method))


# --------------------------------------------------------------------------------------
# Leaderboards ordered by the decisions


def decision_ranks(systems, decisions: Mapping[tuple[str, str], int]) -> list[dict]:
    """Systems ranked by decisions alone (layers of the significance DAG): ``rank`` 1 = beaten
    by no system; ``wins``/``losses`` count decided pairs, ``undecided`` the pairs at 0.
    Rows in the DAG layout's order.

    >>> [(r["rank"], r["system"], r["wins"], r["undecided"])
    ...  for r in decision_ranks(["A", "B", "C"], {("A", "B"): 1, ("A", "C"): 0, ("B", "C"): 0})]
    [(1, 'A', 1, 1), (1, 'C', 0, 2), (2, 'B', 0, 1)]
    """
    systems = tuple(systems)
    layout = dag_layout(significance_graph(systems, decisions)) if systems else {"nodes": []}
    record = {s: {"wins": 0, "losses": 0, "undecided": 0} for s in systems}
    for (a, b), d in decisions.items():
        if d == 0:
            record[a]["undecided"] += 1
            record[b]["undecided"] += 1
        else:
            winner, loser = (a, b) if d > 0 else (b, a)
            record[winner]["wins"] += 1
            record[loser]["losses"] += 1
    return [{"rank": node["layer"] + 1, "system": node["system"], **record[node["system"]]}
            for node in layout["nodes"]]


def tiered_leaderboard(systems, judgements: Mapping[tuple[str, str], Sequence], decisions: Mapping[tuple[str, str], int],
                       *, replicates: int, seed: int) -> list[dict]:
    """Leaderboard rows best first: Bradley–Terry (``protocol.leaderboard.bradley_terry``) from
    every judgement, ordered by the decisions' partial order first (``tier`` = layer of the
    significance DAG + 1), then by score (systems without a score last).

    systems: the names (non-empty); judgements: (first, second) -> [(item, value)] with value
    in {+1, 0, -1}, +1 = first better; decisions: (first, second) -> +1 / 0 / -1. Each row:
    system, tier, score, low, high (NaN as None), rank, rank_low, rank_high, wins, ties, losses,
    judgements, better_than / worse_than (the systems it is decided better / worse than, in
    natural order), position (1 = first row).

    >>> rows = tiered_leaderboard(["A", "B"], {("A", "B"): [("x", 1), ("y", 1), ("z", -1)]},
    ...                           {("A", "B"): 1}, replicates=20, seed=0)
    >>> [(r["position"], r["system"], r["tier"], r["wins"], r["losses"], r["better_than"]) for r in rows]
    [(1, 'A', 1, 2, 1, ['B']), (2, 'B', 2, 1, 2, [])]
    """
    systems = tuple(systems)
    index = {s: k for k, s in enumerate(systems)}
    rows = [(index[a], index[b], v) for (a, b), labels in judgements.items() for _, v in labels]
    first, second, values = (np.array(c) for c in zip(*rows)) if rows else ([], [], [])
    board = bradley_terry(systems, first, second, values, replicates=replicates, seed=seed)
    layout = dag_layout(significance_graph(systems, decisions))
    tier = {n["system"]: n["layer"] + 1 for n in layout["nodes"]}
    better, worse = {s: [] for s in systems}, {s: [] for s in systems}
    for (a, b), d in decisions.items():
        if d:
            winner, loser = (a, b) if d > 0 else (b, a)
            better[winner].append(loser)
            worse[loser].append(winner)

    def finite(x):
        return None if np.isnan(x) else float(x)

    out = []
    for k in board.order:
        s = systems[k]
        out.append({
            "system": s, "tier": tier[s], "score": finite(board.score[k]), "low": finite(board.score_low[k]),
            "high": finite(board.score_high[k]), "rank": int(board.rank[k]), "rank_low": int(board.rank_low[k]),
            "rank_high": int(board.rank_high[k]), "wins": int(board.wins[k]), "ties": int(board.ties[k]),
            "losses": int(board.losses[k]),
            "judgements": int(board.wins[k] + board.ties[k] + board.losses[k]),
            "better_than": list(natural_sorted(better[s])), "worse_than": list(natural_sorted(worse[s])),
        })
    out.sort(key=lambda r: (r["tier"], r["score"] is None, -(r["score"] or 0.0)))
    for position, row in enumerate(out, start=1):
        row["position"] = position
    return out
