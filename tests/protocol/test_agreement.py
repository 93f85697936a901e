"""Krippendorff's α and percent agreement (protocol.agreement).

Oracles: the ``krippendorff`` package (0.9.0, tests only) on the real PandaLM and separability
bundles and on random data, to 1e-9; a case computed by hand (in the comments).
"""
import json
import math
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.agreement import (
    agreement,
    agreement_by_group,
    alpha_from_counts,
    bundle_judgements,
    main,
    value_counts,
)
from protocol.bundle import read_bundle

BUNDLES = Path(__file__).resolve().parents[2] / "data" / "bundles"


def package_alpha(comparisons, annotators, values, level):
    """The reliability matrix (coders × comparisons, NaN = not judged) fed to the package."""
    units = {c: i for i, c in enumerate(dict.fromkeys(comparisons))}
    coders = {a: i for i, a in enumerate(dict.fromkeys(annotators))}
    matrix = np.full((len(coders), len(units)), np.nan)
    for c, a, v in zip(comparisons, annotators, values):
        matrix[coders[a], units[c]] = v
    return float(krippendorff.alpha(matrix, value_domain=[-1, 0, 1], level_of_measurement=level))


@pytest.mark.parametrize("name", ["pandalm.jsonl.gz", "separability_prefs.jsonl.gz"])
def test_alpha_equals_the_krippendorff_package_on_real_data(name):
    _, comparisons, annotators, values = bundle_judgements(read_bundle(BUNDLES / name))
    result = agreement(comparisons, annotators, values, bootstrap=200)
    assert result.alpha_nominal == pytest.approx(package_alpha(comparisons, annotators, values, "nominal"),
                                                 abs=1e-9)
    assert result.alpha_ordinal == pytest.approx(package_alpha(comparisons, annotators, values, "ordinal"),
                                                 abs=1e-9)
    lo, hi = result.alpha_nominal_ci
    assert lo < result.alpha_nominal < hi
    lo, hi = result.alpha_ordinal_ci
    assert lo < result.alpha_ordinal < hi


def test_pandalm_has_three_coders_on_every_comparison():
    _, comparisons, annotators, values = bundle_judgements(read_bundle(BUNDLES / "pandalm.jsonl.gz"))
    result = agreement(comparisons, annotators, values, bootstrap=0)
    assert (result.comparisons, result.judgements) == (999, 2997)
    # Three coders everywhere: percent agreement is 1 - nominal D_o, i.e. sum(o_cc) / n.
    counts = value_counts(comparisons, annotators, values)
    agreeing = (counts * (counts - 1)).sum() / 2  # o_cc summed, each unit's (m-1) = 2
    assert result.percent_agreement == pytest.approx(agreeing / counts.sum(), abs=1e-12)


# Hand-computed, values ordered (-1, 0, +1):
#   u1: +1 +1      u2: +1 -1      u3: 0 0 +1      u4: -1 (one judgement: ignored)
#   coincidences o_-+ = 1 (u2), o_0+ = 1 (u3), o_00 = 1 (u3), o_++ = 2 (u1); n_- = 1, n_0 = 2, n_+ = 4, n = 7
#   nominal:  1 - (n-1) * 2*(1+1) / 2*(1*2 + 1*4 + 2*4) = 1 - 6*4/28 = 1/7
#   ordinal:  d(-,0) = (3/2)^2, d(0,+) = 3^2, d(-,+) = (7 - 5/2)^2 = 20.25
#             1 - 6 * 2*(20.25 + 9) / 2*(2*2.25 + 8*9 + 4*20.25) = 1 - 351/315 = -4/35
#   percent agreement: (1 + 0 + 2/6) / 3 = 4/9
HAND = (
    ["u1", "u1", "u2", "u2", "u3", "u3", "u3", "u4"],
    ["a", "b", "a", "b", "a", "b", "c", "a"],
    [1, 1, 1, -1, 0, 0, 1, -1],
)


def test_hand_computed_case():
    result = agreement(*HAND, bootstrap=0)
    assert result.comparisons == 3 and result.judgements == 7
    assert result.alpha_nominal == pytest.approx(1 / 7, abs=1e-12)
    assert result.alpha_ordinal == pytest.approx(-4 / 35, abs=1e-12)
    assert result.percent_agreement == pytest.approx(4 / 9, abs=1e-12)
    assert math.isnan(result.alpha_nominal_ci[0]) and result.bootstrap == 0
    counts = value_counts(*HAND)
    assert counts.tolist() == [[0, 0, 2], [1, 0, 1], [0, 2, 1], [1, 0, 0]]
    assert alpha_from_counts(counts, "ordinal") == pytest.approx(-4 / 35, abs=1e-12)


judgement_sets = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 4), st.sampled_from([-1, 0, 1])), min_size=2, max_size=40
).map(lambda rows: list({(c, a): v for c, a, v in rows}.items()))


def _split(rows):
    return [c for (c, _), _ in rows], [a for (_, a), _ in rows], [v for _, v in rows]


@settings(max_examples=100, deadline=None)
@given(judgement_sets)
def test_property_equals_package_and_swapping_sides_changes_nothing(rows):
    comparisons, annotators, values = _split(rows)
    result = agreement(comparisons, annotators, values, bootstrap=20)
    swapped = agreement(comparisons, annotators, [-v for v in values], bootstrap=20)
    for field in ("alpha_nominal", "alpha_ordinal", "percent_agreement", "comparisons"):
        a, b = getattr(result, field), getattr(swapped, field)
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)
    counts = value_counts(comparisons, annotators, values)
    pairable = counts[counts.sum(axis=1) >= 2]
    if len(pairable) and (pairable.sum(axis=0) > 0).sum() >= 2:
        for level in ("nominal", "ordinal"):
            expected = package_alpha(comparisons, annotators, values, level)
            assert getattr(result, f"alpha_{level}") == pytest.approx(expected, abs=1e-9)
    else:
        assert math.isnan(result.alpha_nominal)  # nothing pairable, or only one value used


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from([-1, 0, 1]), min_size=2, max_size=12), st.integers(2, 5))
def test_property_perfect_agreement_gives_one(unit_values, coders):
    if len(set(unit_values)) < 2:
        unit_values = [*unit_values, -unit_values[0] or 1]
    comparisons = [u for u in range(len(unit_values)) for _ in range(coders)]
    annotators = [a for _ in unit_values for a in range(coders)]
    values = [v for v in unit_values for _ in range(coders)]
    result = agreement(comparisons, annotators, values, bootstrap=0)
    assert result.alpha_nominal == pytest.approx(1.0, abs=1e-12)
    assert result.alpha_ordinal == pytest.approx(1.0, abs=1e-12)
    assert result.percent_agreement == 1.0


def test_one_value_everywhere_is_undefined_and_nothing_pairable_is_empty():
    same = agreement(["x", "x", "y", "y"], ["a", "b", "a", "b"], [1, 1, 1, 1], bootstrap=10)
    assert math.isnan(same.alpha_nominal) and same.percent_agreement == 1.0
    assert same.as_dict()["alpha_nominal"] is None
    empty = agreement(["x", "y"], ["a", "a"], [1, -1])
    assert empty.comparisons == 0 and math.isnan(empty.alpha_ordinal)


def test_bootstrap_resamples_comparisons_and_is_seeded():
    rng = np.random.default_rng(3)
    truth = rng.choice([-1, 0, 1], size=60)
    comparisons = np.repeat(np.arange(60), 3)
    annotators = np.tile([0, 1, 2], 60)
    noisy = np.where(rng.random(180) < 0.3, rng.choice([-1, 0, 1], size=180), np.repeat(truth, 3))
    a = agreement(comparisons, annotators, noisy, bootstrap=300, seed=7)
    b = agreement(comparisons, annotators, noisy, bootstrap=300, seed=7)
    assert a == b
    assert a.alpha_nominal_ci[0] < a.alpha_nominal < a.alpha_nominal_ci[1]
    # Resampled as clusters, a study where every comparison is unanimous stays unanimous in
    # every replicate (resampling single judgements would split comparisons and lower α).
    unanimous = agreement(comparisons, annotators, np.repeat(truth, 3), bootstrap=200, seed=1)
    assert unanimous.alpha_nominal_ci == (1.0, 1.0)
    assert unanimous.alpha_ordinal_ci == (1.0, 1.0)


def test_by_group_equals_agreement_on_each_subset():
    groups = ["p", "p", "p", "p", "q", "q", "q", "q"]
    result = agreement_by_group(groups, *HAND, bootstrap=0)
    assert list(result) == ["p", "q"]
    assert result["p"] == agreement(HAND[0][:4], HAND[1][:4], HAND[2][:4], bootstrap=0)
    assert result["q"].comparisons == 1


@pytest.mark.parametrize("values, annotators, message", [
    ([1, 2, 0], ["a", "b", "c"], "judgement 1: value 2 is not -1, 0 or 1"),
    ([1, 0, 0], ["a", "a", "c"], "annotator 'a' judged comparison 'x' twice"),
    ([1, 0], ["a", "b", "c"], "equal length"),
])
def test_bad_input_is_named(values, annotators, message):
    with pytest.raises(ValueError, match=message):
        agreement(["x", "x", "y"], annotators, values)


def test_command_line_json(capsys):
    assert main([str(BUNDLES / "pandalm.jsonl.gz"), "--json", "--bootstrap", "100", "--by-pair"]) == 0
    printed = json.loads(capsys.readouterr().out)
    _, comparisons, annotators, values = bundle_judgements(read_bundle(BUNDLES / "pandalm.jsonl.gz"))
    expected = agreement(comparisons, annotators, values, bootstrap=100).as_dict()
    assert {k: printed[k] for k in expected} == expected
    assert set(printed) >= {"comparisons", "alpha_nominal", "alpha_ordinal", "percent_agreement", "alpha_nominal_ci"}
    assert len(printed["pairs"]) == 10
    assert sum(p["comparisons"] for p in printed["pairs"].values()) == printed["comparisons"] == 999


def test_command_line_without_pairable_comparisons(tmp_path, capsys):
    path = tmp_path / "one.jsonl"
    rows = [{"kind": "study", "name": "s"}, {"kind": "item", "id": "i", "input": "x"},
            {"kind": "output", "item": "i", "system": "A", "text": "a"},
            {"kind": "output", "item": "i", "system": "B", "text": "b"},
            {"kind": "human_preference", "item": "i", "first": "A", "second": "B", "preference": 1,
             "annotator": "w"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert main([str(path), "--json"]) == 1
    assert "no comparison has two or more" in capsys.readouterr().err
