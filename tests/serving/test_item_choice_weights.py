"""Separability-weighted choice records each draw's chance, and the decision weights by it."""
import numpy as np
import pytest

from annotation.models import Assignment, PairState, Study
from annotation.serving import protocol_state
from annotation.services import hits
from protocol import adaptive
from protocol.allocation import design_weights
from protocol.decision import counts_from_labels
from tests.builders.annotating import worker
from tests.builders.clients import researcher_client
from tests.builders.studies import weighted_study

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("choice", [Study.ItemChoice.WEIGHTED, Study.ItemChoice.STRATIFIED])
def test_each_draw_records_its_chance_and_the_pair_decides_on_design_weighted_counts(choice, client):
    study = weighted_study(choice)
    answers = {}
    for n in range(8):
        who = worker(f"w{n}")
        hit = hits.hit_next_for_annotator(study=study, annotator=who)
        assert hit is not None and 0 < hit.draw_probability <= 1
        value = 1 if n % 3 else -1
        hits.judgement_submit(assignment=hit, annotator=who, shown_value=-value if hit.shown_swapped else value,
                              idempotency_key=hits.new_idempotency_key())
        answers[hit.comparison.item.external_id] = (value, hit.draw_probability)
    row = PairState.objects.get(study=study)
    pair = protocol_state.pair_state_of(study, row)
    assert [item for item, _ in pair.draws] == list(answers)
    assert adaptive.design_weighted(pair)
    items = list(answers)
    weights = dict(zip(items, design_weights([answers[i][1] for i in items])))
    expected = counts_from_labels(items, [answers[i][0] for i in items], [], [], human_weights=weights)
    assert adaptive.pair_counts(pair).key() == expected.key()
    # the draws are not uniform: the weights differ from item to item
    assert np.ptp(list(weights.values())) > 0
    # the pair page says the decision is design-weighted
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/pair/?first=A&second=B")
    design = page.context["pair"]["design"]
    raw = np.array(list(weights.values()))
    assert design["weighted"] and design["items"] == 8
    assert design["ess"] == pytest.approx(raw.sum() ** 2 / (raw ** 2).sum())
    assert "data-design" in page.content.decode() and "holds for all the pair" in page.content.decode()


def test_the_pair_page_warns_when_judged_items_lack_a_recorded_draw(client):
    study = weighted_study(Study.ItemChoice.WEIGHTED)
    who = worker("w")
    hit = hits.hit_next_for_annotator(study=study, annotator=who)
    Assignment.objects.filter(pk=hit.pk).update(draw_probability=None)   # e.g. leased before the choice changed
    hit.refresh_from_db()
    hits.judgement_submit(assignment=hit, annotator=who, shown_value=1, idempotency_key=hits.new_idempotency_key())
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/pair/?first=A&second=B")
    assert page.context["pair"]["design"]["weighted"] is False
    assert "not every judged item has a recorded draw" in page.content.decode()


def test_uniform_choice_records_no_chance_and_counts_stay_whole():
    study = weighted_study(Study.ItemChoice.UNIFORM)
    who = worker("u")
    hit = hits.hit_next_for_annotator(study=study, annotator=who)
    assert hit.draw_probability is None
    hits.judgement_submit(assignment=hit, annotator=who, shown_value=1, idempotency_key=hits.new_idempotency_key())
    pair = protocol_state.pair_state_of(study, PairState.objects.get(study=study))
    assert pair.draws == () and not adaptive.design_weighted(pair)
    assert Assignment.objects.get(pk=hit.pk).draw_probability is None


def test_exclusion_and_reinclusion_keep_the_pair_design_weighted(django_user_model):
    from annotation.services import quality

    study = weighted_study(Study.ItemChoice.WEIGHTED)
    workers = [worker(f"q{n}") for n in range(3)]
    chance_of = {}
    for n in range(8):
        who = workers[n % 3]
        hit = hits.hit_next_for_annotator(study=study, annotator=who)
        hits.judgement_submit(assignment=hit, annotator=who, shown_value=1,
                              idempotency_key=hits.new_idempotency_key())
        chance_of[hit.comparison.item.external_id] = (who.pk, hit.draw_probability)

    def pair_now():
        return protocol_state.pair_state_of(study, PairState.objects.get(study=study))

    researcher = django_user_model.objects.create_user("res", password="x")
    assert quality.annotator_exclude(study=study, annotator=workers[2], user=researcher, reason="test")
    pair = pair_now()
    kept = [item for item, (who, _) in chance_of.items() if who != workers[2].pk]
    assert set(pair.judged_items) == set(kept) and adaptive.design_weighted(pair)
    assert dict(pair.draws) == {item: chance_of[item][1] for item in kept}
    assert quality.annotator_include(study=study, annotator=workers[2], user=researcher, reason="test")
    pair = pair_now()
    assert adaptive.design_weighted(pair) and dict(pair.draws) == {i: c for i, (_, c) in chance_of.items()}
