"""A round close costs what it changes (issue 41, part 2): it decodes the pairs whose rounds
filled (and the waiting pairs when the budget can open rounds) and reads the others as totals
summed in SQL, yet decides exactly what the close over every pair decides.

Every close of a seeded crowd run over a study of 28 pairs (a metric, so the control variate's
study-wide moments are used; e-BH across the pairs; an ample and a tight budget) is computed
both ways on the same rows: the partial state's pairs after the close and the openings equal
the full state's, and every pair the full close changes is one the partial close holds.
"""
import collections
import importlib
import random

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import jobs
from annotation.models import PairState, Study
from annotation.services import hits, runtime
from annotation.services.studies import study_import
from annotation.serving import protocol_state
from protocol import adaptive, machine, ranking_design, rubric
from protocol.level_prior import margin_posteriors
from protocol.state import full_step
from tests.builders.annotating import workers_of
from tests.builders.bundles import bundle_bytes, many_systems_rows

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEMS = 8  # 28 pairs
ITEMS = 16


def many_pairs_study(slug: str, budget: int) -> Study:
    rows = many_systems_rows(SYSTEMS, items=ITEMS)
    rows[0].update(name=slug, batch_size=4, budget=budget, gamma=0.2)
    return study_import(source=bundle_bytes(rows), slug=slug, metric="m")


def serve_until_done(study: Study, workers: dict, value_of, after_submit=None) -> None:
    """Serve the workers in turn until none gets a HIT; ``value_of(first, second)`` is the
    canonical label; ``after_submit()`` runs after every submit."""
    for _ in range(1000):
        served = False
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            value = value_of(hit.comparison.first.name, hit.comparison.second.name)
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value)
            served = True
            if after_submit is not None:
                after_submit()
        if not served:
            return


def closed_and_opened(study: Study, state: rubric.RubricState, read_in: list | None = None) -> rubric.RubricState:
    """The close and the openings as runtime's close pass makes them; the pairs a partial
    state left out that the design asked for are read as the close reads them (``read_in``
    collects them)."""
    def more(keys):
        _, pairs = protocol_state.study_pairs_read(study, keys)
        if read_in is not None:
            read_in.extend(pairs)
        return pairs
    return runtime.rounds_opened(study=study, state=rubric.close_rounds(state), more=more)


def both_ways_equal(study: Study, read_in: list | None = None) -> tuple[int, int]:
    """Compare the partial close with the full one on the rows as they are; returns (pairs the
    partial state decoded, pairs the full close changed). ``read_in`` collects the pairs the
    design read in beyond the snapshot."""
    _, full = protocol_state.study_state_snapshot(study)
    _, partial = protocol_state.study_close_snapshot(study)
    assert partial.lanes[0].outside is not None, "the close read every pair"
    full_after, partial_after = closed_and_opened(study, full), closed_and_opened(study, partial, read_in)
    position = {key: index for index, key in enumerate(full.keys)}
    for index, key in enumerate(partial_after.keys):
        for lane, (partial_lane, full_lane) in enumerate(zip(partial_after.lanes, full_after.lanes)):
            assert partial_lane.pairs[index] == full_lane.pairs[position[key]], (lane, key)
        assert partial_after.hits[index] == full_after.hits[position[key]], key
    changed = {full.keys[index] for index in rubric.changed_pairs(full, full_after)}
    assert changed <= set(partial_after.keys), changed - set(partial_after.keys)
    assert partial_after.closes == full_after.closes
    assert partial_after.budget_left == full_after.budget_left
    return len(partial.keys), len(changed)


def close_both_ways(study: Study, compared: list, *, read_in: list | None = None, before=None, after=None,
                    fewer: bool = True):
    """The close a serving loop runs when a round has filled: computed both ways first
    (``both_ways_equal``, the partial state's decoded pairs appended to ``compared``), then run.
    ``before()`` / ``after()`` run around the comparison; ``fewer``: the partial state decoded
    fewer pairs than the study has."""
    def close() -> None:
        if PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
            study.refresh_from_db()
            if before:
                before()
            decoded, _ = both_ways_equal(study, read_in)
            if after:
                after()
            if fewer:
                assert decoded < PairState.objects.filter(study=study).count()
            compared.append(decoded)
            runtime.rounds_close(study_id=study.pk)
    return close


@pytest.mark.parametrize("budget", [2000, 300])
def test_a_close_decides_as_the_full_close_from_the_filled_pairs_and_totals(budget, monkeypatch):
    study = many_pairs_study(f"close-cost-{budget}", budget)
    rng = random.Random(budget)
    workers = workers_of([f"cc{budget}-{n}" for n in range(6)])
    # the closes the submits ask for wait: each is computed both ways first
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)
    compared = []

    def totals_are_the_sums():
        # the totals this process keeps by group of pairs are the sums over every pair: exactly,
        # but for the level prior's, which are no integers and so round in the order they add
        kept = protocol_state._study_totals(study)[0]
        summed = {name: value or 0 for name, value in
                  PairState.objects.filter(study=study).aggregate(**protocol_state._TOTALS).items()}
        levels = protocol_state.LEVEL_COLUMNS
        assert {k: v for k, v in kept.items() if k not in levels} == {k: v for k, v in summed.items() if k not in levels}
        assert [kept[k] for k in levels] == pytest.approx([summed[k] for k in levels], rel=1e-12, abs=1e-15)

    serve_until_done(study, workers, lambda first, second: (1 if first < second else -1) if rng.random() < 0.85
                     else rng.choice([0, -1, 1]), close_both_ways(study, compared, after=totals_are_the_sums))
    decided = PairState.objects.filter(study=study, status=adaptive.DECIDED).count()
    assert len(compared) >= 10
    # the pairs' level-prior sums were written and summed, not zeros throughout
    assert PairState.objects.filter(study=study, level_k=1).exists()
    # e-BH then read other pairs' e-values from the column (k* > 1 at some close)
    assert decided >= 2


def combined_study(slug: str, budget: int, useless: bool, *, systems: int = SYSTEMS, items: int = ITEMS,
                   gamma: float = 0.2) -> Study:
    """``many_pairs_study`` combining a second metric m2 with m (Study.combined_metrics): the
    calibrated predictions, not m's labels, enter the control variate. m2 ranks the systems as
    m does with its own item noise, or (``useless``) is a seeded coin per output."""
    rng = random.Random(slug)
    rows = many_systems_rows(systems, items=items)
    rows[0].update(name=slug, batch_size=4, budget=budget, gamma=gamma, combined_metrics="m2")
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": f"sys{j:02d}", "metric": "m2",
              "score": rng.random() if useless else systems - j + 3 * rng.random()}
             for n in range(items) for j in range(systems)]
    study = study_import(source=bundle_bytes(rows), slug=slug, metric="m")
    assert protocol_state.close_reads_some(study)
    return study


@pytest.mark.parametrize("budget, useless", [(2000, False), (2000, True), (300, False)])
def test_a_close_with_combined_metrics_decides_as_the_full_close(budget, useless, monkeypatch):
    """A study that combines metrics: the close reads the filled (and waiting) pairs and the
    others' calibration sums by group (``PairState.calibration``), the pairs about to open are
    calibrated on every other pair's labels, and every pair after the close and the openings
    equals the full close's to the last bit (predictions, bets, wealth: the control variate's
    moments summed exactly both ways). Fails on the close that read every pair of a study with
    combined metrics. Every fifth close forgets the rows' sums (as rows written before the
    column, or for other metrics), which the close then sums from their state."""
    study = combined_study(f"combined-close-{budget}-{int(useless)}", budget, useless)
    rng = random.Random(budget + useless)
    workers = workers_of([f"cb{budget}{int(useless)}-{n}" for n in range(6)])
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)
    compared = []

    def every_fifth_forgets_the_sums():
        if len(compared) % 5 == 4:
            PairState.objects.filter(study=study).update(calibration={})
            protocol_state._group_totals.clear()

    serve_until_done(study, workers, lambda first, second: (1 if first < second else -1) if rng.random() < 0.85
                     else rng.choice([0, -1, 1]), close_both_ways(study, compared, before=every_fifth_forgets_the_sums))
    assert len(compared) >= 10
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    # the bets used the calibrated predictions, whose moments are no integers
    assert any(p.prediction for p in state.pairs)
    assert any(not full_step(step)[5].is_integer() for p in state.pairs for step in p.steps)
    if budget < 1000:
        assert state.budget_left == 0


def test_a_close_with_combined_metrics_decodes_only_the_pairs_whose_rounds_filled(monkeypatch):
    """Fails on the close that decoded every pair of a study with combined metrics (28 here,
    19,900 at 200 systems)."""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)  # no close in the submits
    study = combined_study("combined-decodes", 2000, False)
    filled = served_until_one_pair_fills(study, workers_of([f"cbd-{n}" for n in range(6)]), shown_value=1)
    decoded = decoded_by_one_close(study, monkeypatch)
    total = PairState.objects.filter(study=study).count()
    assert decoded == [f"pair {filled.pk} of study {study.slug!r}"], f"{len(decoded)} of {total} pairs decoded"


def ordering_study_served(*, design: str, slug: str, systems: int, items: int, metric: bool, truth_seed: int,
                          answer_seed: int, agreement: float, monkeypatch,
                          second: str | None = None) -> tuple[Study, list[int], list]:
    """A study of an ordering ``design`` over ``systems`` systems served until done by workers
    who agree with a seeded order ``agreement`` of the time (not the metric's, nor the seeded
    shuffle's), every close compared with the full close first (``both_ways_equal``): the study,
    the pairs each close decoded, and the pairs the design read in beyond its snapshot.
    ``second``: combine a metric m2 with m (Study.combined_metrics), "informative" (ranks the
    systems as m does, with its own item noise) or "useless" (a seeded coin per output)."""
    rows = many_systems_rows(systems, items=items)
    rows[0].update(name=slug, batch_size=4, budget=3000, gamma=0.2, pair_design=design, family_control="none")
    if second:
        rows[0]["combined_metrics"] = "m2"
        coin = random.Random(slug)
        rows += [{"kind": "metric_score", "item": f"i{n}", "system": f"sys{j:02d}", "metric": "m2",
                  "score": coin.random() if second == "useless" else systems - j + 3 * coin.random()}
                 for n in range(items) for j in range(systems)]
    if not metric:
        del rows[0]["metric"]
        rows = [row for row in rows if row["kind"] != "metric_score"]
    study = study_import(source=bundle_bytes(rows), slug=slug, metric="m" if metric else None)
    assert protocol_state.close_reads_some(study)
    truth = {f"sys{n:02d}": rank for rank, n in enumerate(random.Random(truth_seed).sample(range(systems), systems))}
    rng = random.Random(answer_seed)
    workers = workers_of([f"{slug}-{n}" for n in range(6)])
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)
    compared, read_in = [], []

    def value_of(first, second):
        better = 1 if truth[first] < truth[second] else -1
        return better if rng.random() < agreement else -better

    serve_until_done(study, workers, value_of, close_both_ways(study, compared, read_in=read_in, fewer=False))
    return study, compared, read_in


ACTIVE_SYSTEMS = 14  # 91 pairs, more neighbours than the design's width (10 rounds in flight)


@pytest.mark.parametrize("metric, second", [(True, None), (False, None), (True, "informative"), (True, "useless")])
def test_an_active_close_decides_and_funds_as_the_full_close_from_the_labelled_pairs(metric, second, monkeypatch):
    """The active design's close reads the pairs with labels or a round, and the fitted order's
    neighbours it lacks (``study_pairs_read``); its closes, fits and fundings equal the full
    state's pair for pair. Fails on the close that read every pair of an advancing design
    (with a second metric combined: of one that combined metrics; the pairs left out have no
    judgement, so their calibration sums are zero). The humans' order is not the metric's (or
    the seeded shuffle's), so the fit reorders and funds pairs the start did not."""
    study, compared, read_in = ordering_study_served(
        design="active", slug=f"active-close-{int(metric)}{second or ''}", systems=ACTIVE_SYSTEMS, items=ITEMS,
        metric=metric, truth_seed=7, answer_seed=int(metric), agreement=0.8, monkeypatch=monkeypatch, second=second)
    pairs = ACTIVE_SYSTEMS * (ACTIVE_SYSTEMS - 1) // 2
    assert len(compared) >= 20 and max(compared) < pairs
    assert read_in, "the fit never asked for a pair beyond those with labels"
    judged = PairState.objects.filter(study=study, hits__gt=0).count()
    assert ACTIVE_SYSTEMS - 1 < judged < pairs
    if second:
        assert_bets_used_the_calibration(study)


def assert_bets_used_the_calibration(study: Study) -> None:
    """The study's combined metrics reached its bets: some pair opened a round with a
    calibrated prediction, and its control variate's moments are then no integers. Fails on
    an active design that opened its rounds itself, after the calibration had looked for pairs
    about to open (``runtime.metrics_combined``) and found none."""
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    assert any(p.prediction for p in state.pairs), "no pair carries a calibrated prediction"
    assert any(not full_step(step)[5].is_integer() for p in state.pairs for step in p.steps)


def test_an_active_close_starts_its_fit_from_the_last_close(monkeypatch):
    """Each close of an active study after the process's first starts the Bradley–Terry solver
    from the fit the close before left (runtime's LastFit, issue 41 part 2), and the fit is the
    cold fit's to the solver's tolerance. Fails on the close that fitted every close from
    scratch (no start)."""
    import protocol.active_ranking as active_ranking

    starts, fits = [], []

    def recorded(wins, *, prior_ties, start=None):
        scores = real(wins, prior_ties=prior_ties, start=start)
        cold = real(wins, prior_ties=prior_ties)
        assert np.allclose(scores, cold, atol=1e-7)
        starts.append(None if start is None else start.copy())
        fits.append(scores.copy())
        return scores

    real = active_ranking.fit_scores
    monkeypatch.setattr(active_ranking, "fit_scores", recorded)
    rows = many_systems_rows(8, items=ITEMS)
    rows[0].update(name="active warm", batch_size=4, budget=3000, gamma=0.2, pair_design="active",
                   family_control="none")
    study = study_import(source=bundle_bytes(rows), slug="active-warm", metric="m")
    rng = random.Random(3)
    serve_until_done(study, workers_of([f"warm-{n}" for n in range(4)]),
                     lambda first, second: (1 if first < second else -1) if rng.random() < 0.8 else -1)
    assert len(starts) >= 10
    assert starts[:2] == [None, None]  # the protocol's start, the process's first close
    assert all(start is not None and np.array_equal(start, fit) for start, fit in zip(starts[2:], fits[1:]))


RUBRIC_CRITERIA = [{"name": "helpfulness"}, {"name": "correctness", "metric": "m2"}, {"name": "style"}]


def rubric_study(slug: str, budget: int, metric: bool, systems: int = SYSTEMS, items: int = ITEMS,
                 gamma: float = 0.2, combined: bool = False) -> Study:
    """A three-criterion rubric over ``systems`` systems: with ``metric``, the first criterion
    uses the study's metric m and the second its own m2 (ranking the systems the other way
    round: each lane's control variate its own), the third is human only; without, all three.
    ``combined``: the first two lanes each combine the other's metric with their own
    (Study.combined_metrics: each lane its own calibration)."""
    rows = many_systems_rows(systems, items=items)
    criteria = [dict(c) for c in RUBRIC_CRITERIA]
    rows[0].update(name=slug, batch_size=4, budget=budget, gamma=gamma, criteria=criteria)
    if combined:
        rows[0]["combined_metrics"] = "m2; correctness: m"
    if metric:
        rows += [{"kind": "metric_score", "item": f"i{n}", "system": f"sys{j:02d}", "metric": "m2",
                  "score": 0.5 * j + (n * 7 + j * 3) % 5} for n in range(items) for j in range(systems)]
    else:
        del rows[0]["metric"], criteria[1]["metric"]
        rows = [row for row in rows if row["kind"] != "metric_score"]
    return study_import(source=bundle_bytes(rows), slug=slug, metric="m" if metric else None)


def serve_rubric_until_done(study: Study, workers: dict, value_of, after_submit=None) -> None:
    """``serve_until_done`` for a rubric: ``value_of(criterion, first, second)`` is the
    canonical label of each criterion."""
    for _ in range(1000):
        served = False
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            first, second = hit.comparison.first.name, hit.comparison.second.name
            sign = -1 if hit.shown_swapped else 1
            answers = {c["name"]: {"value": sign * value_of(c["name"], first, second)} for c in RUBRIC_CRITERIA}
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=0, answers=answers)
            served = True
            if after_submit is not None:
                after_submit()
        if not served:
            return


@pytest.mark.parametrize("budget, metric, combined", [(3000, True, False), (3000, False, False), (400, True, False),
                                                      (3000, True, True)])
def test_a_rubric_close_decides_and_funds_as_the_full_close_in_every_lane(budget, metric, combined, monkeypatch):
    """A rubric's close reads the filled pairs (and the waiting ones when the budget can open
    rounds) and each lane's totals of the others: the first lane's from the columns, the
    others' from ``lanes_close`` (each lane its own e-BH family and control variate). Every
    lane of every pair after the close and the openings equals the full close's. Fails on the
    close that read every pair of a rubric. The criteria disagree (helpfulness follows the
    systems' order, correctness the reverse, style a coin), so lanes stop at different times.
    With combined metrics each of the first two lanes is calibrated on its own sums (fails too
    on the close that read every pair of a study with combined metrics)."""
    study = rubric_study(f"rubric-close-{budget}-{int(metric)}{int(combined)}", budget, metric, combined=combined)
    assert protocol_state.close_reads_some(study)
    rng = random.Random(budget + metric)
    workers = workers_of([f"rb{budget}{int(metric)}{int(combined)}-{n}" for n in range(6)])
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)
    compared = []

    def value_of(criterion, first, second):
        if criterion == "style":
            return rng.choice([-1, 0, 1])
        better = 1 if first < second else -1
        better = better if criterion == "helpfulness" else -better
        return better if rng.random() < 0.85 else -better

    serve_rubric_until_done(study, workers, value_of, close_both_ways(study, compared))
    assert len(compared) >= 10
    state = protocol_state.study_rubric_load(study, PairState.objects.filter(study=study))
    decided = {name: sum(p.status == adaptive.DECIDED for p in lane.pairs)
               for name, lane in zip(state.criteria, state.lanes)}
    predicted = [any(p.prediction for p in lane.pairs) for lane in state.lanes]
    assert predicted == [combined, combined, False], predicted
    if budget > 1000:
        # e-BH then read other pairs' e-values in both decided lanes (k* > 1 at some close)
        assert decided["helpfulness"] >= 2 and decided["correctness"] >= 2, decided
    else:
        assert state.budget_left == 0


def served_until_one_pair_fills(study: Study, workers: dict, **answer) -> PairState:
    """The first pair row whose round fills as ``workers`` take HITs in turn and submit
    ``answer`` (``judgement_submit``'s keyword arguments); call with the close job off."""
    for _ in range(100):
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  **answer)
            filled = PairState.objects.filter(study=study, status=adaptive.FILLED).first()
            if filled is not None:
                return filled
    raise AssertionError(f"no round of study {study.slug!r} filled")


def decoded_by_one_close(study: Study, monkeypatch) -> list[str]:
    """The pairs (``_lanes_of``'s names of them) that one round close of ``study`` decodes, by
    a process that has decoded none before; the close must close a round (one: the callers
    stop serving at the first that fills)."""
    decoded = []
    real = protocol_state._lanes_of
    monkeypatch.setattr(protocol_state, "_lanes_of", lambda *args: decoded.append(args[4]) or real(*args))
    protocol_state._parsed.clear()
    assert runtime.rounds_close(study_id=study.pk) == 1
    return decoded


def test_a_rubric_close_decodes_only_the_pairs_whose_rounds_filled(monkeypatch):
    """Fails on the close that decoded every pair of a rubric (28 here, 19,900 at 200 systems)."""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)  # no close in the submits
    study = rubric_study("rubric-decodes", 2000, True)
    workers = workers_of([f"rbd-{n}" for n in range(6)])
    filled = served_until_one_pair_fills(study, workers, shown_value=0,
                                         answers={c["name"]: {"value": 1} for c in RUBRIC_CRITERIA})
    decoded = decoded_by_one_close(study, monkeypatch)
    total = PairState.objects.filter(study=study).count()
    assert decoded == [f"pair {filled.pk} of study {study.slug!r}"], f"{len(decoded)} of {total} pairs decoded"


RANKING_SYSTEMS = 12  # 66 pairs, of which the merge sort runs at most planned_decisions(12) = 36
RANKING_ITEMS = 32  # a pair decided at γ / 36 needs a dozen judgements or more


@pytest.mark.parametrize("metric, second", [(True, None), (False, None), (True, "informative"), (True, "useless")])
def test_a_merge_sort_close_decides_and_funds_as_the_full_close_from_the_pairs_it_ran(metric, second, monkeypatch):
    """The ranking design's close reads the pairs the sort has run (not parked, or with a
    label) and the parked pairs its replay asks for next (``study_pairs_read``); its closes,
    decisions and fundings equal the full state's pair for pair. Fails on the close that read
    every pair of an advancing design other than the active one (with a second metric
    combined: of one that combined metrics). With a metric the sort starts
    from the metric's order, without from a seeded shuffle; the humans' order is neither."""
    study, compared, read_in = ordering_study_served(
        design="ranking", slug=f"ranking-close-{int(metric)}{second or ''}", systems=RANKING_SYSTEMS,
        items=RANKING_ITEMS, metric=metric, truth_seed=11, answer_seed=10 + int(metric), agreement=0.85,
        monkeypatch=monkeypatch, second=second)
    pairs = RANKING_SYSTEMS * (RANKING_SYSTEMS - 1) // 2
    assert len(compared) >= 10 and max(compared) <= ranking_design.planned_decisions(RANKING_SYSTEMS) < pairs
    assert read_in, "the sort never asked for a pair beyond those it had run"
    statuses = collections.Counter(PairState.objects.filter(study=study).values_list("status", flat=True))
    assert statuses[adaptive.DECIDED] >= 10
    if second:
        assert_bets_used_the_calibration(study)


def test_a_merge_sort_close_decodes_the_pairs_it_ran_not_every_pair(monkeypatch):
    """Fails on the close that decoded every pair of a ranking study (66 here, 19,900 at 200
    systems): a close decodes the pairs the sort has asked for, and the parked pairs it asks
    for next, nothing else."""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)  # no close in the submits
    rows = many_systems_rows(RANKING_SYSTEMS, items=ITEMS)
    rows[0].update(name="ranking decodes", batch_size=4, budget=3000, gamma=0.2, pair_design="ranking",
                   family_control="none")
    study = study_import(source=bundle_bytes(rows), slug="ranking-decodes", metric="m")
    served_until_one_pair_fills(study, workers_of([f"rd-{n}" for n in range(6)]), shown_value=1)
    asked = PairState.objects.filter(study=study).exclude(status=adaptive.PARKED).count()
    decoded = decoded_by_one_close(study, monkeypatch)
    now_asked = PairState.objects.filter(study=study).exclude(status=adaptive.PARKED).count()
    total = PairState.objects.filter(study=study).count()
    assert asked <= len(decoded) <= now_asked < total, f"{len(decoded)} of {total} pairs decoded"


def test_a_close_decodes_only_the_pairs_whose_rounds_filled(monkeypatch):
    """Fails on the close that decoded every pair's state (28 here, 19,900 at 200 systems)."""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)  # no close in the submits
    study = many_pairs_study("close-decodes", 2000)
    rows = {row.pk: row for row in PairState.objects.filter(study=study)}
    workers = workers_of([f"cd-{n}" for n in range(6)])
    filled = served_until_one_pair_fills(study, workers, shown_value=1)
    decoded = decoded_by_one_close(study, monkeypatch)
    assert decoded == [f"pair {filled.pk} of study {study.slug!r}"], f"{len(decoded)} of {len(rows)} pairs decoded"
    filled.refresh_from_db()
    assert filled.status != adaptive.FILLED


def test_a_close_sums_again_only_the_groups_of_pairs_that_moved(monkeypatch):
    """A close sums the other pairs' budget and moments by group (the pairs of one first
    system), and only the groups whose rows moved since this process last summed them: summing
    every pair was 3.8 ms of a close at 200 systems (19,900 pairs), most of what a close there
    costs beyond one at 16 systems."""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)  # no close in the submits
    study = many_pairs_study("close-groups", 2000)
    workers = list(workers_of([f"cg-{n}" for n in range(6)]).values())

    def submit(annotator):
        hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
        hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                              shown_value=1)
        return PairState.objects.get(pk=hit.comparison.pair_id)

    for n in range(100):
        submit(workers[n % len(workers)])
        if PairState.objects.filter(study=study, status=adaptive.FILLED).exists():
            break
    assert protocol_state.study_close_snapshot(study) is not None  # every group summed once
    moved = submit(workers[0])
    with CaptureQueriesContext(connection) as captured:
        protocol_state.study_close_snapshot(study)
    sums = [q["sql"] for q in captured.captured_queries if 'SUM("annotation_pairstate"."cv_sm")' in q["sql"]]
    assert len(sums) == 1 and f'"first_id" IN ({moved.first_id})' in sums[0], sums


def test_the_migration_fills_the_close_columns_as_the_codec_writes_them():
    """Pair rows stored before the close's columns get them from their state (migration 0031)."""
    from django.apps import apps

    fill = importlib.import_module("annotation.migrations.0032_pair_state_close_columns").close_columns_fill
    study = many_pairs_study("close-columns", 2000)
    workers = workers_of([f"cm-{n}" for n in range(4)])
    for _ in range(15):
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is not None:
                hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                      shown_value=1)
    columns = ("pk", *protocol_state.CLOSE_COLUMNS)
    written = list(PairState.objects.filter(study=study).order_by("pk").values_list(*columns))
    assert any(row[1] for row in written) and any(row[3] for row in written), "nothing judged with the metric"
    PairState.objects.filter(study=study).update(hits=0, log_e_value=None, cv_n=0, cv_s=0, cv_m=0, cv_ss=0, cv_mm=0,
                                                 cv_sm=0)
    fill(apps, None)
    assert list(PairState.objects.filter(study=study).order_by("pk").values_list(*columns)) == written


def test_the_migration_fills_a_rubrics_lanes_close_as_the_codec_writes_it():
    """Rubric pair rows stored before ``lanes_close`` get it from their other lanes' state
    (migration 0036)."""
    from django.apps import apps

    fill = importlib.import_module("annotation.migrations.0036_pair_state_lanes_close").lanes_close_fill
    study = rubric_study("lanes-close", 2000, True)
    workers = workers_of([f"lc-{n}" for n in range(4)])
    rng = random.Random(5)
    for _ in range(15):
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is not None:
                hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                      shown_value=0, answers={c["name"]: {"value": rng.choice([-1, 1])}
                                                              for c in RUBRIC_CRITERIA})
    written = list(PairState.objects.filter(study=study).order_by("pk").values_list("pk", "lanes_close"))
    assert any(lanes["correctness"][1] for _, lanes in written), "nothing judged with the second lane's metric"
    PairState.objects.filter(study=study).update(lanes_close={})
    fill(apps, None)
    # the level prior's five sums came later (migration 0040: rows before it have its study's
    # prior off); the entries up to them are the codec's
    assert list(PairState.objects.filter(study=study).order_by("pk").values_list("pk", "lanes_close")) == [
        (pk, {name: entry[:7] for name, entry in lanes.items()}) for pk, lanes in written]


@pytest.mark.slow
def test_on_a_null_of_many_pairs_the_partial_close_decides_nothing_false():
    """Every pair a null (the humans answer at random whatever the systems): through the app's
    lease, submit and partial close, e-BH across the 15 pairs keeps P(any ±) <= γ (FDR = FWER
    under the global null). P(Binomial(8, 0.05) >= 2) = 0.06: more than one of 8 runs with a
    decision is not γ = 0.05."""
    runs_deciding = 0
    for run in range(8):
        rows = many_systems_rows(6, items=12)
        rows[0].update(name=f"null {run}", batch_size=4, budget=2000, gamma=0.05)
        study = study_import(source=bundle_bytes(rows), slug=f"close-null-{run}", metric="m")
        assert protocol_state.close_reads_some(study)
        rng = random.Random(run)
        workers = workers_of([f"cn{run}-{n}" for n in range(4)])
        serve_until_done(study, workers, lambda first, second: rng.choice([-1, 1]))
        runs_deciding += PairState.objects.filter(study=study).exclude(decision=0).exists()
    assert runs_deciding <= 1, f"{runs_deciding} of 8 null studies decided a pair"


@pytest.mark.slow
@pytest.mark.parametrize(("design", "seed", "least_judged", "second"), [
    ("active", 100, 6, False),  # beyond the start's neighbours
    ("ranking", 200, 5, False),  # the sort ran past its start
    ("active", 300, 6, True),  # a seeded coin m2 combined with m
    ("ranking", 400, 5, True),
])
def test_on_a_null_an_ordering_design_through_its_partial_close_decides_nothing_false(design, seed, least_judged,
                                                                                     second):
    """Every system equal (the humans answer at random): the active design or the merge sort
    run through the app's lease, submit and labelled close (every pair at γ / its pairs or its
    planned decisions, family none) keeps P(any ±) <= γ. P(Binomial(8, 0.05) >= 2) = 0.06:
    more than one of 8 runs with a decision is not γ = 0.05."""
    runs_deciding = 0
    for run in range(8):
        rows = many_systems_rows(6, items=12)
        rows[0].update(name=f"{design} null {run}", batch_size=4, budget=3000, gamma=0.05, pair_design=design,
                       family_control="none")
        if second:
            rows[0]["combined_metrics"] = "m2"
            coin = random.Random(seed + run)
            rows += [{"kind": "metric_score", "item": f"i{n}", "system": f"sys{j:02d}", "metric": "m2",
                      "score": coin.random()} for n in range(12) for j in range(6)]
        study = study_import(source=bundle_bytes(rows), slug=f"{design}-null-{run}{int(second)}", metric="m")
        assert protocol_state.close_reads_some(study)
        rng = random.Random(seed + run)
        workers = workers_of([f"{design}-n{run}-{n}" for n in range(4)])
        serve_until_done(study, workers, lambda first, second: rng.choice([-1, 1]))
        assert PairState.objects.filter(study=study, hits__gt=0).count() >= least_judged
        runs_deciding += PairState.objects.filter(study=study).exclude(decision=0).exists()
    assert runs_deciding <= 1, f"{runs_deciding} of 8 null studies decided a pair"


@pytest.mark.slow
def test_on_a_null_a_rubric_through_its_partial_close_decides_nothing_false():
    """Every pair a null in every criterion (the humans answer at random): through the app's
    lease, submit and partial close, e-BH across the 15 pairs of each lane keeps P(any ±) <= γ
    in that lane. P(Binomial(8, 0.05) >= 2) = 0.06: more than one of 8 runs in which a lane
    decided a pair is not γ = 0.05 (each lane's own; the first two lanes counted apart)."""
    deciding = collections.Counter()
    for run in range(8):
        study = rubric_study(f"rubric-null-{run}", 2000, True, systems=6, items=12, gamma=0.05)
        assert protocol_state.close_reads_some(study)
        rng = random.Random(300 + run)
        workers = workers_of([f"rbn{run}-{n}" for n in range(4)])
        serve_rubric_until_done(study, workers, lambda criterion, first, second: rng.choice([-1, 1]))
        state = protocol_state.study_rubric_load(study, PairState.objects.filter(study=study))
        for name, lane in zip(state.criteria, state.lanes):
            deciding[name] += any(p.decision for p in lane.pairs)
    assert all(count <= 1 for count in deciding.values()), f"null studies deciding a pair, by lane: {deciding}"


@pytest.mark.slow
@pytest.mark.parametrize("useless", [False, True])
def test_on_a_null_a_study_with_combined_metrics_through_its_partial_close_decides_nothing_false(useless):
    """Every pair a null (the humans answer at random whatever the systems and both metrics):
    through the app's lease, submit and partial close, each round calibrated on the other
    pairs' labels, e-BH across the 15 pairs keeps P(any ±) <= γ. P(Binomial(8, 0.05) >= 2) =
    0.06: more than one of 8 runs with a decision is not γ = 0.05."""
    runs_deciding = 0
    for run in range(8):
        study = combined_study(f"combined-null-{int(useless)}-{run}", 2000, useless, systems=6, items=12, gamma=0.05)
        rng = random.Random(400 + run)
        workers = workers_of([f"cbn{int(useless)}{run}-{n}" for n in range(4)])
        serve_until_done(study, workers, lambda first, second: rng.choice([-1, 1]))
        runs_deciding += PairState.objects.filter(study=study).exclude(decision=0).exists()
    assert runs_deciding <= 1, f"{runs_deciding} of 8 null studies decided a pair"


LEVEL_QUALITY = {f"sys{j}": 0.4 * (j // 2) for j in range(6)}
LEVEL_CRITERIA = [{"name": "quality"}, {"name": "fluency", "metric": "m2"}]


def level_prior_study(slug: str, prior: bool, kind: str) -> Study:
    """Six systems in three tied couples of quality 0, 0.4 and 0.8 over 60 items: a metric
    score per output of its quality plus noise, so each pair's level (the metric's mean label)
    tracks its human margin across pairs, and three pairs are ties the level calls ties.
    ``kind``: "one" metric; "combined" with a second, m2 (Study.combined_metrics: summed in
    Python); "rubric", a second criterion judged with m2 (its level sums in ``lanes_close``)."""
    rows = [{"kind": "study", "name": slug, "batch_size": 5, "budget": 100_000, "metric": "m",
             "futility_prior": prior}]
    if kind == "combined":
        rows[0]["combined_metrics"] = "m2"
    if kind == "rubric":
        rows[0]["criteria"] = [dict(c) for c in LEVEL_CRITERIA]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(60)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} {n}"}
             for n in range(60) for s in LEVEL_QUALITY]
    rng = random.Random(38)
    for metric in ("m", "m2"):
        rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": metric,
                  "score": q + rng.gauss(0, 0.7)} for n in range(60) for s, q in LEVEL_QUALITY.items()]
    return study_import(source=bundle_bytes(rows), slug=slug, metric="m")


def human_label(item: str, first: str, second: str, criterion: str = "") -> int:
    """The crowd's label of an item, the same in every run: the better system wins by its quality
    gap plus noise (canonical order: +1 = first better)."""
    gap = LEVEL_QUALITY[first] - LEVEL_QUALITY[second] + random.Random(f"{item}|{first}|{second}|{criterion}").gauss(0, 1)
    return 0 if abs(gap) < 0.15 else (1 if gap > 0 else -1)


def serve_by_item(study: Study, workers: dict, after_submit, rubric_lanes: bool) -> None:
    for _ in range(2000):
        served = False
        for annotator in workers.values():
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            item, first, second = hit.comparison.item.external_id, hit.comparison.first.name, hit.comparison.second.name
            sign = -1 if hit.shown_swapped else 1
            if rubric_lanes:
                answers = {c["name"]: {"value": sign * human_label(item, first, second, c["name"])}
                           for c in LEVEL_CRITERIA}
                hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                      shown_value=0, answers=answers)
            else:
                hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                      shown_value=sign * human_label(item, first, second))
            served = True
            after_submit()
        if not served:
            return


def level_posteriors_agree(study: Study) -> int:
    """The level prior's posteriors of the pairs a close closes, from the partial state (the
    decoded pairs and ``Outside.levels``, the others' sums from the rows) and from the state of
    every pair, lane by lane: the same to rounding (SQL adds the sums in its own order). Returns
    how many were compared."""
    _, full = protocol_state.study_state_snapshot(study)
    _, partial = protocol_state.study_close_snapshot(study)
    compared = 0
    for full_lane, partial_lane in zip(full.lanes, partial.lanes):
        closing = [i for i, pair in enumerate(partial_lane.pairs) if pair.status == adaptive.FILLED]
        position = {pair.key: i for i, pair in enumerate(full_lane.pairs)}
        whole = margin_posteriors([machine.pair_level(p) for p in full_lane.pairs],
                                  [position[partial_lane.pairs[i].key] for i in closing])
        some = margin_posteriors([machine.pair_level(p) for p in partial_lane.pairs], closing,
                                 partial_lane.outside.levels)
        expected = {full_lane.pairs[i].key: whole[i] for i in whole}
        got = {partial_lane.pairs[i].key: some[i] for i in some}
        assert got.keys() == expected.keys()
        for key, value in got.items():
            assert value == pytest.approx(expected[key], rel=1e-9, abs=1e-12), key
        compared += len(some)
    return compared


@pytest.mark.parametrize("kind", ["one", "combined", "rubric"])
def test_the_level_prior_reaches_the_partial_close(kind, monkeypatch):
    """Issue 38 through the app: every close of a study with the level prior (the default) is
    computed both ways and decides what the close over every pair decides, and before it the
    prior's posterior of each pair it closes is the same from the partial state, which takes
    the other pairs' level sums from the rows (in SQL; in Python for metrics combined; from
    ``lanes_close`` for a rubric's other lanes), as from every pair; the close asks the prior,
    and a study with the setting off never does. (Which pairs the prior gives up depends on the
    serving's draws; that it saves labels is replayed on PandaLM in tests/protocol/test_level_prior.py.)"""
    monkeypatch.setattr(jobs, "rounds_close", lambda study_id: None)
    asked = []
    check = machine.margin_can_reach

    def recorded(pair, posterior, futility, threshold):
        asked.append(check(pair, posterior, futility, threshold))
        return asked[-1]
    # the close asks the prior only of pairs whose own check would keep them (machine._close)
    monkeypatch.setattr(machine, "margin_can_reach", recorded)
    compared_posteriors = []
    for prior in (True, False):
        asked.clear()
        study = level_prior_study(f"level-prior-{kind}-{str(prior).lower()}", prior, kind)
        assert protocol_state.protocol_settings(study).futility_prior is prior
        assert protocol_state.close_reads_some(study)
        compared, posteriors = [], []
        serve_by_item(study, workers_of([f"lp{kind}{prior}-{n}" for n in range(4)]),
                      close_both_ways(study, compared, before=lambda: posteriors.append(level_posteriors_agree(study))),
                      kind == "rubric")
        runtime.rounds_close(study_id=study.pk)
        assert len(compared) >= 10
        rows = PairState.objects.filter(study=study)
        assert rows.filter(level_k=1).count() >= 4
        if kind == "rubric":
            assert any(lanes["fluency"][7] for lanes in rows.values_list("lanes_close", flat=True))
        compared_posteriors.append(sum(posteriors))
        assert (len(asked) > 0) is prior, asked
    # The posteriors exist where the F test takes the fit, which the serving's draws decide:
    # in one run of 20-odd none of a study's closes had one (0 against 46-143 in the others),
    # so the two studies' comparisons are counted together (the level sums are written and
    # read the same whatever the setting; the helper computes the posteriors in both).
    assert sum(compared_posteriors) >= 5, compared_posteriors
