"""Tests for protocol.arena: the synthetic arena generator with a known true order."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from scipy.stats import norm

from protocol.arena import ArenaSpec, bundle_lines, main, make_arena, write_bundle
from protocol.bundle import read_bundle
from protocol.preferences import human_labels, metric_labels

# sum over the pairs of the default 4 x 50 arena (seed 2) of labels . (0..49), before issue 39
_DEFAULT_CHECKSUM = -987


def test_same_seed_same_bytes_other_seed_other_study(tmp_path):
    spec = ArenaSpec(systems=6, prompts=30, seed=3)
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_bundle(make_arena(spec), a)
    write_bundle(make_arena(spec), b)
    assert a.read_bytes() == b.read_bytes()
    other = tmp_path / "c.jsonl.gz"
    write_bundle(make_arena(ArenaSpec(systems=6, prompts=30, seed=4)), other)
    assert other.read_bytes() != a.read_bytes()


def test_bundle_shape_and_labels_match_the_oracle(tmp_path):
    arena = make_arena(ArenaSpec(systems=5, prompts=12, seed=1))
    path = tmp_path / "arena.jsonl.gz"
    summary = write_bundle(arena, path)
    bundle = read_bundle(str(path))
    assert bundle.systems == arena.names == ("S01", "S02", "S03", "S04", "S05")
    assert len(bundle.items) == 12 and len(bundle.outputs) == 60 and len(bundle.metric_scores) == 60
    assert len(bundle.human_preferences) == 12 * 10
    assert summary["lines"] == 1 + 12 + 60 + 60 + 120
    assert bundle.study["metric"] == "judge_score"
    human = human_labels(bundle)
    metric = metric_labels(bundle, "judge_score")
    for i in range(5):
        for j in range(i + 1, 5):
            pair = human[(arena.names[i], arena.names[j])]
            by_item = dict(zip(pair.items, pair.values))
            assert [by_item[item] for item in arena.items] == arena.human(i, j).tolist()
            got = dict(zip(metric[(arena.names[i], arena.names[j])].items,
                           metric[(arena.names[i], arena.names[j])].values))
            assert [got[item] for item in arena.items] == arena.metric_labels(i, j).tolist()


def test_rows_follow_the_bundle_io_order():
    from scripts.convert.bundle_io import _row_key, check_rows

    arena = make_arena(ArenaSpec(systems=11, prompts=4, seed=0))   # S01..S11: natural = string order
    rows = [json.loads(line) for chunk in bundle_lines(arena) for line in chunk.splitlines()]
    # the converters' checker knows no study settings; read_bundle (tested above) accepts "metric"
    study = {key: value for key, value in rows[0].items() if key != "metric"}
    assert check_rows([study, *rows[1:]]) == []
    assert rows[1:] == sorted(rows[1:], key=_row_key)
    assert all(next(iter(row)) == "kind" for row in rows)


def test_pair_labels_do_not_depend_on_other_pairs_and_are_antisymmetric():
    arena = make_arena(ArenaSpec(systems=4, prompts=50, seed=2))
    again = make_arena(ArenaSpec(systems=4, prompts=50, seed=2))
    assert np.array_equal(arena.human(2, 0), -arena.human(0, 2))
    assert np.array_equal(arena.human(1, 3), again.human(1, 3))
    assert set(np.unique(arena.human(0, 1))) <= {-1, 0, 1}


def test_true_order_is_the_order_of_strengths_and_not_of_names():
    arena = make_arena(ArenaSpec(systems=20, prompts=5, seed=0))
    strengths = arena.strengths[list(arena.true_order)]
    assert np.all(np.diff(strengths) < 0)
    assert arena.true_order != tuple(range(20))
    assert arena.truth(arena.true_order[0], arena.true_order[-1]) == 1


def test_win_probability_matches_the_thurstone_model():
    """Independent reference: with gap 0 apart from two systems and no item discrimination
    spread, P(+) = Phi((delta - tie) / sd) with sd^2 = 2 item_sd^2 + judge_sd^2 per item;
    the generator's discrimination a_t ~ U(0, 2) averages Phi over a."""
    spec = ArenaSpec(systems=2, prompts=200_000, seed=0, gap=0.5)
    arena = make_arena(spec)
    delta = arena.strengths[0] - arena.strengths[1]
    sd = np.sqrt(2 * spec.item_sd ** 2 + spec.judge_sd ** 2)
    a = np.linspace(0, 2, 20001)
    expected_plus = norm.cdf((a * delta - spec.tie) / sd).mean()
    expected_tie = (norm.cdf((spec.tie - a * delta) / sd) - norm.cdf((-spec.tie - a * delta) / sd)).mean()
    labels = arena.human(0, 1)
    # binomial sd at n = 200,000 is about 0.001
    assert np.mean(labels == 1) == pytest.approx(expected_plus, abs=0.005)
    assert np.mean(labels == 0) == pytest.approx(expected_tie, abs=0.005)


def test_prompt_kinds_move_each_pair_by_its_own_kind_effect():
    """Independent reference: with all strengths equal (gap 0), on prompts of kind g a pair's
    P(+) is Phi((u[i, g] - u[j, g] - tie) / sd), sd^2 = 2 item_sd^2 + judge_sd^2 (no
    discrimination enters); the generator's own formula is not used, only its drawn effects.
    Without kinds, the same arena has one win share on all prompts."""
    spec = ArenaSpec(systems=3, prompts=60_000, seed=4, gap=0.0, prompt_types=3, type_sd=1.0)
    arena = make_arena(spec)
    assert arena.type_effect.shape == (3, 3)
    assert np.bincount(arena.kinds).tolist() == [20_000] * 3          # balanced kinds
    sd = np.sqrt(2 * spec.item_sd ** 2 + spec.judge_sd ** 2)
    labels = arena.human(0, 2)
    shares = []
    for g in range(3):
        delta = arena.type_effect[0, g] - arena.type_effect[2, g]
        share = np.mean(labels[arena.kinds == g] == 1)
        # binomial sd at n = 20,000 is at most 0.0036
        assert share == pytest.approx(norm.cdf((delta - spec.tie) / sd), abs=0.015)
        shares.append(share)
    assert max(shares) - min(shares) > 0.1                              # the effect is there
    plain = make_arena(ArenaSpec(systems=3, prompts=60_000, seed=4, gap=0.0)).human(0, 2)
    assert np.all(make_arena(ArenaSpec(systems=3, prompts=60_000, seed=4, gap=0.0)).kinds == 0)
    by_third = [np.mean(plain[k::3] == 1) for k in range(3)]
    assert max(by_third) - min(by_third) < 0.02


def test_without_departures_the_arena_is_unchanged():
    """The new options off by default: the same labels, qualities and metric as before them
    (a checksum of the default arena's labels taken before the options existed)."""
    arena = make_arena(ArenaSpec(systems=4, prompts=50, seed=2))
    assert int(np.sum([arena.human(i, j).astype(np.int64) @ np.arange(50) for i in range(4)
                       for j in range(i + 1, 4)])) == _DEFAULT_CHECKSUM


def test_logistic_link_has_the_logistic_win_probability():
    """Independent reference: all equal, no item noise: d = judge_sd L with L logistic of sd 1
    (scale sqrt(3) / pi), so P(+) = 1 / (1 + exp(tie pi / (sqrt(3) judge_sd)))."""
    spec = ArenaSpec(systems=2, prompts=200_000, seed=1, gap=0.0, item_sd=0.0, link="logistic")
    labels = make_arena(spec).human(0, 1)
    expected = 1 / (1 + np.exp(spec.tie * np.pi / (np.sqrt(3) * spec.judge_sd)))
    assert np.mean(labels == 1) == pytest.approx(expected, abs=0.005)
    probit = make_arena(ArenaSpec(systems=2, prompts=200_000, seed=1, gap=0.0, item_sd=0.0)).human(0, 1)
    assert np.mean(probit == 1) == pytest.approx(norm.sf(spec.tie / spec.judge_sd), abs=0.005)


def test_tiers_are_equal_and_the_cycle_is_intransitive_in_the_labels():
    tiers = make_arena(ArenaSpec(systems=9, prompts=10, seed=0, tier_size=3))
    assert len(np.unique(np.round(tiers.strengths, 12))) == 3
    arena = make_arena(ArenaSpec(systems=7, prompts=40_000, seed=3, cycle=2.0))
    a, b, c = arena.cycle
    assert arena.strengths[a] > arena.strengths[b] > arena.strengths[c]
    assert list(arena.true_order[2:5]) == [a, b, c]                    # the middle three

    def share(i, j):
        labels = arena.human(i, j)
        return np.mean(labels == 1) / np.mean(labels != 0)

    assert share(a, b) > 0.5 and share(b, c) > 0.5 and share(c, a) > 0.5
    wins = arena.population_wins()
    assert wins[a, b] > 0.5 and wins[b, c] > 0.5 and wins[c, a] > 0.5
    labels = arena.human(c, a)                                        # a tie half a win, as population_wins
    assert wins[c, a] == pytest.approx(np.mean(labels == 1) + np.mean(labels == 0) / 2, abs=0.01)


def test_null_arena_has_equal_strengths():
    arena = make_arena(ArenaSpec(systems=5, prompts=10, gap=0.0))
    assert np.all(arena.strengths == 0) and arena.truth(0, 1) == 0


@pytest.mark.parametrize("field, value", [("systems", 1), ("prompts", 0), ("gap", -1.0), ("tie", float("nan")),
                                          ("prompt_types", -1), ("type_sd", -0.5), ("link", "cauchit"),
                                          ("tier_size", 1.5)])
def test_bad_spec_is_refused_with_its_name(field, value):
    with pytest.raises(ValueError, match=field):
        ArenaSpec(**{field: value})


def test_command_line_writes_a_readable_bundle(tmp_path, capsys):
    out = tmp_path / "cli.jsonl.gz"
    assert main(["make", "--systems", "4", "--prompts", "6", "--seed", "1", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["lines"] == 1 + 6 + 24 + 24 + 36 and len(summary["true_order"]) == 4
    assert gzip.open(out, "rt").readline().startswith('{"kind":"study"')
    assert len(read_bundle(str(out)).human_preferences) == 36


def test_command_line_puts_study_settings_on_the_study_line(tmp_path, capsys):
    """``--study-setting KEY=VALUE`` (scripts/bench/scale.sh's STUDY_SETTINGS): the value as
    JSON when it is one, else as text; a setting without "=" is refused by name."""
    out = tmp_path / "active.jsonl.gz"
    assert main(["make", "--systems", "4", "--prompts", "6", "--no-human", "--out", str(out),
                 "--study-setting", "pair_design=active", "--study-setting", "batch_size=25",
                 "--study-setting", "ranking_confidence=0.9"]) == 0
    study = json.loads(gzip.open(out, "rt").readline())
    assert (study["pair_design"], study["batch_size"], study["ranking_confidence"]) == ("active", 25, 0.9)
    assert read_bundle(str(out)).study["pair_design"] == "active"
    capsys.readouterr()
    assert main(["make", "--systems", "4", "--prompts", "6", "--out", str(out), "--study-setting", "batch"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_an_arena_with_prompt_types_writes_every_items_kind(tmp_path):
    """A study of an arena with prompt types can fit by kind as the replay does: each item's
    prompt_kind is its kind in the arena; an arena without types writes none."""
    typed = make_arena(ArenaSpec(systems=4, prompts=12, seed=1, prompt_types=3, type_sd=0.5))
    write_bundle(typed, tmp_path / "typed.jsonl.gz")
    kinds = {item.id: item.prompt_kind for item in read_bundle(str(tmp_path / "typed.jsonl.gz")).items}
    assert kinds == {item: f"kind-{int(g)}" for item, g in zip(typed.items, typed.kinds)}
    assert len(set(kinds.values())) == 3
    write_bundle(make_arena(ArenaSpec(systems=4, prompts=12, seed=1)), tmp_path / "plain.jsonl.gz")
    assert {item.prompt_kind for item in read_bundle(str(tmp_path / "plain.jsonl.gz")).items} == {""}
