"""A pair's metric labels are computed from the metric's scores when needed, not stored in its
protocol state (issue 22: 2,000 labels per pair made each state 30 KB of JSON, decoded for all
1,225 pairs by every process's first round close)."""
import numpy as np
import pytest
from django.db import transaction

from protocol import rubric

from annotation.models import Judgement, PairState, Study
from annotation.rubrics import study_rubric
from annotation.selectors.studies import study_pair_capacities
from annotation.serving import metric_labels, protocol_state
from annotation.services import hits, runtime
from annotation.services.studies import study_import
from tests.builders.annotating import worker
from tests.builders.bundles import bundle_bytes, crowd_rows, ranking_rows, rubric_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_stored_state_holds_no_labels_and_a_new_process_computes_the_same_from_the_scores():
    rows = crowd_rows(items=40, batch=5, budget=90)
    study = study_import(source=bundle_bytes(rows))
    scores = {(r["item"], r["system"]): r["score"] for r in rows if r["kind"] == "metric_score"}
    for row in PairState.objects.filter(study=study).select_related("first", "second"):
        assert "metric" not in row.state
        metric_labels._sources.clear()  # as in another process: nothing cached
        metric_labels._lanes.clear()
        pair = protocol_state.pair_state_of(study, row)
        a, b = row.first.name, row.second.name
        expected = {f"i{n:02d}": int(np.sign(scores[(f"i{n:02d}", a)] - scores[(f"i{n:02d}", b)])) for n in range(40)}
        assert dict(pair.metric) == expected
        assert pair.metric_only == tuple(sum(v == label for v in expected.values()) for label in (1, 0, -1))


def test_submits_record_the_judged_items_metric_label_with_an_empty_cache():
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    who = worker("w")
    lease = hits.hit_next_for_annotator(study=study, annotator=who)
    metric_labels._sources.clear()
    metric_labels._lanes.clear()
    hits.judgement_submit(assignment=lease, annotator=who, shown_value=1, idempotency_key="k")
    row = PairState.objects.get(pk=lease.comparison.pair_id)
    pair = protocol_state.pair_state_of(study, row)
    item = lease.comparison.item.external_id
    paired = np.asarray(pair.paired)
    label_row = {1: 0, 0: 1, -1: 2}[pair.metric[item]]
    assert paired.sum() == 1 and paired[label_row].sum() == 1  # counted with its own metric label


def test_a_submit_loads_the_label_sources_before_it_takes_the_pairs_lock(monkeypatch):
    """A process's first submit reads every score of the study (170 ms at 50 x 2,000): inside the
    submit's transaction that held the pair's row lock, and on SQLite every writer, while it read
    (scripts/bench/scale.sh: the first submit of each web process stalled the others' first HITs
    to 300 ms). The sources are loaded before the transaction opens."""
    from django.db import connection

    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    who = worker("w")
    lease = hits.hit_next_for_annotator(study=study, annotator=who)
    metric_labels._sources.clear()  # a fresh process
    metric_labels._lanes.clear()
    loads = []
    real_load = metric_labels._load

    def load_and_note(*args, **kwargs):
        loads.append(connection.in_atomic_block)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(metric_labels, "_load", load_and_note)
    hits.judgement_submit(assignment=lease, annotator=who, shown_value=1, idempotency_key="k")
    assert loads == [False]  # loaded once, outside any transaction


def _restarted(study):
    """The study's protocol started again from pair rows that hold none (as the import does)."""
    PairState.objects.filter(study=study).update(state={}, criteria_state={})
    with transaction.atomic():
        return runtime.protocol_start(study=Study.objects.get(pk=study.pk))


@pytest.mark.parametrize("rows", [crowd_rows(items=40, batch=5, budget=90), rubric_rows(items=12, imported=2),
                                  ranking_rows(items=12, metric=True)], ids=["scores", "rubric-verdicts", "ranking"])
def test_a_start_builds_no_metric_label_per_pair_and_item(rows):
    """Issue 41: a start held every pair's label of every item (40 M at 200 systems x 2,000
    items, 2.3 of the import's 2.7 GB); it counts them from the scores instead, and a pair
    computes its labels when it first needs one (a judged item: the imported ones here)."""
    study = study_import(source=bundle_bytes(rows), metric=None)
    state = _restarted(study)
    imported = set(protocol_state_keys_judged(study))
    for lane in state.lanes:
        for pair in lane.pairs:
            if pair.key not in imported:
                assert repr(pair.metric) in ("LazyLabels(not computed)", "mappingproxy({})"), pair.key


def protocol_state_keys_judged(study):
    return {(j.comparison.first.name, j.comparison.second.name)
            for j in Judgement.objects.filter(comparison__study=study).select_related(
                "comparison__first", "comparison__second")}


@pytest.mark.parametrize("rows", [crowd_rows(items=40, batch=5, budget=90), rubric_rows(items=12, imported=2)],
                         ids=["scores", "rubric-verdicts"])
def test_a_start_from_the_counts_is_the_start_from_every_label(rows):
    """The start from the counts and lazy labels (protocol_state.start_labels) equals the start
    from every pair's labels built in memory (the path it replaced): same pairs, capacities,
    counts and labels. That every round after it decides the same: tests/protocol/test_adaptive.py."""
    study = study_import(source=bundle_bytes(rows), metric=None)
    capacities = study_pair_capacities(study=study)
    names = [c.name for c in study_rubric(study)]
    settings = protocol_state.protocol_settings(study)
    every_label = {name: None if source is None else {key: source.pair(*key) for key in capacities}
                   for name, source in zip(names, metric_labels.lane_label_sources(study))}
    assert any(every_label.values())
    eager = rubric.start(settings, names, capacities, every_label)
    lazy = rubric.start(settings, names, capacities, *protocol_state.start_labels(study, sorted(capacities)))
    assert [[p.metric_only for p in lane.pairs] for lane in lazy.lanes] == \
           [[p.metric_only for p in lane.pairs] for lane in eager.lanes]
    assert lazy == eager


def test_a_submit_computes_the_judged_items_label_alone(monkeypatch):
    """A submit records one item and reads its metric label alone (``LazyLabels``' one-item
    lookup, ``MetricLabelSource.label``): it built all of the pair's labels (2,000 at an arena's
    2,000 prompts, a twentieth of a submit's CPU at 200 x 2,000) to read one."""
    study = study_import(source=bundle_bytes(crowd_rows(items=40, batch=5, budget=90)))
    who = worker("w")
    lease = hits.hit_next_for_annotator(study=study, annotator=who)
    whole = []
    pair_labels = metric_labels.MetricLabelSource.pair

    def counted(self, first, second, items=None):
        if items is None:
            whole.append((first, second))
        return pair_labels(self, first, second, items)

    monkeypatch.setattr(metric_labels.MetricLabelSource, "pair", counted)
    hits.judgement_submit(assignment=lease, annotator=who, shown_value=1, idempotency_key="k")
    assert whole == []
    monkeypatch.undo()
    row = PairState.objects.get(pk=lease.comparison.pair_id)
    pair = protocol_state.pair_state_of(study, row)
    paired = np.asarray(pair.paired)
    label_row = {1: 0, 0: 1, -1: 2}[pair.metric[lease.comparison.item.external_id]]
    assert paired.sum() == 1 and paired[label_row].sum() == 1  # counted with its own metric label


def test_one_items_label_is_the_pairs_label_of_that_item():
    rows = crowd_rows(items=40, batch=5, budget=90)
    rows = [r for r in rows if not (r["kind"] == "metric_score" and r["item"] == "i03" and r["system"] == "A")]
    study = study_import(source=bundle_bytes(rows))
    source = metric_labels.lane_label_sources(study)[0]
    for first, second in (("A", "B"), ("A", "C"), ("B", "C")):
        labels = source.pair(first, second)
        assert [source.label(first, second, f"i{n:02d}") for n in range(40)] == \
            [labels.get(f"i{n:02d}") for n in range(40)]
    assert source.label("A", "B", "i03") is None and source.label("B", "C", "i03") is not None
