"""protocol.rubric.seed_judgements: judgements imported with a bundle feed each pair's e-process
in an order drawn from the protocol's seed, its bets remade between short rounds (the PandaLM
demo decided none of its 10 pairs when they were one round with every bet made before any label)."""
import numpy as np
import pytest

from protocol import adaptive, rubric

KEYS = [(f"s{a}", f"s{b}") for a in range(5) for b in range(a + 1, 5)]
ITEMS = 100


def _null_study(rng, *, metric: bool):
    """10 pairs; each item's label a fair coin flip (ties 0.2), three judgements per item that
    agree with it 80 % of the time, lines by annotator (as PandaLM's bundle); a random metric."""
    existing, metrics = {}, {}
    for key in KEYS:
        truth = rng.choice([-1, 0, 1], size=ITEMS, p=[0.4, 0.2, 0.4])
        lines = [(f"i{n:03d}", {"q": int(truth[n] if rng.random() < 0.8 else rng.choice([-1, 0, 1]))})
                 for _ in range(3) for n in range(ITEMS)]
        existing[key] = lines
        metrics[key] = {f"i{n:03d}": int(rng.choice([-1, 0, 1])) for n in range(ITEMS)}
    return existing, (metrics if metric else None)


def _seeded(existing, metrics, seed=0, family="none"):
    settings = adaptive.ProtocolSettings(budget=10**6, gamma=0.05, family=family, seed=seed)
    state = rubric.start(settings, ["q"], {key: 3 * ITEMS for key in KEYS}, {"q": metrics})
    return rubric.seed_judgements(state, existing)


def test_a_separated_pair_is_decided_by_the_imported_judgements_and_the_file_order_is_not_read():
    rng = np.random.default_rng(1)
    existing = {key: [(f"i{n:03d}", {"q": int(rng.choice([1, -1], p=[0.75, 0.25]) if key == KEYS[0]
                                              else rng.choice([1, -1]))}) for n in range(ITEMS)] for key in KEYS}
    state = _seeded(existing, None)
    first = state.primary.pairs[0]
    assert (first.status, first.decision, first.judgements) == (adaptive.DECIDED, 1, ITEMS)
    assert first.log_evidence > np.log(20)
    # the same lines in reverse (or sorted by preference, one per item): the same state
    for reorder in (lambda lines: lines[::-1], lambda lines: sorted(lines, key=lambda line: line[1]["q"])):
        again = _seeded({key: reorder(lines) for key, lines in existing.items()}, None)
        assert again.primary.pairs == state.primary.pairs
    # another seed draws another order (the evidence differs, the verdict stands)
    other = _seeded(existing, None, seed=5).primary.pairs[0]
    assert other.log_evidence != first.log_evidence and other.decision == 1


@pytest.mark.slow
@pytest.mark.parametrize("metric", [False, True])
def test_null_pairs_imported_whole_are_falsely_decided_at_most_gamma_of_the_time(metric):
    rng = np.random.default_rng(20261202)
    studies = 40
    false = sum(p.decision != 0 for _ in range(studies)
                for p in _seeded(*_null_study(rng, metric=metric)).primary.pairs)
    # each pair at gamma = 0.05 on its own: at most 20 of 400 expected; 4 / 2000 measured
    assert false <= 0.05 * studies * len(KEYS)
