"""The metric as a control variate of the default e-process (issue 38 part 3,
protocol.control_variate): lam = 0 is the human-only rule, swapping the systems mirrors
everything, the nulls keep false decisions within gamma, an informative metric saves labels
(the rule before it saved none), and the calibration of several metrics never reads the
pair's own labels."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import adaptive
from protocol.control_variate import Moments, cross_fitted_predictions, cv_bet, features_of, reliance
from protocol.rules import bet
from protocol.simulate import main, null_tables, replay
from protocol.state import full_step
from tests.builders.bundles import write_tiny_bundle

GAMMA = 0.05


@given(st.integers(0, 60), st.integers(0, 60), st.floats(0, 50), st.floats(-50, 50), st.floats(0, 2),
       st.floats(0.1, 0.9))
def test_with_no_reliance_the_bet_is_the_human_only_bet(wins, losses, square, cross, reach, max_bet):
    human = cv_bet(wins, losses, square, cross, 0.0, reach, max_bet=max_bet)
    assert human == pytest.approx(bet(np.zeros((3, 3)), [wins, 0, losses], [0, 0, 0], max_bet=max_bet), abs=1e-15)


def informative_study(seed: int, *, systems: int = 5, items: int = 80, agree: float = 0.85, effect: float = 0.0,
                      ties: float = 0.2):
    """Human and metric labels of every pair of ``systems`` systems: the humans prefer the
    first system with margin ``effect`` (times the pair's rank gap), the metric copies the
    human label with probability ``agree`` and otherwise draws one at random."""
    rng = np.random.default_rng(seed)
    names = [f"S{k}" for k in range(systems)]
    ids = np.array([f"i{j:03d}" for j in range(items)])
    human, metric = {}, {}
    for i, a in enumerate(names):
        for j in range(i + 1, systems):
            shift = effect * (j - i)
            p = [(1 - ties) * (1 + shift) / 2, ties, (1 - ties) * (1 - shift) / 2]
            h = rng.choice([1, 0, -1], size=items, p=p)
            m = np.where(rng.random(items) < agree, h, rng.choice([1, 0, -1], size=items))
            human[(a, names[j])] = (ids, h)
            metric[(a, names[j])] = (ids, m)
    return human, metric


def test_a_metric_without_information_leaves_the_human_only_run_unchanged():
    # every metric label a tie: no variance, so lam = 0 at every round and the run is the
    # human-only run, step for step
    human, metric = informative_study(3, effect=0.15)
    flat = {key: (items, np.zeros_like(values)) for key, (items, values) in metric.items()}
    alone = replay(human, None, seed=3)
    with_flat = replay(human, flat, seed=3)
    assert with_flat.decisions == alone.decisions and with_flat.used == alone.used
    for a, b in zip(alone.state.pairs, with_flat.state.pairs):
        assert a.log_evidence == pytest.approx(b.log_evidence, abs=1e-12)
        assert all(lam == 0 for *_, lam, _, _ in b.steps)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 0, -1]), st.sampled_from([1, 0, -1])), min_size=12, max_size=40),
       st.integers(0, 3))
def test_swapping_the_systems_mirrors_the_evidence_and_the_decision(labels, seed):
    items = [f"i{k:02d}" for k in range(len(labels))]
    human = {("A", "B"): (np.array(items), np.array([h for h, _ in labels]))}
    metric = {("A", "B"): (np.array(items), np.array([m for _, m in labels]))}
    mirrored_human = {key: (i, -v) for key, (i, v) in human.items()}
    mirrored_metric = {key: (i, -v) for key, (i, v) in metric.items()}
    one = replay(human, metric, seed=seed, batch=5, family="none").state.pair("A", "B")
    two = replay(mirrored_human, mirrored_metric, seed=seed, batch=5, family="none").state.pair("A", "B")
    assert two.log_evidence == pytest.approx(one.log_evidence, abs=1e-9)
    assert two.decision == -one.decision
    assert [s[2] for s in two.steps] == pytest.approx([-s[2] for s in one.steps])   # bets mirrored
    assert [s[4] for s in two.steps] == pytest.approx([s[4] for s in one.steps])    # reliance the same


@pytest.mark.parametrize("favour", [0.0, 0.5])
def test_on_nulls_with_an_informative_metric_false_decisions_stay_within_gamma(favour):
    # item-flip null (metric and humans flip together, the metric agrees 85 %) and the
    # favouritism null (half the metric labels say the first system, the humans stay null);
    # each pair on its own at gamma (family none), 10 pairs x 8 seeds
    false = total = 0
    relied = False
    for seed in range(8):
        human, metric = informative_study(seed)
        human, (metric,) = null_tables(human, [metric], seed=seed, favour=favour)
        result = replay(human, metric, seed=seed, family="none")
        false += sum(d != 0 for d in result.decisions.values())
        total += len(result.decisions)
        relied |= any(step[4] != 0 for p in result.state.pairs for step in p.steps)
    assert relied
    assert false / total <= GAMMA + 3 * math.sqrt(GAMMA * (1 - GAMMA) / total)


def test_an_informative_metric_decides_more_pairs_right_for_about_the_same_labels():
    # the rule before the control variate (imputed labels in the bet) gained little correctness
    runs = {"human": [], "cv": [], "old": []}
    for seed in range(4):
        human, metric = informative_study(10 + seed, effect=0.12, agree=0.9)
        runs["human"].append(replay(human, None, seed=seed))
        runs["cv"].append(replay(human, metric, seed=seed))
        runs["old"].append(replay(human, metric, seed=seed, control_variate=False))

    def used(name):
        return sum(r.annotations_used for r in runs[name])

    def correct(name):
        return np.mean([r.correct for r in runs[name]])

    assert correct("cv") >= correct("human") + 0.15 and used("cv") <= 1.05 * used("human")
    assert correct("old") < correct("human") + 0.15


def test_the_reliance_is_the_shrunk_least_squares_slope():
    s = np.array([1, 1, -1, 0, 1, -1, 1, 0])
    m = np.array([1, 0, -1, 0, 1, -1, 1, 1])
    slope = np.cov(s, m, bias=True)[0, 1] / np.var(m)
    assert reliance(Moments.of(s, m), prior=0) == pytest.approx(slope)
    assert reliance(Moments.of(s, m), prior=8) == pytest.approx(slope / 2)
    assert reliance(Moments()) == 0 and reliance(Moments.of([1, -1], [0, 0])) == 0


def test_the_calibration_of_a_pair_never_reads_its_own_labels_and_mirrors_with_it():
    rng = np.random.default_rng(0)
    pairs = [("A", "B"), ("A", "C"), ("B", "C")]
    features = {p: {f"i{k}": tuple(rng.choice([-1.0, 0.0, 1.0], 2)) for k in range(20)} for p in pairs}
    judged = {p: {f"i{k}": int(rng.choice([-1, 0, 1])) for k in range(12)} for p in pairs}
    base = cross_fitted_predictions(features, judged)
    changed = {**judged, ("A", "B"): {item: -v for item, v in judged[("A", "B")].items()}}
    assert cross_fitted_predictions(features, changed)[("A", "B")] == base[("A", "B")]
    assert cross_fitted_predictions(features, changed)[("A", "C")] != base[("A", "C")]
    mirrored = cross_fitted_predictions(
        {**features, ("A", "B"): {i: tuple(-x for x in f) for i, f in features[("A", "B")].items()}}, changed)
    assert mirrored[("A", "B")] == pytest.approx({i: -v for i, v in base[("A", "B")].items()})
    # before any other pair has labels the prediction is the first metric's value
    first = cross_fitted_predictions(features, {})
    assert first[("A", "C")] == {i: f[0] for i, f in features[("A", "C")].items()}


def test_several_metrics_combine_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl.gz"
    write_tiny_bundle(path, np.random.default_rng(2))
    assert main([str(path), "--metric", "m1,m1", "--json", "--quiet"]) == 0
    assert '"annotation_fraction"' in capsys.readouterr().out
    assert main([str(path), "--metric", "m1,nope", "--json", "--quiet"]) == 2


def test_a_step_reads_the_same_in_either_stored_shape():
    """protocol.state.full_step: a step of 7 fields (as stored since the control variate) and
    of 4 (before it: lam = m = c = 0) as one typed tuple; JSON's ints become floats."""
    assert full_step(["i3", 1, 1, 0.5]) == ("i3", 1, 1.0, 0.5, 0.0, 0.0, 0.0)
    seven = full_step(["i3", -1, 0.25, 1, 0, 1, -0.5])
    assert seven == ("i3", -1, 0.25, 1.0, 0.0, 1.0, -0.5)
    assert [type(x) for x in seven] == [str, int, float, float, float, float, float]


def test_features_hold_each_metric_in_its_column_and_zero_where_it_has_no_label():
    first = {("A", "B"): {"i1": 1, "i2": -1}, ("A", "C"): {"i1": 0}}
    second = {("A", "B"): {"i2": 1, "i3": -1}}
    assert features_of([first, second]) == {
        ("A", "B"): {"i1": (1.0, 0.0), "i2": (-1.0, 1.0), "i3": (0.0, -1.0)},
        ("A", "C"): {"i1": (0.0, 0.0)},
    }


@given(st.lists(st.tuples(st.sampled_from(["i1", "i2", "i3", "i4"]), st.sampled_from([-1, 0, 1]),
                          st.sampled_from([-1, 0, 1])), min_size=1, max_size=8))
def test_features_mirror_when_the_systems_swap(rows):
    first = {("A", "B"): {item: a for item, a, _ in rows}}
    second = {("A", "B"): {item: b for item, _, b in rows}}
    swapped = [{key: {item: -v for item, v in labels.items()} for key, labels in table.items()}
               for table in (first, second)]
    plain, mirrored = features_of([first, second]), features_of(swapped)
    assert {item: tuple(-x for x in v) for item, v in plain[("A", "B")].items()} == mirrored[("A", "B")]

