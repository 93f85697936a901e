"""protocol.preferences: docs/formulas.md §1 and the per-pair label tables."""
import itertools
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.bundle import read_bundle
from protocol.preferences import (canonical_pair, human_labels, metric_labels, preferences_from_scores,
                                  shared_items, sign_of_mean_per_item,
                                  score_matrix)


def test_preferences_from_scores_with_and_without_margin():
    assert preferences_from_scores([3, 1, 2], [1, 3, 2]).tolist() == [1, -1, 0]
    assert preferences_from_scores([3.0, 1.0, 2.05], [1.0, 3.0, 2.0], eps=0.1).tolist() == [1, -1, 0]
    with pytest.raises(ValueError, match="shape"):
        preferences_from_scores([1, 2], [1])
    with pytest.raises(ValueError, match="finite"):
        preferences_from_scores([np.nan], [1])
    with pytest.raises(ValueError, match="eps"):
        preferences_from_scores([1], [1], eps=-1)


@given(st.lists(st.floats(-100, 100), min_size=1, max_size=20), st.floats(0, 5))
def test_swapping_scores_negates_preferences(scores, eps):
    other = list(reversed(scores))
    assert (preferences_from_scores(scores, other, eps) == -preferences_from_scores(other, scores, eps)).all()


def test_canonical_pair():
    assert canonical_pair("M9", "M10") == ("M10", "M9", -1)
    assert canonical_pair("a", "b") == ("a", "b", 1)
    with pytest.raises(ValueError):
        canonical_pair("a", "a")


def bundle_from(rows):
    return read_bundle(("\n".join(json.dumps(r) for r in rows) + "\n").encode())


BASE = [{"kind": "study", "name": "t"}] + [
    {"kind": "item", "id": i, "input": "x"} for i in ("i1", "i2")
] + [{"kind": "output", "item": i, "system": s, "text": "t"} for i in ("i1", "i2") for s in "ABC"]


def test_human_scores_are_averaged_before_preferences():
    rows = BASE + [
        {"kind": "human_score", "item": "i1", "system": "A", "score": 5, "annotator": "e1"},
        {"kind": "human_score", "item": "i1", "system": "A", "score": 1, "annotator": "e2"},  # mean 3
        {"kind": "human_score", "item": "i1", "system": "B", "score": 3, "annotator": "e1"},
        {"kind": "human_score", "item": "i1", "system": "C", "score": 2, "annotator": "e1"},
    ]
    table = human_labels(bundle_from(rows))
    assert table[("A", "B")].values.tolist() == [0]
    assert table[("A", "C")].values.tolist() == [1]
    assert table[("B", "C")].values.tolist() == [1]


def test_preference_rows_are_flipped_into_canonical_order():
    rows = BASE + [
        {"kind": "human_preference", "item": "i1", "first": "B", "second": "A", "preference": 1, "annotator": "w1"},
        {"kind": "human_preference", "item": "i1", "first": "A", "second": "B", "preference": 1, "annotator": "w2"},
        {"kind": "metric_preference", "item": "i2", "first": "C", "second": "A", "metric": "j", "preference": -1},
    ]
    bundle = bundle_from(rows)
    ab = human_labels(bundle, per_item=False)[("A", "B")]
    assert ab.values.tolist() == [-1, 1] and ab.annotators.tolist() == ["w1", "w2"]
    assert metric_labels(bundle, "j")[("A", "C")].values.tolist() == [1]
    assert ab.swapped().values.tolist() == [1, -1]
    # the item is the unit: the two annotators of i1 cancel into one tie
    merged = human_labels(bundle)[("A", "B")]
    assert merged.items.tolist() == ["i1"] and merged.values.tolist() == [0]
    assert merged.annotators.tolist() == ["mean"]


@pytest.mark.parametrize("values, expected", [
    ([1, 1, -1], 1), ([1, -1], 0), ([0, 0, -1], -1), ([1, 0, 0], 1), ([-1, -1, 1, 1, 0], 0)])
def test_several_labels_of_one_item_become_the_sign_of_their_mean(values, expected):
    items, labels = sign_of_mean_per_item(["x"] * len(values) + ["y"], values + [1])
    assert items.tolist() == ["x", "y"] and labels.tolist() == [expected, 1]


def test_sign_of_mean_rejects_bad_labels():
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        sign_of_mean_per_item(["a"], [2])
    with pytest.raises(ValueError, match="2 items but 1"):
        sign_of_mean_per_item(["a", "b"], [1])


def test_metric_scores_and_score_matrix():
    rows = BASE + [
        {"kind": "metric_score", "item": i, "system": s, "metric": "m", "score": v}
        for i, scores in (("i1", (0.1, 0.2, 0.3)), ("i2", (0.3, 0.3, 0.1))) for s, v in zip("ABC", scores)
    ]
    bundle = bundle_from(rows)
    assert metric_labels(bundle, "m")[("A", "B")].values.tolist() == [-1, 0]
    systems, items, matrix = score_matrix(bundle, "m")
    assert systems == ("A", "B", "C") and items == ("i1", "i2")
    assert matrix[:, 1].tolist() == [0.3, 0.3, 0.1]
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        metric_labels(bundle, "nope")
    with pytest.raises(ValueError, match="no human_score"):
        score_matrix(bundle, "human")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "item-10", "item-9"]), st.sampled_from([-1, 0, 1])),
                max_size=40))
def test_sign_of_mean_matches_summing_each_items_labels(pairs):
    """Against the plain definition: sum each item's labels, sorted ids, the sum's sign."""
    items, labels = sign_of_mean_per_item([i for i, _ in pairs], [v for _, v in pairs])
    sums: dict = {}
    for item, value in pairs:
        sums[item] = sums.get(item, 0) + value
    assert items.tolist() == sorted(sums)
    assert labels.tolist() == [(s > 0) - (s < 0) for _, s in sorted(sums.items())]
    assert items.dtype == object and labels.dtype == np.int8


def test_shared_items_counts_each_pairs_items_as_the_loop_over_items_and_pairs_did():
    """The import's pairs and default budget (issue 41): one presence matrix gives what the loop
    over every item's pairs of systems gave, samples of one output counted once."""
    rng = random.Random(3)
    outputs = [(f"q{i}", f"s{s}") for i in range(40) for s in range(12) if rng.random() < 0.6]
    outputs += outputs[:25]  # second samples
    systems_of_item = {}
    for item, system in outputs:
        systems_of_item.setdefault(item, set()).add(system)
    expected = {}
    for names in systems_of_item.values():
        for pair in itertools.combinations(sorted(names), 2):
            expected[pair] = expected.get(pair, 0) + 1
    assert shared_items(*zip(*outputs)) == expected
    assert shared_items([], []) == {}
    with pytest.raises(ValueError, match="2 items but 1 systems"):
        shared_items(["a", "b"], ["s"])
