"""Issue 22: reads that grow with what is asked for, not with items x pairs."""
import random

import numpy as np
import pytest
from django.core.cache import caches

from annotation.selectors.studies import study_metric_counts, study_metric_labels
from annotation.services.studies import study_import
from protocol.ranking import label_counts
from tests.builders.bundles import bundle_bytes, many_systems_rows, rubric_rows

pytestmark = pytest.mark.django_db

SYSTEMS = ("s1", "s2", "s10", "s3")


def _rows(items=30, missing=("i03", "s2")):
    rng = random.Random(3)
    rows = [{"kind": "study", "name": "Scale labels", "batch_size": 5, "budget": 40, "metric": "m"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} {n}"}
             for n in range(items) for s in SYSTEMS]
    # Scores on a coarse grid so that ties (within the margin) occur.
    rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "m",
              "score": rng.choice([0.0, 0.25, 0.5, 0.75])}
             for n in range(items) for s in SYSTEMS if (f"i{n:02d}", s) != missing]
    return rows


def _reference(rows) -> dict:
    """sign(first - second) per item from the bundle's own rows, for items both systems scored."""
    score = {(r["item"], r["system"]): r["score"] for r in rows if r["kind"] == "metric_score"}
    items = [r["id"] for r in rows if r["kind"] == "item"]
    out = {}
    for a in SYSTEMS:
        for b in SYSTEMS:
            if a < b:
                out[(a, b)] = {i: int(np.sign(score[(i, a)] - score[(i, b)])) for i in items
                               if (i, a) in score and (i, b) in score}
    return out


def test_metric_labels_are_the_signs_of_the_score_differences_and_one_pair_reads_alone():
    rows = _rows()
    study = study_import(source=bundle_bytes(rows))
    labels = study_metric_labels(study=study)
    assert labels == _reference(rows)
    assert "i03" not in labels[("s1", "s2")] and "i03" in labels[("s1", "s3")]
    assert any(v == 0 for pair in labels.values() for v in pair.values())  # ties are labelled 0
    for pair in labels:
        assert study_metric_labels(study=study, pair=pair) == {pair: labels[pair]}
    assert study_metric_labels(study=study, pair=("s2", "s1")) == {}  # not canonical: no such pair


def test_metric_counts_are_the_counts_of_the_metric_labels_and_labels_read_only_the_judged_items():
    """The metric's decisions (dashboard, metrics page) are sign tests of its counts, taken from
    the score table in one pass rather than from 2.45 M labels at 50 x 2,000: the same counts,
    ties and a missing score included, for scores and for a judge's verdicts."""
    for rows, metric in ((_rows(), None), (rubric_rows(), "judge_help")):
        study = study_import(source=bundle_bytes(rows))
        chosen = study.metrics.get(name=metric) if metric else None
        labels = study_metric_labels(study=study, metric=chosen)
        counts = study_metric_counts(study=study, metric=chosen)
        assert labels and set(counts) == set(labels)
        for pair, found in labels.items():
            assert counts[pair].tolist() == label_counts(list(found.values())).tolist(), pair
        # the items humans judged: only those pairs, only those items (and none it never labels)
        first, second = list(labels)[:2]
        asked = {first: sorted(labels[first])[:3] + ["no-such-item"], second: []}
        assert study_metric_labels(study=study, metric=chosen, judged=asked) == {
            first: {item: labels[first][item] for item in sorted(labels[first])[:3]}}


def test_metric_counts_span_the_pass_in_chunks():
    """24 systems: 276 pairs, more than one pass of ``MetricLabelSource.counts`` (256 pairs a
    pass); coarse scores (ties) and missing ones."""
    rng = random.Random(5)
    systems = [f"m{n:02d}" for n in range(24)]
    rows = [{"kind": "study", "name": "Chunks", "batch_size": 2, "budget": 100, "metric": "m"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Input {n}"} for n in range(6)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} {n}"} for n in range(6) for s in systems]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m", "score": rng.choice([0, 1, 2])}
             for n in range(6) for s in systems if rng.random() > 0.1]
    study = study_import(source=bundle_bytes(rows))
    labels = study_metric_labels(study=study)
    counts = study_metric_counts(study=study)
    assert len(labels) > 256 and set(counts) == set(labels)
    assert all(counts[p].tolist() == label_counts(list(v.values())).tolist() for p, v in labels.items())


def test_many_systems_get_a_heatmap_few_a_table(client):
    from tests.builders.clients import researcher_client

    for k, heatmap in ((20, False), (21, True)):
        study = study_import(source=bundle_bytes(many_systems_rows(k)))
        researcher_client(client, study)
        response = client.get(f"/s/{study.slug}/dashboard/")
        html = response.content.decode()
        assert ('id="plot-matrix"' in html) is heatmap and ('<table class="matrix">' in html) is not heatmap
        if heatmap:
            figure = response.context["matrix_chart"]["figure"]
            assert response.context["matrix_pages"] == []  # one page: no page links
            (trace,) = figure["data"]
            assert trace["type"] == "heatmap" and len(trace["z"]) == k and all(len(r) == k for r in trace["z"])
            order = response.context["data"]["order"]
            row, column = order.index("sys00"), order.index("sys01")
            assert trace["z"][row][column] == 0.5 and trace["z"][row][row] is None  # no θ yet; the diagonal
            assert f'data-pair-url="/s/{study.slug}/pair/"' in html
            assert f'href="/s/{study.slug}/export/decisions.csv"' in html  # the fallback without JavaScript


def test_more_systems_than_a_page_show_the_heatmap_a_page_of_ranks_at_a_time(client):
    """Issue 41: at 200 systems the whole heatmap made the dashboard's HTML 569-618 KB. Pages of
    50 consecutive ranks, overlapping by 10: 60 systems are ranks 1-50 and 11-60."""
    from tests.builders.clients import researcher_client

    study = study_import(source=bundle_bytes(many_systems_rows(60, items=2)))
    researcher_client(client, study)
    url = f"/s/{study.slug}/dashboard/"
    first, second = client.get(url), client.get(url + "?matrix=2")
    order = first.context["data"]["order"]
    for response, ranks in ((first, slice(0, 50)), (second, slice(10, 60))):
        (trace,) = response.context["matrix_chart"]["figure"]["data"]
        assert trace["y"] == order[ranks] and trace["x"] == order[ranks]
        assert len(trace["z"]) == 50 and all(len(r) == 50 for r in trace["z"])
    assert second.context["matrix_chart"]["figure"]["data"][0]["z"][0][1] == 0.5  # ranks 11 vs 12: no θ yet
    html = second.content.decode()
    assert '<a href="?matrix=1#matrix">ranks 1–50</a>' in html and '<strong aria-current="page">ranks 11–60</strong>' in html
    # The refresh keeps the page it shows (else every refresh would jump back to the first page).
    assert f'hx-get="{url}?matrix=2"' in html
    refreshed = client.get(url + "?matrix=2", HTTP_HX_REQUEST="true")
    assert refreshed.context["matrix_chart"]["page"] == 2 and f'hx-get="{url}?matrix=2"' in refreshed.content.decode()
    for wrong in ("3", "0", "x"):
        refused = client.get(url + f"?matrix={wrong}")
        assert refused.status_code == 400 and "the pair matrix has pages 1 to 2" in refused.content.decode()


def test_the_dashboard_is_computed_once_per_round_and_counts_the_budget_every_time(client):
    from annotation.models import Judgement
    from tests.builders.bundles import crowd_rows
    from tests.builders.clients import researcher_client
    from tests.builders.crowd import answer_truthfully, current_hit, start_worker, truthful_answer

    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=60)))
    researcher = client.__class__()
    researcher_client(researcher, study)
    response = researcher.get(f"/s/{study.slug}/dashboard/")
    first, first_html = response.context["data"], response.content.decode()
    assert first["budget"]["spent"] == 0 and sum(r["judgements"] for r in first["leaderboard"]) == 0
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-round")
    assignment, context = current_hit(worker, study.slug)
    worker.post(f"/s/{study.slug}/hits/{assignment.pk}/",
                {"answer": truthful_answer(context["left"], context["right"]), "key": context["key"]})
    # Within the round: the budget is counted now, the leaderboard is the round's.
    during = researcher.get(f"/s/{study.slug}/dashboard/").context["data"]
    assert during["budget"]["spent"] == 1 and sum(r["judgements"] for r in during["leaderboard"]) == 0
    answer_truthfully(worker, study.slug, 30)
    # Rounds closed: this request shows the last computed round and has the new one computed
    # (off the request; at once in the tests), which the next request shows.
    researcher.get(f"/s/{study.slug}/dashboard/")
    response = researcher.get(f"/s/{study.slug}/dashboard/")
    after = response.context["data"]
    spent = Judgement.objects.count()
    assert after["budget"]["spent"] == spent
    assert sum(r["judgements"] for r in after["leaderboard"]) == 2 * spent
    # The round's figures and their rendered cards are the new round's, not the first view's.
    assert 'id="figure-favi"' not in first_html and 'id="figure-favi"' in response.content.decode()


def test_the_dashboards_figures_are_built_once_per_round_not_per_view(client, monkeypatch):
    """Building a figure through plotly costs more than reading it (350 ms at 50 systems): the
    views of one round read the figures cached with the round's data."""
    from annotation import figures
    from tests.builders.bundles import crowd_rows
    from tests.builders.clients import researcher_client

    built = []

    def counted(build):
        def wrapper(*args, **kwargs):
            built.append(build.__name__)
            return build(*args, **kwargs)
        return wrapper

    for name in ("dag_figure", "matrix_figure", "timeline_figure", "favi_box_figure", "separability_figure"):
        monkeypatch.setattr(figures, name, counted(getattr(figures, name)))
    study = study_import(source=bundle_bytes(crowd_rows(batch=5, budget=60)))
    researcher_client(client, study)
    htmls = [client.get(f"/s/{study.slug}/dashboard/").content.decode() for _ in range(2)]
    htmls.append(client.get(f"/s/{study.slug}/dashboard/", headers={"HX-Request": "true"}).content.decode())
    assert built.count("dag_figure") == 3  # protocol, human, metric: once, by the import's computation
    assert all('id="figure-dag-protocol"' in html for html in htmls)


def test_the_front_page_counts_each_study_on_its_own(client):
    """The counts come from one subquery each (no join of systems x items x pairs); each study
    gets its own, and a pair that has stopped is no work left."""
    from django.contrib.auth.models import User

    from annotation.models import PairState
    from tests.builders.bundles import crowd_rows

    small = study_import(source=bundle_bytes(crowd_rows(items=40)))
    wide = study_import(source=bundle_bytes(many_systems_rows(21, items=3)))
    PairState.objects.filter(study=wide).exclude(first__name="sys00", second__name="sys01").update(status="decided")
    client.force_login(User.objects.create_user("staff-scale", password="pw-12345678", is_staff=True))
    studies = {s.slug: s for s in client.get("/").context["studies"]}
    assert (studies[small.slug].system_count, studies[small.slug].item_count, studies[small.slug].active_pairs) == (3, 40, 3)
    assert (studies[wide.slug].system_count, studies[wide.slug].item_count) == (21, 3)
    assert studies[wide.slug].active_pairs == PairState.objects.filter(study=wide, status__in=("open", "filled")).count() <= 1


def test_import_study_computes_the_metrics_table_and_leaves_the_dashboard_to_its_job(tmp_path, client):
    """The command computes the metrics table (its first view a read) but not the dashboard: at
    200 systems that was 13 of the command's 30 s of CPU and its peak memory (docs/benchmarks.md,
    "Import"). The dashboard's first view has the report job compute it (at once here: jobs run
    inline in the tests)."""
    from django.core.management import call_command

    from annotation import reports
    from annotation.models import Study
    from annotation.selectors.dashboard import dashboard_version
    from tests.builders.bundles import crowd_rows
    from tests.builders.clients import researcher_client

    caches["shared"].clear()  # no entry of an earlier test's study under the same id
    path = tmp_path / "crowd.jsonl"
    path.write_bytes(bundle_bytes(crowd_rows()))
    call_command("import_study", str(path), "--slug", "warm", verbosity=0)
    study = Study.objects.get(slug="warm")
    assert reports.DASHBOARD.read(study.pk) is None
    table = reports.study_metrics_table(study=study)  # the page's read: no job to start
    assert table is not None and [row["name"] for row in table["rows"]] == [m.name for m in study.metrics.all()]
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/dashboard/")
    assert response.status_code == 200 and 'id="leaderboard"' in response.content.decode()
    cached = reports.DASHBOARD.read(study.pk)
    assert cached is not None and cached[0] == dashboard_version(study=study)


def test_a_dashboard_being_computed_says_so_and_is_not_computed_by_the_request(client):
    """While the report job computes a study's first dashboard (its lock taken), the page says
    so and reloads itself, its htmx refresh keeps asking, and nothing is computed in the
    request (a request computed it: tens of seconds at 200 systems); once the job is done the
    page is the dashboard."""
    from annotation import reports
    from tests.builders.bundles import crowd_rows
    from tests.builders.clients import researcher_client

    caches["shared"].clear()  # no entry or lock of an earlier test's study under the same id
    study = study_import(source=bundle_bytes(crowd_rows()))
    researcher_client(client, study)
    url = f"/s/{study.slug}/dashboard/"
    assert reports.DASHBOARD.claim(study.pk)  # a job computing it elsewhere
    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and 'id="dashboard-computing"' in html and 'http-equiv="refresh"' in html
    body = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="dashboard-computing"' in body and f'hx-get="{url}"' in body
    assert reports.DASHBOARD.read(study.pk) is None
    reports.study_dashboard_refresh(study_id=study.pk)  # the job's body; it releases the lock
    done = client.get(url).content.decode()
    assert 'id="dashboard-computing"' not in done and 'id="leaderboard"' in done


def test_the_pair_page_shows_its_items_a_page_at_a_time_judged_first(client):
    """250 items: the page holds 100 rows (not 250) with the judged item first, and links
    page through the rest without JavaScript."""
    from tests.builders.bundles import one_pair_rows
    from tests.builders.clients import researcher_client

    rows = one_pair_rows(items=250)
    rows.append({"kind": "human_preference", "item": "i249", "first": "A", "second": "B", "preference": 1,
                 "annotator": "e1"})
    study = study_import(source=bundle_bytes(rows))
    researcher_client(client, study)
    url = f"/s/{study.slug}/pair/?first=A&second=B"
    html = client.get(url).content.decode()
    assert html.count('<tr><td title="i') == 100
    assert html.index('title="i249"') < html.index('title="i00"')  # the judged item leads
    assert "items 1–100 of 250" in html and 'href="?first=A&amp;second=B&amp;page=2#items"' in html
    last = client.get(url + "&page=3").content.decode()
    assert last.count('<tr><td title="i') == 50 and 'title="i248"' in last and "page=2#items" in last
    assert client.get(url + "&page=x").status_code == 200  # a bad page number shows the first


def test_a_pair_page_reads_its_two_systems_scores_not_the_studys(client):
    """The first pair page of a process used to load the study's every score (100,000 at 50 x
    2,000) to show one pair; it reads the pair's two systems' and gives the same labels."""
    from annotation.serving import metric_labels
    from tests.builders.clients import researcher_client

    rows = _rows()
    study = study_import(source=bundle_bytes(rows))
    metric_labels._sources.clear()  # a fresh process
    researcher_client(client, study)
    response = client.get(f"/s/{study.slug}/pair/?first=s1&second=s2")
    assert response.status_code == 200
    assert not any(key[0] == study.pk for key in metric_labels._sources.keys())
    shown = {i["item"]: i["metric"] for i in response.context["pair"]["items"]}
    reference = _reference(rows)[("s1", "s2")]
    assert {item: label for item, label in shown.items() if label is not None} == reference
    for pair, labels in _reference(rows).items():
        assert study_metric_labels(study=study, pair=pair) == {pair: labels}  # each pair read alone
    assert not any(key[0] == study.pk for key in metric_labels._sources.keys())


def test_a_leaderboard_without_judgements_names_a_few_of_many_systems(client):
    """Before the first judgement the leaderboard's card listed every system: at 200 systems a
    wall of 200 names above the budget (seen in the browser at 1366 x 768)."""
    import re

    from tests.builders.clients import researcher_client

    for k, named in ((12, 12), (30, 6)):
        study = study_import(source=bundle_bytes(many_systems_rows(k)))
        researcher_client(client, study)
        html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
        (empty,) = re.findall(r'<p class="empty">No judgements yet: the ranking.*?</p>', html, re.S)
        assert len(re.findall(r"sys\d\d", empty)) == named, empty
        assert f"sys{k - 1:02d}" in empty and (k <= 12 or f"{k} systems" in empty)


def test_beyond_fifty_systems_the_significance_graphs_are_said_not_drawn(client):
    """At 200 systems the three DAGs drew 200 overlapping boxes each (seen at 1366 x 768), and
    their tables of edges went into every dashboard's HTML."""
    from tests.builders.clients import researcher_client

    for k, drawn in ((50, True), (51, False)):
        study = study_import(source=bundle_bytes(many_systems_rows(k)))
        researcher_client(client, study)
        html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
        for name in ("protocol", "human", "metric"):
            assert (f'id="plot-dag-{name}"' in html) is drawn and (f'id="figure-dag-{name}"' in html) is drawn
        assert (f"{k} systems are too many to draw as a graph" in html) is not drawn
