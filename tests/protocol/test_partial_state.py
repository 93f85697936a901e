"""A partial ProtocolState (``adaptive.Outside``, issue 41): the pairs a close closes or opens,
with totals of the others, closes and opens rounds exactly as the whole state does.

A seeded study of 21 pairs with a metric (the control variate's study-wide moments) under
e-BH, filled a few pairs at a time; before every close the partial state is built from the
filled pairs (and the waiting ones when the budget can open rounds) and totals of the rest.
"""
import math
import random

import pytest

from protocol import adaptive, machine
from protocol.control_variate import Moments

SYSTEMS = [f"S{n}" for n in range(7)]
ITEMS = 24


def study(budget: int, seed: int) -> tuple[adaptive.ProtocolState, dict]:
    rng = random.Random(seed)
    keys = [(a, b) for i, a in enumerate(SYSTEMS) for b in SYSTEMS[i + 1:]]
    labels = {key: {f"i{n}": rng.choice([1, 1, 1, 0, -1]) for n in range(ITEMS)} for key in keys}
    settings = adaptive.ProtocolSettings(budget=budget, batch=4, gamma=0.2, seed=seed)
    return adaptive.start(settings, {key: ITEMS for key in keys}, labels), labels


def partial(state: adaptive.ProtocolState) -> adaptive.ProtocolState:
    """What the app reads: filled pairs (and waiting ones when budget is left), totals of the rest."""
    statuses = {adaptive.FILLED} | ({adaptive.WAITING} if state.budget_left > 0 else set())
    kept = [p for p in state.pairs if p.status in statuses]
    rest = [p for p in state.pairs if p.status not in statuses]
    floor = machine.family_floor(state.settings)
    moments = sum((machine.pair_moments(p) for p in rest), Moments()) if rest else Moments()
    outside = adaptive.Outside(
        pairs=len(rest),
        log_e_values=tuple(v for v in (adaptive.pair_log_e_value(p, state.settings) for p in rest) if v >= floor),
        used=sum(p.judgements + p.quota for p in rest),
        moments=(moments.n, moments.s, moments.m, moments.ss, moments.mm, moments.sm))
    return adaptive.ProtocolState.from_pairs(state.settings, kept, state.closes, outside)


@pytest.mark.parametrize("budget, seed, decides", [(2000, 1, True), (300, 2, False)])
def test_a_partial_state_closes_and_opens_as_the_whole_state(budget, seed, decides):
    """``decides``: an ample budget (e-BH then reads left-out pairs' e-values: k* > 1); a tight
    one leaves pairs waiting with no budget (then none is read)."""
    state, labels = study(budget, seed)
    state = adaptive.open_rounds(state)
    rng = random.Random(seed)
    compared = 0
    while any(p.status == adaptive.OPEN for p in state.pairs):
        # one open pair at a time takes its round (the others stay open mid-way)
        pair = rng.choice([p for p in state.pairs if p.status == adaptive.OPEN])
        items = [i for i in labels[pair.key] if i not in pair.judged_items][:pair.quota]
        state = adaptive.record_judgements(state, *pair.key, items, [labels[pair.key][i] for i in items])
        if rng.random() < 0.5:
            continue  # let filled rounds pile up before a close
        whole = adaptive.open_rounds(adaptive.close_rounds(state))
        some = partial(state)
        after = adaptive.open_rounds(adaptive.close_rounds(some))
        for p in after.pairs:
            assert p == whole.pair(*p.key), p.key
        changed = {b.key for a, b in zip(state.pairs, whole.pairs) if a != b}
        assert changed <= {p.key for p in some.pairs}
        assert (after.closes, after.budget_left) == (whole.closes, whole.budget_left)
        compared += 1
        state = whole
    assert compared >= 10
    if decides:
        assert sum(p.status == adaptive.DECIDED for p in state.pairs) >= 2
    else:
        assert state.budget_left == 0 and any(p.status == adaptive.WAITING for p in state.pairs)


def test_what_needs_every_pair_refuses_a_partial_state():
    state, _ = study(2000, 3)
    some = adaptive.ProtocolState.from_pairs(state.settings, state.pairs[:3], 0, adaptive.Outside(pairs=18))
    with pytest.raises(ValueError, match="needs every pair"):
        some.finished
    with pytest.raises(ValueError, match="needs every pair"):
        adaptive.calibrated(some, {})
    # left-out pairs count as e = 0 unless given: the family's size is every pair's
    assert machine.family_log_e_values(some)[3:] == [-math.inf] * 18


def test_pairs_read_into_a_partial_state_must_be_untouched():
    """``machine.with_pairs`` joins pairs a partial state left out (the active design's neighbours
    read after its fit): only pairs with no judgement and no round, whose totals are nothing."""
    state, labels = study(2000, 4)
    opened = adaptive.open_rounds(state)
    pair = opened.pairs[0]
    items = [i for i in labels[pair.key]][:2]
    judged = adaptive.record_judgements(opened, *pair.key, items, [labels[pair.key][i] for i in items])
    some = adaptive.ProtocolState.from_pairs(state.settings, state.pairs[1:], 0, adaptive.Outside(pairs=1))
    joined = machine.with_pairs(some, [state.pairs[0]])
    assert joined.pairs == state.pairs and joined.outside.pairs == 0 and joined.budget_left == state.budget_left
    for touched in (opened.pairs[0], judged.pairs[0]):  # a round open; judgements
        with pytest.raises(ValueError, match="holds judgements or a round"):
            machine.with_pairs(some, [touched])
    with pytest.raises(ValueError, match="in the state already"):
        machine.with_pairs(adaptive.ProtocolState.from_pairs(state.settings, state.pairs, 0, adaptive.Outside(pairs=1)),
                           [state.pairs[0]])
    with pytest.raises(ValueError, match="holds every pair"):
        machine.with_pairs(state, [state.pairs[0]])
