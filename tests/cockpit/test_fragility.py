"""The fragility of each decided pair (issue 39, part 3) on the dashboard's data, the pair
page, the decisions API and the decisions CSV, recomputed here from the stored judgements."""
import csv
import io
import math

import pytest
from django.db.models.signals import post_init

from annotation.models import PairState
from annotation.selectors.dashboard import study_dashboard_data
from annotation.selectors.studies import study_judgement_labels
from annotation.selectors.serving import protocol_pair_of
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.bundles import bundle_bytes, crowd_rows
from tests.builders.clients import api_for, researcher_client

pytestmark = pytest.mark.django_db(transaction=True)


def truth(first, second, worker):
    """A beats everyone; B and C split by worker."""
    if "A" in (first, second):
        return 1 if first == "A" else -1
    return 1 if worker == "w1" else -1


def expected_fragility(study, row, labels, pairs, decided):
    """Recomputed from the definition: one judgement per item, so the margin is undone by
    |wins − losses| removals, the evidence by removing the largest steps until the wealth is
    below e-BH's bar log(m / (γ k)), each step's factor with the metric's control variate."""
    values = [v for _, v in labels[(row.first.name, row.second.name)]]
    margin = abs(sum(values))
    # a step is (item, value, bet, rho, lam, m, c): its factor 1 + rho b (value - lam (m - c))
    steps = sorted((math.log1p(rho * b * (v - lam * (m - c)))
                    for _, v, b, rho, lam, m, c in protocol_pair_of(study, row).steps if v or lam * (m - c)),
                   reverse=True)
    excess = sum(steps) - math.log(pairs / (study.gamma * decided))
    removed, count = 0.0, 0
    while removed <= excess:
        removed += steps[count]
        count += 1
    return min(margin, count), len(values)


def test_every_decided_pair_says_how_many_judgements_would_undo_it(client):
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=90)))
    answer_hits(study, workers_of(["w1", "w2"]), truth)
    states = list(PairState.objects.filter(study=study).select_related("first", "second"))
    decided = [s for s in states if s.decision]
    assert decided, "the truthful crowd decides A's pairs"
    labels = study_judgement_labels(study=study)
    data = study_dashboard_data(study=study)
    by_key = {(p["first"], p["second"]): p for p in data["pairs"]}
    for row in states:
        p = by_key[(row.first.name, row.second.name)]
        if not row.decision:
            assert p["fragility"] is None and not p["fragile"]
            continue
        removals, judgements = expected_fragility(study, row, labels, len(states), len(decided))
        assert p["fragility"] == removals and p["fragility_exact"]
        assert p["fragility_share"] == pytest.approx(removals / judgements)
        assert p["fragile"] == (removals <= 0.005 * judgements)
    # the e-process's evidence is counted (bets as made), not only the margin
    assert all(by_key[(s.first.name, s.second.name)]["fragility_evidence"] is not None for s in decided)
    row = decided[0]
    p = by_key[(row.first.name, row.second.name)]
    # the pair page
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/pair/?first={row.first.name}&second={row.second.name}").content.decode()
    assert f"removing <strong>{p['fragility']}</strong> of its {p['judgements']} counted judgements" in page
    # the dashboard's card
    dashboard = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert 'id="fragility"' in dashboard and "No fragile decision" in dashboard
    # the decisions API and CSV
    api, user = api_for("fragile-api", researcher=True)
    study_membership_set(study=study, user=user, role="researcher")
    body = api.get(f"/api/studies/{study.slug}/decisions/").json()
    api_pairs = {(q["first"], q["second"]): q for q in body["pairs"]}
    assert api_pairs[(row.first.name, row.second.name)]["fragility"] == p["fragility"]
    assert api_pairs[(row.first.name, row.second.name)]["fragile"] is False
    exported = {(r["first"], r["second"]): r for r in csv.DictReader(io.StringIO(
        client.get(f"/s/{study.slug}/export/decisions.csv").content.decode()))}
    assert exported[(row.first.name, row.second.name)]["fragility"] == str(p["fragility"])


def test_the_pair_page_reads_its_own_pair_row_only(client):
    """A pair's fragility needs the other pairs only as counts (the family's bar): the pair page
    of a study of 200 systems read all 19,900 pair rows for it (4.4 s, docs/benchmarks.md)."""
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=90)))
    answer_hits(study, workers_of(["w1", "w2"]), truth)
    assert PairState.objects.filter(study=study).count() > 1
    row = PairState.objects.filter(study=study).exclude(decision=0).select_related("first", "second").first()
    researcher_client(client, study)
    loaded = []

    def count(sender, instance, **kwargs):
        loaded.append(instance.pk)

    post_init.connect(count, sender=PairState)
    try:
        page = client.get(f"/s/{study.slug}/pair/?first={row.first.name}&second={row.second.name}")
    finally:
        post_init.disconnect(count, sender=PairState)
    assert page.status_code == 200 and "counted judgements" in page.content.decode()
    assert loaded == [row.pk], f"the pair page loaded {len(loaded)} pair rows"
