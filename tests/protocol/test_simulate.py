import json
import math
from pathlib import Path

import numpy as np
import pytest

from protocol import adaptive
from protocol.simulate import SUMMARY_KEYS, kld, main, null_labels, replay, simulate
from tests.builders.bundles import write_tiny_bundle

AB, AC, BC = ("A", "B"), ("A", "C"), ("B", "C")


def labels(values, prefix="i"):
    values = np.asarray(values, dtype=np.int64)
    return np.array([f"{prefix}{k}" for k in range(len(values))]), values


# the paper's Algorithm 2 (no longer the default: ProtocolSettings.paper)
PAPER = dict(policy="paper", rule="bayes")


def three_system_human():
    # A beats B on all 8 items; A and C split 2-2; C beats B on all 4 items.
    return {AB: labels([1] * 8), AC: labels([1, -1, -1, 1]), BC: labels([-1] * 4)}


def test_hand_computed_three_system_replay():
    # Every pair has one label per item and the labels of a pair are exchangeable, so the
    # item order does not matter for the counts. Batch 2: A-B decides after 6 labels
    # (theta 1 - 1/2^7 > .975), A-C and B-C use all 4 labels and stay undecided.
    # Reference on all labels: A-B (8,0,0) +1; A-C (2,0,2) 0; B-C (0,0,4): theta 1/2^5 = .03125 -> 0.
    result = replay(three_system_human(), batch=2, seed=5, **PAPER)
    assert result.decisions == {AB: 1, AC: 0, BC: 0}
    assert result.reference == {AB: 1, AC: 0, BC: 0}
    assert result.used == {AB: 6, AC: 4, BC: 4}
    assert (result.annotations_available, result.annotations_used) == (16, 14)
    assert result.annotation_fraction == pytest.approx(14 / 16)
    assert (result.correct, result.inversion, result.omission, result.insertion) == (1.0, 0.0, 0.0, 0.0)
    # KLD(p_prot || p_hum): p_hum of A-B is (1, 0, 0), the protocol's posterior mean (7,1,1)/9
    # puts mass on the empty classes -> infinite, skipped; A-C: p_hum (.5, 0, .5) -> infinite
    # too; B-C: p_hum (0, 0, 1) -> infinite. All three are skipped.
    assert result.kld_skipped == 3 and math.isnan(result.kld)


def test_replay_with_ties_gives_a_finite_kld_by_hand():
    human = {AB: labels([1, 0, -1, 1, 0, -1])}
    result = replay(human, batch=6)
    p_prot = np.array([3, 3, 3]) / 9  # Dir(n + 1) mean with n = (2, 2, 2)
    assert result.kld == pytest.approx(float(np.sum(p_prot * np.log(p_prot / (1 / 3)))))
    assert result.kld == pytest.approx(0.0) and result.kld_skipped == 0
    assert kld([0.5, 0.25, 0.25], [0.25, 0.25, 0.5]) == pytest.approx(0.5 * math.log(2) - 0.25 * math.log(2))
    assert kld([0.5, 0.0, 0.5], [1.0, 0.0, 0.0]) == math.inf


def test_a_budget_caps_the_replay_and_decided_pairs_get_nothing_more():
    result = replay(three_system_human(), batch=2, budget=9, seed=1, **PAPER)
    assert result.annotations_used == 9
    assert result.state.budget_left == 0
    assert all(used <= 8 for used in result.used.values())
    # A-B is the only pair that can be decided; once decided it received no more labels
    full = replay(three_system_human(), batch=2, budget=100, **PAPER)
    assert full.state.pair(*AB).status == adaptive.DECIDED and full.used[AB] == 6


def test_metric_labels_enter_as_metric_only_counts():
    rng = np.random.default_rng(0)
    human_values = rng.choice([1, 0, -1], size=60, p=[0.6, 0.1, 0.3])
    items, values = labels(human_values)
    metric = {AB: (items, np.where(rng.random(60) < 0.8, human_values, -human_values))}
    result = replay({AB: (items, values)}, metric, batch=10)
    pair = result.state.pair(*AB)
    assert sum(pair.metric_only) == 60 - len(pair.judged_items)
    assert np.sum(pair.paired) == pair.judgements


def test_null_labels_swap_human_and_metric_together_per_item():
    items = np.array(["a", "b", "c", "a"])
    human = {AB: (items, np.array([1, -1, 0, 1]))}
    metric = {AB: (np.array(["a", "b", "c"]), np.array([1, 1, -1]))}
    null_human, null_metric = null_labels(human, metric, seed=3)
    h_items, h_values = null_human[AB]
    m_items, m_values = null_metric[AB]
    flip_h = dict(zip(h_items, h_values * np.array([1, -1, 0, 1])))  # sign of the flip per item
    flip_m = dict(zip(m_items, m_values * np.array([1, 1, -1])))
    assert flip_h["a"] == flip_m["a"] and flip_h["b"] == flip_m["b"]
    assert h_values[0] == h_values[3]  # both labels of item "a" flipped alike
    assert set(np.abs(h_values)) <= {0, 1}
    # over many items about half are swapped
    many = {AB: labels(np.ones(2000, dtype=int))}
    swapped = null_labels(many, seed=0)[0][AB][1]
    assert abs(np.mean(swapped == -1) - 0.5) < 0.05


def test_strict_lowers_the_false_decision_rate_on_null_pairs():
    # 150 exchangeable pairs (p+ = p- = .4): every ± decision is false.
    rng = np.random.default_rng(11)
    human = {(f"S{k:03d}", f"T{k:03d}"): labels(rng.choice([1, 0, -1], 100, p=[0.4, 0.2, 0.4])) for k in range(150)}
    paper = replay(human, batch=10, **PAPER)
    strict = replay(human, batch=10, strict=True, **PAPER)
    assert paper.false_decision_rate > 0.05  # ten looks inflate the nominal .05
    assert strict.false_decision_rate < paper.false_decision_rate
    assert strict.annotations_used > paper.annotations_used


def test_cli_json_has_exactly_the_contract_keys_and_matches_the_library(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(path, np.random.default_rng(2))
    assert main([str(path), "--metric", "none", "--batch", "5", "--seed", "3", "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert tuple(printed) == SUMMARY_KEYS
    library = simulate(str(path), "none", batch=5, seed=3).summary()
    assert {k: v for k, v in printed.items() if k != "seconds"} == {k: v for k, v in library.items() if k != "seconds"}
    assert printed["pairs"] == 3 and printed["annotations_available"] == 120


def test_metric_none_equals_the_protocol_with_an_empty_metric(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(path, np.random.default_rng(4))
    from protocol.bundle import read_bundle
    from protocol.preferences import human_labels

    human = human_labels(read_bundle(path))
    for policy in ("paper", "adaptive"):
        main([str(path), "--metric", "none", "--batch", "4", "--policy", policy, "--json", "--quiet"])
        printed = json.loads(capsys.readouterr().out)
        direct = replay(human, {}, batch=4, policy=policy).summary()
        printed.pop("seconds"), direct.pop("seconds")
        assert printed == direct


def test_cli_with_a_metric_reports_progress_on_stderr(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(path, np.random.default_rng(6))
    assert main([str(path), "--metric", "m1", "--batch", "5"]) == 0
    captured = capsys.readouterr()
    assert "close 1:" in captured.err
    assert "annotation_fraction" in captured.out


def test_bad_input_is_reported(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(path, np.random.default_rng(8))
    assert main([str(path), "--metric", "no_such_metric", "--json"]) == 2
    assert "no_such_metric" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no pair has human labels"):
        replay({})
    with pytest.raises(ValueError, match="repeat an item"):
        replay({AB: labels([1, 1])}, {AB: (np.array(["i0", "i0"]), np.array([1, 1]))})
    with pytest.raises(ValueError, match="without human labels"):
        replay({AB: labels([1, 1])}, {AC: labels([1, 1])})
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        replay({AB: labels([1, 2])})


RELEVANCE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "summeval_relevance.jsonl.gz"


@pytest.mark.slow
@pytest.mark.skipif(not RELEVANCE.exists(), reason="the SummEval relevance bundle is not shipped")
def test_summeval_relevance_bert_score_meets_the_issue_targets():
    # Issue 4: the paper policy lands in the paper's range, the adaptive policy needs at most
    # 0.85x its annotations, loses at most .02 correct and adds no inversion (seed 0, batch 10).
    paper = simulate(str(RELEVANCE), "bert_score_f", **PAPER)
    ours = simulate(str(RELEVANCE), "bert_score_f", policy="adaptive", rule="bayes")
    assert paper.pairs == 120 and paper.annotations_available == 12000
    assert 0.35 <= paper.annotation_fraction <= 0.50
    assert paper.correct >= 0.88 and paper.inversion <= 0.02
    assert ours.annotations_used <= 0.85 * paper.annotations_used
    assert ours.correct >= paper.correct - 0.02
    assert ours.inversion <= paper.inversion


def test_ppi_plus_plus_by_hand_and_without_a_predictor_it_is_the_z_test():
    from scipy.special import ndtri

    from protocol.simulate import ppi_plus_plus

    h = np.array([1, 1, 0, -1, 1, 1, 0, 1, -1, 1])
    f = np.array([1, 1, 0, -1, 1, 0, 0, 1, -1, 1])
    unlabelled = np.array([1, 1, 1, 0, -1, 1, 1, 0, 1, 1, 1, -1, 1, 1, 0, 1, 1, 1, 1, 1])
    n, big_n = len(h), len(unlabelled)
    lam = min(1.0, max(0.0, np.cov(h, f)[0, 1] / ((1 + n / big_n)
                                                   * np.var(np.r_[f, unlabelled], ddof=1))))
    estimate = (h - lam * f).mean() + lam * unlabelled.mean()
    se = np.sqrt((h - lam * f).var(ddof=1) / n + lam ** 2 * unlabelled.var(ddof=1) / big_n)
    for gamma in (0.01, 0.05, 0.3):
        expected = int(np.sign(estimate)) if abs(estimate / se) > ndtri(1 - gamma / 2) else 0
        assert ppi_plus_plus(h, f, unlabelled, gamma) == expected
    # a constant predictor carries nothing: the plain z-test of the human labels
    z = h.mean() / (h.std(ddof=1) / np.sqrt(n))
    for gamma in (0.01, 0.05, 0.3):
        expected = int(np.sign(z)) if abs(z) > ndtri(1 - gamma / 2) else 0
        assert ppi_plus_plus(h, np.zeros(n), np.zeros(big_n), gamma) == expected


def test_baselines_spend_the_fraction_and_a_perfect_metric_makes_ppi_decide_more():
    from protocol.simulate import baselines

    rng = np.random.default_rng(3)
    human, metric = {}, {}
    for k in range(30):
        items = np.array([f"i{j}" for j in range(80)])
        values = rng.choice([1, 0, -1], size=80, p=[0.5, 0.1, 0.4])
        human[(f"A{k:02d}", f"B{k:02d}")] = (items, values)
        metric[(f"A{k:02d}", f"B{k:02d}")] = (items, values.copy())
    found = baselines(human, metric, fraction=0.25, seed=1)
    assert set(found) == {"sign_test", "ppi++"}
    assert all(r.annotation_fraction == 0.25 for r in found.values())
    decided = {name: sum(d != 0 for d in r.decisions.values()) for name, r in found.items()}
    assert decided["ppi++"] > decided["sign_test"]
    with pytest.raises(ValueError, match="fraction"):
        baselines(human, metric, fraction=0)


# --------------------------------------------------------------------------------------------
# simulated annotators: spammers and quality control (issue 11)
# --------------------------------------------------------------------------------------------
def unanimous_pairs(items=120):
    # honest annotators say +1 on every item, so every -1 or 0 in the counts is a spammer's
    return {AB: labels([1] * items), AC: labels([1] * items), BC: labels([1] * items)}


def test_a_crowd_without_spammers_or_checks_is_the_plain_replay():
    from protocol.simulate import Crowd

    human = {AB: labels([1, -1, 1, 0, 1, 1, -1, 1] * 5), AC: labels([1, -1] * 20)}
    plain = replay(human, batch=4, seed=3)
    crowd = replay(human, batch=4, seed=3, crowd=Crowd())
    assert crowd.decisions == plain.decisions and crowd.used == plain.used
    assert crowd.crowd["spam_judgements"] == 0 and crowd.crowd["checks"] == 0
    assert crowd.crowd["annotations_spent"] == plain.annotations_used


def test_spammers_replace_their_share_of_judgements_by_random_answers():
    from protocol.simulate import Crowd

    result = replay(unanimous_pairs(), batch=200, seed=1, crowd=Crowd(spammers=0.3, annotators=100), **PAPER)
    report = result.crowd
    assert report["judgements"] == 360 and report["checks"] == 0
    # 30 of the 100 annotators are spammers, each judgement goes to one at random
    assert 0.3 - 0.08 < report["spam_judgements"] / report["judgements"] < 0.3 + 0.08
    counts = np.sum([result.state.pair(*k).human_counts for k in (AB, AC, BC)], axis=0)
    # a spammer's answer is uniform over +1, 0, -1: two thirds of them are not +1
    assert counts[1] + counts[2] == pytest.approx(report["spam_judgements"] * 2 / 3, abs=25)


def test_quality_control_blocks_spammers_and_the_protocol_decides_without_their_judgements():
    from protocol.simulate import Crowd

    crowd = Crowd(spammers=0.3, quality_control=True, annotators=20, honest_check_accuracy=1.0)
    result = replay(unanimous_pairs(), batch=120, seed=2, crowd=crowd, **PAPER)
    report = result.crowd
    # spammers answer in ~0.2 s: each is flagged too_fast once it has 5 answers
    assert report["spammers_blocked"] >= 6 and report["annotators_blocked"] == report["spammers_blocked"]
    assert report["excluded_judgements"] > 0
    assert report["annotations_spent"] == report["judgements"] + report["checks"]
    assert report["judgements"] == result.annotations_used
    # one task in 10 of every annotator is a check
    assert report["checks"] == pytest.approx(report["annotations_spent"] / 10, rel=0.3)
    # the honest labels all say +1: decided on the judgements kept
    assert all(result.state.pair(*key).decision == 1 for key in (AB, AC, BC))
    # without quality control the same crowd leaves random answers in the counts
    dirty = replay(unanimous_pairs(), batch=120, seed=2, crowd=Crowd(spammers=0.3, annotators=20), **PAPER)
    dirty_counts = np.sum([dirty.state.pair(*k).human_counts for k in (AB, AC, BC)], axis=0)
    clean_counts = np.sum([result.state.pair(*k).human_counts for k in (AB, AC, BC)], axis=0)
    assert dirty_counts[2] > 0
    assert clean_counts[2] + clean_counts[1] < dirty_counts[2] + dirty_counts[1]
    # one label per item here, so the item-unit counts hold exactly the kept judgements
    assert clean_counts.sum() == result.annotations_used - report["excluded_judgements"]


def test_cli_spammers_with_quality_control(tmp_path, capsys):
    bundle = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(bundle, np.random.default_rng(2))
    assert main([str(bundle), "--metric", "none", "--spammers", "0.2", "--quality-control", "--json",
                 "--quiet", "--batch", "10"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(SUMMARY_KEYS) < set(out)
    assert out["spammers"] == 0.2 and out["quality_control"] is True
    assert out["annotations_spent"] == out["judgements"] + out["checks"]
    assert main([str(bundle), "--metric", "none", "--spammers", "1.5", "--quiet"]) == 2
    assert "spammers must be a share" in capsys.readouterr().err
