import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.bundle import read_bundle, write_bundle_rows
from protocol.separability import (
    Alignments,
    bundle_separability,
    compute_alignments,
    cross_alignment,
    main,
    normalise,
    self_alignment,
    separability,
    synthetic_comparisons,
)
from protocol.similarity import get_similarity

A = ["the cat sat on the mat", "a cat sat on a mat", "the cat is on the mat"]
B = ["dogs run in the park", "the dog ran through the park today", "a dog runs in a park"]

words = st.sampled_from("the cat sat on a mat dog ran far away park today".split())
texts = st.lists(words, min_size=1, max_size=8).map(" ".join)
sample_sets = st.lists(texts, min_size=2, max_size=4)


def matrix(similarity, a, b):
    """s(a_i, b_j) as a (len(a), len(b)) array, scored pair by pair."""
    return np.array([[similarity([x], [y])[0] for y in b] for x in a])


def released_code_cross(similarity, a, b):
    """The released calc_separability.py loop: score j1 <= j2, mirror, average all cells."""
    k = len(a)
    m = np.zeros((k, k))
    for j1 in range(k):
        for j2 in range(k):
            if j1 <= j2:
                m[j1, j2] = m[j2, j1] = similarity([a[j1]], [b[j2]])[0]
    return m.mean()


def test_normalisation_example_by_hand():
    # pooled min 0.2 and max 0.9 over all three columns
    sf, ss, cross = normalise([0.8, 0.6], [0.5, 0.9], [0.2, 0.4])
    np.testing.assert_allclose(sf, [0.6 / 0.7, 0.4 / 0.7], atol=1e-12)
    np.testing.assert_allclose(ss, [0.3 / 0.7, 1.0], atol=1e-12)
    np.testing.assert_allclose(cross, [0.0, 0.2 / 0.7], atol=1e-12)
    np.testing.assert_allclose(separability(sf, ss, cross), [0.6 / 0.7, 0.5 / 0.7], atol=1e-12)
    assert all(np.all(c == 0) for c in normalise([0.5], [0.5], [0.5]))


def test_alignment_formulas_by_hand():
    scores = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert self_alignment(scores) == pytest.approx(2.5)  # off-diagonal (2 + 3) / 2
    assert cross_alignment(scores) == pytest.approx(2.5)
    # released code: cell (1, 0) mirrors (0, 1) -> (1 + 2 + 2 + 4) / 4
    assert cross_alignment(scores, paper_compat=True) == pytest.approx(2.25)


def test_identical_samples_have_maximal_self_alignment():
    raw = compute_alignments([[A[0]] * 3, A], [B, [B[0]] * 4], "rouge1")
    assert raw.self_first[0] == pytest.approx(1.0) and raw.self_second[1] == pytest.approx(1.0)
    assert raw.self_first[1] < 1 and raw.self_second[0] < 1
    normalised = raw.normalised()
    assert normalised.self_first[0] == pytest.approx(1.0)  # the pooled maximum


@pytest.mark.parametrize("paper_compat", [False, True])
@pytest.mark.parametrize("name", ["rouge1", "bleu", "length_adjusted_rouge1"])
def test_batched_equals_per_comparison_matrices(name, paper_compat):
    first, second = synthetic_comparisons(6, 4, words=12, seed=3)
    sim = get_similarity(name)
    raw = compute_alignments(first, second, name, paper_compat=paper_compat)
    for n, (a, b) in enumerate(zip(first, second)):
        assert raw.self_first[n] == pytest.approx(self_alignment(matrix(sim, a, a)), abs=1e-12)
        assert raw.self_second[n] == pytest.approx(self_alignment(matrix(sim, b, b)), abs=1e-12)
        expected = released_code_cross(sim, a, b) if paper_compat else matrix(sim, a, b).mean()
        assert raw.cross[n] == pytest.approx(expected, abs=1e-12)


def test_unequal_sample_counts():
    raw = compute_alignments([A[:2]], [B], "token_jaccard")
    sim = get_similarity("token_jaccard")
    assert raw.cross[0] == pytest.approx(matrix(sim, A[:2], B).mean())
    with pytest.raises(ValueError, match="paper_compat"):
        compute_alignments([A[:2]], [B], "token_jaccard", paper_compat=True)


@settings(max_examples=40, deadline=None)
@given(a=st.lists(sample_sets, min_size=1, max_size=3), b=st.lists(sample_sets, min_size=1, max_size=3))
def test_property_swapping_systems_mirrors_alignments_and_keeps_delta(a, b):
    n = min(len(a), len(b))
    forward = compute_alignments(a[:n], b[:n], "rouge1")
    backward = compute_alignments(b[:n], a[:n], "rouge1")
    np.testing.assert_allclose(backward.self_first, forward.self_second, atol=1e-12)
    np.testing.assert_allclose(backward.cross, forward.cross, atol=1e-12)
    np.testing.assert_allclose(backward.separability, forward.separability, atol=1e-12)
    np.testing.assert_allclose(backward.normalised().separability, forward.normalised().separability, atol=1e-12)
    normalised = forward.normalised().separability
    assert np.all((normalised >= -1 - 1e-12) & (normalised <= 1 + 1e-12))


def test_parallel_workers_give_the_same_numbers():
    first, second = synthetic_comparisons(130, 5, words=20, seed=1)  # > one chunk of pairs
    single = compute_alignments(first, second, "rouge1", workers=1)
    calls = []
    parallel = compute_alignments(first, second, "rouge1", workers=2, progress=lambda d, t: calls.append((d, t)))
    np.testing.assert_allclose(parallel.cross, single.cross, atol=1e-12)
    np.testing.assert_allclose(parallel.separability, single.separability, atol=1e-12)
    assert calls[-1][0] == calls[-1][1]


def test_bad_input_raises():
    with pytest.raises(ValueError, match="at least 2"):
        compute_alignments([A[:1]], [B], "rouge1")
    with pytest.raises(ValueError, match="same comparisons"):
        compute_alignments([A, A], [B], "rouge1")
    with pytest.raises(ValueError, match="NaN"):
        normalise([np.nan], [0.1], [0.2])
    with pytest.raises(ValueError, match="k >= 2"):
        self_alignment(np.ones((1, 1)))
    with pytest.raises(ValueError, match="unknown similarity"):
        compute_alignments([A], [B], "bertscore")


def write_bundle(path, samples):
    rows = [{"kind": "study", "name": "toy"}]
    for item, per_system in samples.items():
        rows.append({"kind": "item", "id": item, "input": f"source of {item}"})
        for system, texts in per_system.items():
            for s, text in enumerate(texts):
                rows.append({"kind": "output", "item": item, "system": system, "text": text, "sample": s})
    write_bundle_rows(rows, path)
    return path


def test_bundle_separability_and_command_line(tmp_path, capsys):
    samples = {
        "d1": {"M2": A, "M1": B},
        "d2": {"M1": A, "M2": [A[0], A[1], B[0]], "M3": B},
        "d3": {"M1": A[:1], "M2": B},  # one sample of M1: not a comparison
    }
    path = write_bundle(tmp_path / "toy.jsonl.gz", samples)
    result = bundle_separability(read_bundle(path), "rouge1")
    assert result.comparisons == (
        ("d1", "M1", "M2"), ("d2", "M1", "M2"), ("d2", "M1", "M3"), ("d2", "M2", "M3"),
    )
    # canonical order: M1's samples are the first system's even where M2 came first in the file
    direct = compute_alignments([B, A, A, [A[0], A[1], B[0]]], [A, [A[0], A[1], B[0]], B, B], "rouge1")
    np.testing.assert_allclose(result.raw.cross, direct.cross, atol=1e-12)
    np.testing.assert_allclose(result.separability, direct.normalised().separability, atol=1e-12)

    assert main([str(path), "--similarity", "rouge1", "--json"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [(r["item"], r["first"], r["second"]) for r in rows] == list(result.comparisons)
    assert set(rows[0]) == {"item", "first", "second", "self_first", "self_second", "cross", "separability"}
    np.testing.assert_allclose([r["separability"] for r in rows], result.separability, atol=1e-12)
    assert "text pairs scored" in captured.err


def test_command_line_reports_a_bad_bundle(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"study","name":"x"}\n{"kind":"output","item":"nope","system":"A","text":"t"}\n')
    assert main([str(bad), "--similarity", "rouge1"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_alignments_swapped_mirrors():
    raw = Alignments(np.array([0.9]), np.array([0.4]), np.array([0.1]))
    assert raw.swapped().self_first[0] == 0.4 and raw.swapped().separability[0] == raw.separability[0]
