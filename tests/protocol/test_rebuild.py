"""protocol.adaptive.rebuild_pairs: re-deciding pairs from the judgements that remain."""
import numpy as np
import pytest

from protocol import adaptive
from protocol.state import pair_index, pair_position

SETTINGS = adaptive.ProtocolSettings.paper(budget=200, batch=10, seed=3)


def _run(labels_by_pair, capacities, metric=None, settings=SETTINGS):
    """Every pair's judgements recorded in rounds of ``batch`` and closed, in order."""
    state = adaptive.open_rounds(adaptive.start(settings, capacities, metric))
    queues = {k: list(zip(*v)) for k, v in labels_by_pair.items()}
    while any(p.status == adaptive.OPEN for p in state.pairs):
        for pair in state.pairs:
            if pair.status == adaptive.OPEN:
                take, queues[pair.key] = queues[pair.key][:pair.quota], queues[pair.key][pair.quota:]
                if len(take) < pair.quota:
                    return state
                state = adaptive.record_judgements(state, *pair.key, [i for i, _ in take], [v for _, v in take])
        state = adaptive.open_rounds(adaptive.close_rounds(state))
    return state


def test_rebuild_forgets_a_spammers_labels_and_reopens_the_pair():
    # An even pair: honest annotators say "tie" on every item; a spammer's ten "+1" decided it.
    honest = ([f"i{k}" for k in range(10)], [0] * 10)
    spam = ([f"i{k}" for k in range(10, 20)], [1] * 10)
    state = _run({("A", "B"): (honest[0] + spam[0], honest[1] + spam[1])}, {("A", "B"): 40})
    assert state.pair("A", "B").decision == 1  # the spammer decided the pair
    rebuilt = adaptive.rebuild_pairs(state, {("A", "B"): honest})
    pair = rebuilt.pair("A", "B")
    assert (pair.decision, pair.judgements, pair.status) == (0, 10, adaptive.WAITING)
    assert pair.round == state.pair("A", "B").round + 1
    assert len(pair.theta) == len(state.pair("A", "B").theta) + 1
    assert dict(pair.votes) == {i: 0 for i in honest[0]}
    assert rebuilt.closes == state.closes + 1
    reopened = adaptive.open_rounds(rebuilt).pair("A", "B")
    assert (reopened.status, reopened.quota) == (adaptive.OPEN, 10)


def test_rebuild_counts_equal_a_fresh_run_on_the_same_labels():
    rng = np.random.default_rng(0)
    items = [f"i{k}" for k in range(30)]
    values = rng.choice([-1, 0, 1], size=30, p=[0.2, 0.2, 0.6]).tolist()
    metric = {("A", "B"): {i: int(v) for i, v in zip(items, rng.choice([-1, 0, 1], size=30))}}
    fresh = adaptive.start(SETTINGS, {("A", "B"): 30}, metric)
    fresh = adaptive.open_rounds(fresh)
    fresh = adaptive.rebuild_pairs(fresh, {("A", "B"): (items[:7], values[:7])})
    # The same seven labels recorded as one round of a fresh protocol:
    one_look = adaptive.start(SETTINGS, {("A", "B"): 30}, metric)
    pairs = [p if p.key != ("A", "B") else
             adaptive.replace(p, status=adaptive.OPEN, quota=7, round=1,
                              round_basis=(0,) * 12 + p.metric_only) for p in one_look.pairs]
    one_look = adaptive.replace(one_look, pairs=tuple(pairs))
    one_look = adaptive.close_rounds(adaptive.record_judgements(one_look, "A", "B", items[:7], values[:7]))
    a, b = fresh.pair("A", "B"), one_look.pair("A", "B")
    assert (a.paired, a.human_only, a.metric_only, a.decision, a.theta[-1]) == \
        (b.paired, b.human_only, b.metric_only, b.decision, b.theta[-1])


def test_rebuild_leaves_other_pairs_alone_and_empty_pairs_wait():
    labels = {("A", "B"): (["x1", "x2"], [1, 1]), ("A", "C"): (["x1"], [-1])}
    state = adaptive.open_rounds(adaptive.start(SETTINGS, {("A", "B"): 20, ("A", "C"): 20}))
    state = adaptive.record_judgements(state, "A", "B", *labels[("A", "B")])
    rebuilt = adaptive.rebuild_pairs(state, {("A", "C"): ([], [])})
    assert rebuilt.pair("A", "B") == state.pair("A", "B")
    assert (rebuilt.pair("A", "C").status, rebuilt.pair("A", "C").judgements) == (adaptive.WAITING, 0)


def test_rebuild_grows_capacity_and_names_bad_input():
    state = adaptive.start(SETTINGS, {("A", "B"): 2})
    rebuilt = adaptive.rebuild_pairs(state, {("A", "B"): (["a", "b", "a"], [1, 1, 1])})
    assert rebuilt.pair("A", "B").capacity == 3
    assert rebuilt.pair("A", "B").status in (adaptive.DECIDED, adaptive.EXHAUSTED)
    with pytest.raises(ValueError, match="unknown pair"):
        adaptive.rebuild_pairs(state, {("B", "A"): ([], [])})
    with pytest.raises(ValueError, match="2 items but 1 values"):
        adaptive.rebuild_pairs(state, {("A", "B"): (["a", "b"], [1])})


def test_an_item_judged_again_after_its_judgements_were_excluded_takes_one_new_step():
    """A rebuild keeps the steps of excluded items (their wagers were made); judged again, such an
    item's old step is replaced, never doubled (record_judgements finds it by binary search)."""
    honest = ([f"i{k}" for k in range(10)], [0] * 10)
    spam = ([f"i{k}" for k in range(10, 20)], [1] * 10)
    state = _run({("A", "B"): (honest[0] + spam[0], honest[1] + spam[1])}, {("A", "B"): 40})
    rebuilt = adaptive.rebuild_pairs(state, {("A", "B"): honest}).pair("A", "B")
    assert "i15" in {step[0] for step in rebuilt.steps} and "i15" not in rebuilt.judged_items
    again = adaptive.record_judgements(adaptive.open_rounds(adaptive.rebuild_pairs(state, {("A", "B"): honest})),
                                       "A", "B", ["i15", "i3"], [-1, 0]).pair("A", "B")
    assert [step[:2] for step in again.steps if step[0] == "i15"] == [("i15", -1)]
    assert [step[0] for step in again.steps].count("i3") == 1
    assert list(again.steps) == sorted(again.steps)


def test_a_pair_is_found_by_its_key_among_many_and_a_missing_one_is_named():
    systems = [f"S{k:02d}" for k in range(30)]
    capacities = {(a, b): 5 for i, a in enumerate(systems) for b in systems[i + 1:]}
    state = adaptive.start(SETTINGS, capacities)
    assert all(pair_position(state, key) == index for key, index in pair_index(state).items())
    assert pair_position(state, ("S01", "S00")) is None and pair_position(state, ("S99", "T")) is None
    with pytest.raises(ValueError, match="unknown pair"):
        state.pair("S01", "S00")
