"""Tests for protocol.ranking: sign tests, DAGs, decision comparison (docs/formulas.md §3, §5)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from protocol.ranking import (
    CORRECT,
    INSERTION,
    INVERSION,
    OMISSION,
    category_rates,
    compare_decisions,
    dag_layout,
    decision_category,
    decisions_from_counts,
    decisions_from_labels,
    edges_from_decisions,
    find_cycles,
    graph_from_labels,
    label_counts,
    sign_test,
    significance_graph,
    transitive_reduction,
)


@pytest.mark.parametrize(
    ("reference", "candidate", "expected"),
    [
        (1, 1, CORRECT), (-1, -1, CORRECT), (0, 0, CORRECT),
        (1, -1, INVERSION), (-1, 1, INVERSION),
        (1, 0, OMISSION), (-1, 0, OMISSION),
        (0, 1, INSERTION), (0, -1, INSERTION),
    ],
)
def test_decision_category_table(reference, candidate, expected):
    assert decision_category(reference, candidate) == expected
    # swapping the pair negates both decisions and keeps the category
    assert decision_category(-reference, -candidate) == expected


@pytest.mark.parametrize("bad", [2, -2, 0.5, "1", None])
def test_decision_category_rejects_non_decisions(bad):
    with pytest.raises(ValueError, match="decision"):
        decision_category(bad, 0)
    with pytest.raises(ValueError, match="decision"):
        decision_category(0, bad)


def test_compare_decisions_missing_candidate_pair_is_undecided():
    reference = {("A", "B"): 1, ("A", "C"): 0, ("B", "C"): -1}
    candidate = {("A", "B"): -1, ("A", "C"): 1}
    categories = compare_decisions(reference, candidate)
    assert categories == {("A", "B"): INVERSION, ("A", "C"): INSERTION, ("B", "C"): OMISSION}
    rates = category_rates(categories)
    assert rates == pytest.approx({"correct": 0, "inversion": 1 / 3, "omission": 1 / 3, "insertion": 1 / 3})


def test_compare_decisions_rejects_unknown_candidate_pair():
    with pytest.raises(ValueError, match="missing from the reference"):
        compare_decisions({("A", "B"): 1}, {("A", "C"): 1})


# ---------------------------------------------------------------- sign tests (docs/formulas.md §3)
def test_sign_test_oracle_317_245():
    result = sign_test(317, 245)
    assert float(result.statistic) == pytest.approx(3.0371, abs=5e-5)
    assert int(result.decision) == 1


def test_sign_test_oracle_9_2_asymptotic_rejects_exact_does_not():
    asymptotic = sign_test(9, 2)
    assert float(special.ndtr(asymptotic.statistic)) == pytest.approx(0.9826, abs=5e-5)
    assert int(asymptotic.decision) == 1
    exact = sign_test(9, 2, method="exact")
    assert float(exact.p_value) == pytest.approx(0.0654, abs=5e-5)
    assert int(exact.decision) == 0


def test_exact_p_matches_scipy_binomtest_and_batched_equals_per_pair():
    rng = np.random.default_rng(3)
    wins = rng.integers(0, 40, size=50)
    losses = rng.integers(0, 40, size=50)
    for method in ("asymptotic", "exact"):
        batched = sign_test(wins, losses, method=method)
        for k in range(50):
            single = sign_test(wins[k], losses[k], method=method)
            assert single.decision == batched.decision[k]
            assert single.p_value == pytest.approx(batched.p_value[k], rel=1e-12)
    exact = sign_test(wins, losses, method="exact")
    for k in range(50):
        if wins[k] + losses[k]:
            assert exact.p_value[k] == pytest.approx(stats.binomtest(int(wins[k]), int(wins[k] + losses[k])).pvalue, rel=1e-9)


def test_sign_test_without_arguments_is_undecided():
    result = sign_test([0], [0])
    assert result.statistic[0] == 0 and result.decision[0] == 0 and result.p_value[0] == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 500), st.integers(0, 500), st.sampled_from(["asymptotic", "exact"]))
def test_swapping_systems_mirrors_the_sign_test(wins, losses, method):
    forward = sign_test(wins, losses, method=method)
    backward = sign_test(losses, wins, method=method)
    assert backward.decision == -forward.decision
    assert backward.statistic == pytest.approx(-forward.statistic)
    assert backward.p_value == pytest.approx(forward.p_value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_plus": [1, 2], "n_minus": [1]}, "differ in shape"),
        ({"n_plus": [-1], "n_minus": [1]}, "non-negative"),
        ({"n_plus": [np.nan], "n_minus": [1]}, "non-negative"),
        ({"n_plus": [1.5], "n_minus": [1]}, "whole numbers"),
        ({"n_plus": 1, "n_minus": 1, "method": "bayes"}, "method"),
        ({"n_plus": 1, "n_minus": 1, "alpha": 1.5}, "alpha"),
    ],
)
def test_sign_test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sign_test(**kwargs)


def test_decisions_from_counts_and_labels():
    counts = {("A", "B"): (317, 10, 245), ("A", "C"): (9, 0, 2), ("B", "C"): (2, 5, 9)}
    assert decisions_from_counts(counts) == {("A", "B"): 1, ("A", "C"): 1, ("B", "C"): -1}
    assert decisions_from_counts(counts, method="exact") == {("A", "B"): 1, ("A", "C"): 0, ("B", "C"): 0}

    class Labels:
        def __init__(self, values):
            self.values = np.array(values)

    labels = {("A", "B"): Labels([1] * 9 + [-1] * 2 + [0] * 4)}
    assert label_counts(labels[("A", "B")].values).tolist() == [9, 4, 2]
    assert decisions_from_labels(labels) == {("A", "B"): 1}


# ---------------------------------------------------------------- DAG
def test_transitive_reduction_spec_example():
    edges = [("A", "B"), ("B", "C"), ("A", "C"), ("C", "D"), ("A", "D")]
    assert transitive_reduction("ABCD", edges) == (("A", "B"), ("B", "C"), ("C", "D"))


def test_cycle_is_reported_not_a_crash():
    decisions = {("A", "B"): 1, ("B", "C"): 1, ("A", "C"): -1, ("C", "D"): 1, ("A", "D"): 1}
    graph = significance_graph(["D", "C", "B", "A"], decisions)
    assert graph.cycles == (("A", "B", "C"),)
    assert not graph.is_acyclic
    # edges inside the cycle are kept; the condensation {A,B,C} -> D has one edge, drawn
    # as every member edge into D
    assert graph.reduced_edges == (("A", "B"), ("A", "D"), ("B", "C"), ("C", "A"), ("C", "D"))
    layout = dag_layout(graph)
    layers = {n["system"]: n["layer"] for n in layout["nodes"]}
    assert layers == {"A": 0, "B": 0, "C": 0, "D": 1}
    assert layout["cycles"] == [["A", "B", "C"]]


def test_dag_layout_rows_by_rank():
    decisions = {("A", "B"): 1, ("B", "C"): 1, ("A", "C"): 1, ("C", "D"): 1, ("A", "D"): 1, ("B", "D"): 0}
    layout = dag_layout(significance_graph("ABCDE", decisions))
    by_system = {n["system"]: (n["layer"], n["position"]) for n in layout["nodes"]}
    assert by_system == {"A": (0, 0), "E": (0, 1), "B": (1, 0), "C": (2, 0), "D": (3, 0)}
    assert layout["edges"] == [
        {"source": "A", "target": "B"}, {"source": "B", "target": "C"}, {"source": "C", "target": "D"}
    ]


def _reachable(systems, edges):
    reach = {s: set() for s in systems}
    for s in systems:
        stack = [b for a, b in edges if a == s]
        while stack:
            node = stack.pop()
            if node not in reach[s]:
                reach[s].add(node)
                stack.extend(b for a, b in edges if a == node)
    return reach


random_decisions = st.integers(2, 7).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.sampled_from([-1, 0, 1]), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2),
        st.permutations(list(range(n))),
    )
)


@settings(max_examples=150, deadline=None)
@given(random_decisions)
def test_dag_of_relabelled_permuted_systems_is_the_same_graph(case):
    n, values, permutation = case
    names = [f"s{i}" for i in range(n)]
    decisions = {pair: v for pair, v in zip(itertools.combinations(names, 2), values)}
    graph = significance_graph(names, decisions)

    # rename system i to the permuted name, restate decisions in the new canonical order
    rename = {names[i]: f"t{permutation[i]}" for i in range(n)}
    renamed = {}
    for (a, b), v in decisions.items():
        x, y = rename[a], rename[b]
        renamed[(x, y) if x < y else (y, x)] = v if x < y else -v
    other = significance_graph(list(reversed(list(rename.values()))), dict(reversed(list(renamed.items()))))

    mapped = lambda edges: sorted((rename[a], rename[b]) for a, b in edges)
    assert sorted(other.edges) == mapped(graph.edges)
    assert sorted(other.reduced_edges) == mapped(graph.reduced_edges)
    assert sorted(sorted(c) for c in other.cycles) == sorted(sorted(rename[s] for s in c) for c in graph.cycles)
    layers = {n_["system"]: n_["layer"] for n_ in dag_layout(graph)["nodes"]}
    other_layers = {n_["system"]: n_["layer"] for n_ in dag_layout(other)["nodes"]}
    assert {rename[s]: layer for s, layer in layers.items()} == other_layers

    # the reduction keeps reachability; on an acyclic graph no kept edge is implied by others
    assert _reachable(names, graph.reduced_edges) == _reachable(names, graph.edges)
    if graph.is_acyclic:
        for edge in graph.reduced_edges:
            rest = [e for e in graph.reduced_edges if e != edge]
            assert edge[1] not in _reachable(names, rest)[edge[0]]
        for a, b in graph.edges:  # layers follow rank: a winner sits above its loser
            assert layers[a] < layers[b]


def test_graph_bad_input():
    with pytest.raises(ValueError, match="decision"):
        edges_from_decisions({("A", "B"): 2})
    with pytest.raises(ValueError, match="not in the system list"):
        transitive_reduction("AB", [("A", "C")])
    with pytest.raises(ValueError, match="self-loop"):
        find_cycles("AB", [("A", "A")])
    with pytest.raises(ValueError, match="no systems"):
        significance_graph([], {})


def test_graph_from_labels_matches_decisions():
    class Labels:
        def __init__(self, values):
            self.values = np.array(values)

    labels = {
        ("A", "B"): Labels([1] * 20 + [-1] * 3),
        ("A", "C"): Labels([1] * 25 + [0] * 5),
        ("B", "C"): Labels([1] * 15 + [-1] * 2),
    }
    graph = graph_from_labels(["A", "B", "C"], labels)
    assert graph.edges == (("A", "B"), ("A", "C"), ("B", "C"))
    assert graph.reduced_edges == (("A", "B"), ("B", "C"))


def test_dag_layout_orders_a_layer_naturally():
    graph = significance_graph(["M10", "M2", "M1", "M0"], {})
    assert [n["system"] for n in dag_layout(graph)["nodes"]] == ["M0", "M1", "M2", "M10"]


def test_decisions_from_labels_count_each_item_once():
    from protocol.preferences import PairLabels
    from protocol.ranking import decisions_from_labels

    # six items judged +1 by three annotators each, two items judged -1 once
    items = np.array([f"i{k}" for k in range(6) for _ in range(3)] + ["j0", "j1"], dtype=object)
    values = np.array([1] * 18 + [-1, -1], dtype=np.int8)
    table = PairLabels("A", "B", items, values, np.array(["h"] * 20, dtype=object))
    # per label: 18 vs 2, z = 3.6 -> +1; per item: 6 vs 2, z = 1.41 -> 0
    assert decisions_from_labels({("A", "B"): table}) == {("A", "B"): 0}
