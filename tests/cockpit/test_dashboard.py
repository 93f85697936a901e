"""The researcher dashboard and exports through HTTP."""
import csv
import io
import re

import pytest

from annotation.models import Judgement
from annotation.selectors.dashboard import pair_detail_data, study_dashboard_data
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import BUNDLES, bundle_bytes, crowd_rows
from tests.builders.clients import api_for, researcher_client
from tests.builders.crowd import answer_truthfully, current_hit, judged_crowd_study, start_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_only_researchers_see_the_dashboard(client):
    study = study_import(source=bundle_bytes(crowd_rows()))
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 302  # to the login page
    researcher_client(client, study, role="annotator")
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 403
    assert client.get(f"/s/{study.slug}/export/judgements.csv").status_code == 403


def test_dashboard_follows_the_judgements(client):
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=60)))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-dash")
    answer_truthfully(worker, study.slug, 60)
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/dashboard/")
    assert response.status_code == 200
    data = response.context["data"]
    spent = Judgement.objects.count()
    assert data["budget"]["spent"] == spent
    assert data["budget"]["spent"] + data["budget"]["reserved"] + data["budget"]["left"] == 60
    ab = next(p for p in data["pairs"] if (p["first"], p["second"]) == ("A", "B"))
    assert ab["decision"] == 1 and ab["status"] == "decided"
    charts = {c["name"]: c["figure"] for c in response.context["charts"]}
    assert {"dag-protocol", "dag-human", "dag-metric", "timeline"} <= set(charts)
    protocol_dag = charts["dag-protocol"]
    arrows = [a for a in protocol_dag["layout"]["annotations"] if a.get("showarrow")]
    boxes = [a for a in protocol_dag["layout"]["annotations"] if not a.get("showarrow")]
    assert arrows and {a["text"] for a in arrows} == {""} and sorted(a["text"] for a in boxes) == ["A", "B", "C"]
    partial = client.get(f"/s/{study.slug}/dashboard/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="dashboard-body"') and "<html" not in partial
    rows = list(csv.reader(io.StringIO(b"".join(client.get(
        f"/s/{study.slug}/export/judgements.csv").streaming_content).decode())))
    assert rows[0][:4] == ["item", "first", "second", "value"] and len(rows) == spent + 1
    decisions = list(csv.DictReader(io.StringIO(client.get(f"/s/{study.slug}/export/decisions.csv").content.decode())))
    assert {(d["first"], d["second"]) for d in decisions} == {("A", "B"), ("A", "C"), ("B", "C")}


def test_dashboard_of_an_imported_study_shows_metric_comparison(client):
    study = study_import(source=BUNDLES / "pandalm.jsonl.gz", metric="gpt35", slug="pandalm")
    researcher_client(client, study)
    data = client.get(f"/s/{study.slug}/dashboard/").context["data"]
    assert data["budget"]["imported"] == 2997
    assert 0.6 < data["favi_summary"]["sample_accuracy"] < 0.8
    assert data["spa"] is not None and 0 <= data["spa"]["spa"] <= 1
    assert len(data["per_system_favi"]) == 5


def test_researcher_changes_budget_and_pauses_the_study(client):
    from annotation.models import PairState, Study

    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=6)))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-settings")
    assignment, context = current_hit(worker, study.slug)
    worker.post(f"/s/{study.slug}/hits/{assignment.pk}/", {"answer": "left", "key": context["key"]})
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/settings/")
    assert page.status_code == 200 and 'name="budget" value="6"' in page.content.decode()
    # A budget of 6 funds a round of 5 and a round of 1; serving fills the round of 1 first,
    # so after one judgement that round is closed and 5 stay asked for.
    assert sorted(PairState.objects.filter(study=study).values_list("quota_left", flat=True)) == [0, 0, 5]
    form = {"status": "running", "budget": 2, "lease_timeout_seconds": 600, "completion_code": "X1",
            "instructions": "Be careful.", "item_choice": "uniform", "item_choice_temperature": 0.25}
    response = client.post(f"/s/{study.slug}/settings/", form)
    assert response.status_code == 400 and "the budget cannot be below 6" in response.content.decode()
    assert Study.objects.get(pk=study.pk).budget == 6
    response = client.post(f"/s/{study.slug}/settings/", {**form, "budget": 40})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.budget == 40 and study.completion_code == "X1" and study.lease_timeout_seconds == 600
    # The larger budget opens rounds for the two waiting pairs at once.
    assert sorted(PairState.objects.filter(study=study).values_list("quota_left", flat=True)) == [5, 5, 5]
    leased, _ = current_hit(worker, study.slug)
    client.post(f"/s/{study.slug}/settings/", {**form, "budget": 40, "status": "paused"})
    assignment, _ = current_hit(worker, study.slug)
    assert assignment.pk == leased.pk  # the worker's open lease is still theirs ...
    fresh = client.__class__()
    start_worker(fresh, study.slug, "pid-new")
    assert current_hit(fresh, study.slug)[0] is None  # ... but a paused study leases nothing new


def test_leaderboard_matrix_and_pair_page(client):
    study = judged_crowd_study(client)
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/dashboard/")
    data = response.context["data"]
    board = data["leaderboard"]
    assert board[0]["system"] == "A" and board[0]["tier"] == 1
    assert all(r["low"] <= r["score"] <= r["high"] for r in board)
    assert sum(r["judgements"] for r in board) == 2 * Judgement.objects.count()
    assert data["order"] == [r["system"] for r in board]
    row_a = next(r for r in data["matrix"] if r["system"] == "A")
    cell_ab = next(c for c in row_a["cells"] if c.get("other") == "B")
    assert cell_ab["tone"] == "better" and cell_ab["theta"] > 0.975
    row_b = next(r for r in data["matrix"] if r["system"] == "B")
    cell_ba = next(c for c in row_b["cells"] if c.get("other") == "A")
    assert cell_ba["tone"] == "worse" and cell_ba["theta"] == pytest.approx(1 - cell_ab["theta"])
    html = response.content.decode()
    assert f'href="/s/{study.slug}/pair/?first=A&amp;second=B"' in html
    # Few judged items per pair: SPA is withheld, and the page says why.
    assert data["spa"] is None or not data["spa"]["enough"]

    page = client.get(f"/s/{study.slug}/pair/?first=A&second=B")
    assert page.status_code == 200
    pair = page.context["pair"]
    ab_judgements = Judgement.objects.filter(comparison__first__name="A", comparison__second__name="B").count()
    assert pair["judgement_count"] == ab_judgements and pair["decision"] == 1
    assert pair["rounds"] and all(r["share_low"] <= r["share"] <= r["share_high"] for r in pair["rounds"])
    assert sum(len(i["judgements"]) for i in pair["items"]) == ab_judgements and len(pair["items"]) == 40
    assert pair["category"] in {"Correct", "Inversion", "Omission", "Insertion"}
    assert {c["name"] for c in page.context["charts"]} >= {"pair-theta"}
    # How the last close computed θ is stored with the pair and shown (issue 9: diagnostics).
    assert pair["diagnostics"]["method"] in {"closed_form", "importance", "exact", "gibbs", "nuts"}
    assert "data-diagnostics" in page.content.decode() and pair["diagnostics"]["method"] in page.content.decode()
    assert client.get(f"/s/{study.slug}/pair/?first=B&second=A")["Location"] == f"/s/{study.slug}/pair/?first=A&second=B"
    assert client.get(f"/s/{study.slug}/pair/?first=A&second=Z").status_code == 404

    link = page.context["judgements_url"]
    rows = list(csv.DictReader(io.StringIO(b"".join(client.get(link).streaming_content).decode())))
    assert len(rows) == ab_judgements and {(r["first"], r["second"]) for r in rows} == {("A", "B")}
    reversed_rows = b"".join(client.get(f"/s/{study.slug}/export/judgements.csv?first=B&second=A").streaming_content)
    assert len(reversed_rows.decode().strip().splitlines()) == ab_judgements + 1
    assert client.get(f"/s/{study.slug}/export/judgements.csv?first=A").status_code == 400


def test_every_help_link_has_its_section(client):
    import re

    study = judged_crowd_study(client)
    researcher_client(client, study)
    help_html = client.get("/help/").content.decode()
    anchors = set(re.findall(r'id="([^"]+)"', help_html))
    for url in (f"/s/{study.slug}/dashboard/", f"/s/{study.slug}/pair/?first=A&second=B"):
        html = client.get(url).content.decode()
        linked = set(re.findall(r'href="/help/#([^"]+)"', html))
        assert linked and linked <= anchors, f"{url}: help links without a section: {linked - anchors}"


def test_systems_sort_naturally_and_empty_states_say_so(client):
    rows = [{"kind": "study", "name": "Natural", "batch_size": 2, "budget": 10}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Input {n}"} for n in range(3)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} on {n}"}
             for n in range(3) for s in ("M10", "M2", "M1", "M0")]
    study = study_import(source=bundle_bytes(rows))
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/dashboard/")
    data = response.context["data"]
    assert list(data["systems"]) == ["M0", "M1", "M2", "M10"] == data["order"]
    position = {s: k for k, s in enumerate(data["systems"])}
    keys = [(position[p["first"]], position[p["second"]]) for p in data["pairs"]]
    assert keys == sorted(keys) and len(keys) == 6
    html = response.content.decode()
    assert "No judgements yet" in html and "No decisions yet" in html


def test_every_metric_against_the_humans(client):
    from annotation import reports

    study = study_import(source=BUNDLES / "pandalm.jsonl.gz", metric="gpt35", slug="pandalm-metrics")
    researcher_client(client, study)
    assert reports.study_metrics_table(study=study) is None
    response = client.get(f"/s/{study.slug}/metrics/?sort=spa")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert sorted(r["name"] for r in rows) == sorted(study.metrics.values_list("name", flat=True)) and len(rows) >= 2
    ours = next(r for r in rows if r["protocol"])
    assert ours["name"] == "gpt35" and "protocol" in response.content.decode()
    dashboard = client.get(f"/s/{study.slug}/dashboard/").context["data"]
    assert ours["sample_accuracy"] == pytest.approx(dashboard["favi_summary"]["sample_accuracy"])
    assert ours["spa"] == pytest.approx(dashboard["spa"]["spa"])
    spas = [r["spa"] for r in rows if r["spa"] is not None]
    assert spas == sorted(spas, reverse=True) and len(spas) == 2
    # Both verdicts are compared on their common items; one of them opens cluster 1.
    assert response.context["table"]["clustered"] == 2 and {r["cluster"] for r in rows} <= {1, 2}
    assert 1 in {r["cluster"] for r in rows}
    by_common = client.get(f"/s/{study.slug}/metrics/").context["rows"]
    assert [r["cluster"] for r in by_common] == sorted(r["cluster"] for r in by_common)
    assert reports.study_metrics_table(study=study) is not None  # cached for the next visit
    by_favi = client.get(f"/s/{study.slug}/metrics/?sort=mean_abs_favi").context["rows"]
    favis = [r["mean_abs_favi"] for r in by_favi if r["mean_abs_favi"] is not None]
    assert favis == sorted(favis)
    assert client.get(f"/s/{study.slug}/metrics/?sort=bogus").status_code == 400


def test_dashboard_and_pair_page_show_agreement_between_annotators(client):
    """Krippendorff's α per study (the quality panel) and per pair (the pair page), equal to
    protocol.agreement on the bundle itself (PandaLM: three annotators per comparison)."""
    from protocol.agreement import agreement, agreement_by_group, bundle_judgements
    from protocol.bundle import read_bundle

    study = study_import(source=BUNDLES / "pandalm.jsonl.gz", metric="gpt35", slug="pandalm-alpha")
    researcher_client(client, study)
    bundle = read_bundle(BUNDLES / "pandalm.jsonl.gz")
    pairs, comparisons, annotators, values = bundle_judgements(bundle)
    whole = agreement(comparisons, annotators, values, bootstrap=0)
    page = client.get(f"/s/{study.slug}/dashboard/")
    shown = page.context["annotator_agreement"]
    assert shown.comparisons == whole.comparisons == 999
    assert abs(shown.alpha_nominal - whole.alpha_nominal) < 1e-12
    assert abs(shown.alpha_ordinal - whole.alpha_ordinal) < 1e-12
    html = page.content.decode()
    assert f"α nominal <strong>{whole.alpha_nominal:.3f}</strong>" in html
    assert f"{whole.percent_agreement * 100:.0f} % of pairs of judgements agree" in html
    by_pair = agreement_by_group(pairs, comparisons, annotators, values, bootstrap=0)
    (first, second), expected = next(iter(by_pair.items()))
    pair_page = client.get(f"/s/{study.slug}/pair/", {"first": first, "second": second})
    assert pair_page.status_code == 200
    assert abs(pair_page.context["pair"]["annotator_agreement"].alpha_nominal - expected.alpha_nominal) < 1e-12
    assert f"α nominal <strong>{expected.alpha_nominal:.3f}</strong>" in pair_page.content.decode()


def test_agreement_says_when_it_cannot_be_computed(client):
    """No comparison judged twice: the panel says what is missing instead of showing NaN."""
    study = study_import(source=bundle_bytes(crowd_rows()), slug="no-overlap")
    researcher_client(client, study)
    html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    # "nan" as a word: a random CSRF token in the page may hold the three letters
    assert "no comparison has been judged twice yet" in html and not re.search(r"\bnan\b", html.lower().split("<body")[1])


def test_the_dashboard_the_pair_page_and_the_report_api_name_a_pairs_metric_category_alike():
    """The metric against the humans on the items both labelled (docs/formulas.md §5): a metric
    that favours A on all 30 items but agrees with the humans' 3 ties' insignificance there is
    Correct everywhere (the dashboard said Insertion: it took the metric's decision on all items)."""
    rows = [{"kind": "study", "name": "Categories", "batch_size": 2, "metric": "judge"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Q{n}"} for n in range(30)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s}{n}"} for n in range(30) for s in "AB"]
    rows += [{"kind": "metric_preference", "item": f"i{n}", "first": "A", "second": "B", "metric": "judge",
              "preference": 1} for n in range(30)]
    rows += [{"kind": "human_preference", "item": f"i{n}", "first": "A", "second": "B", "preference": 1,
              "annotator": "e1"} for n in range(3)]
    study = study_import(source=bundle_bytes(rows), slug="categories")
    dashboard = study_dashboard_data(study=study)["pairs"][0]
    page = pair_detail_data(study=study, first="A", second="B")
    researcher, user = api_for("cat-researcher")
    study_membership_set(study=study, user=user, role="researcher")
    report = researcher.get("/api/studies/categories/report/").json()["pairs"][0]
    assert dashboard["category"] == page["category"] == report["category"] == "Correct"
    assert page["metric_decision"] == 1  # on its own, over all 30 items, the metric decides
