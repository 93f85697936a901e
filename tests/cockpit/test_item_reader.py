"""The item reader (/s/<slug>/item/?item=ID[&first=A&second=B]) and the item search
(/s/<slug>/items/?q=TEXT[&annotator=N]): what a researcher reads about one item, and how they
find it (docs/studies.md, "Reading items")."""
import html as html_lib
import re
from datetime import timedelta
from urllib.parse import quote, urlencode

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation import selectors
from annotation.models import Annotator, Assignment, Comparison, Item, ItemFlag, Judgement, Output, PairState
from annotation.services import quality
from annotation.services.studies import study_import
from tests.builders.annotating import worker
from tests.builders.backends import WRITE_STATEMENT
from tests.builders.bundles import bundle_bytes, rubric_rows
from tests.builders.clients import researcher_client
from tests.builders.hostile import IMG, SCRIPT, hostile_rows

pytestmark = pytest.mark.django_db

ODD_ID = "doc/1 a b"  # a slash and spaces: the id goes in the query string, percent-encoded


def reader_rows():
    """Three systems on three items (one named with a slash and spaces, one '..'), a score
    metric (the protocol's), a judge's verdicts on A vs B of ODD_ID in both position orders
    (disagreeing, so its label is a tie), and one imported judgement by e1 (A better)."""
    rows = [{"kind": "study", "name": "Reader study", "criterion": "quality", "metric": "m", "batch_size": 2,
             "budget": 20}]
    rows += [{"kind": "item", "id": ODD_ID, "input": "The first question about Zebras", "reference": "A reference text"},
             {"kind": "item", "id": "..", "input": "Second question"},
             {"kind": "item", "id": "plain", "input": "Third question"}]
    rows += [{"kind": "output", "item": item, "system": s, "text": f"{s} says hello to item {n}"}
             for n, item in enumerate((ODD_ID, "..", "plain")) for s in "ABC"]
    rows += [{"kind": "metric_score", "item": item, "system": s, "metric": "m", "score": v}
             for item in (ODD_ID, "..", "plain") for s, v in zip("ABC", (0.9, 0.4, 0.4))]
    # Canonical order is (A, B): the first row is stored flipped (A first, order BA: B was shown first).
    rows += [{"kind": "metric_preference", "item": ODD_ID, "first": "B", "second": "A", "metric": "judge",
              "preference": -1, "judge": "gpt-x", "prompt": "pairwise-v2", "order": "AB"},
             {"kind": "metric_preference", "item": ODD_ID, "first": "A", "second": "B", "metric": "judge",
              "preference": -1, "judge": "gpt-x", "prompt": "pairwise-v2", "order": "AB"},
             {"kind": "metric_preference", "item": "plain", "first": "B", "second": "C", "metric": "judge",
              "preference": 1, "judge": "gpt-x", "prompt": "pairwise-v2", "order": "AB"}]
    rows += [{"kind": "human_preference", "item": ODD_ID, "first": "A", "second": "B", "preference": 1,
              "annotator": "e1"}]
    return rows


def judged(study, item_id, first, second, annotator, value, *, kind="real", swapped=False, server=None, read=None):
    """A live judgement on (item, pair) with its HIT, as the serving loop leaves them."""
    item = Item.objects.get(study=study, external_id=item_id)
    pair = PairState.objects.get(study=study, first__name=first, second__name=second)
    comparison, _ = Comparison.objects.get_or_create(study=study, item=item, first=pair.first, second=pair.second,
                                                     defaults={"pair": pair})
    now = timezone.now()
    assignment = Assignment.objects.create(annotator=annotator, comparison=comparison, shown_swapped=swapped,
                                           issued_at=now - timedelta(seconds=server or 1), expires_at=now,
                                           state=Assignment.State.SUBMITTED, kind=kind)
    return Judgement.objects.create(comparison=comparison, annotator=annotator, assignment=assignment, value=value,
                                    kind=kind, server_seconds=server, read_seconds=read)


@pytest.fixture
def reader_study():
    study = study_import(source=bundle_bytes(reader_rows()), slug="reader")
    live, spam = worker("w-live"), worker("w-spam")
    j_live = judged(study, ODD_ID, "A", "B", live, -1, swapped=True, server=12.5, read=4.21)
    j_spam = judged(study, ODD_ID, "A", "B", spam, 1, server=0.4)
    j_repeat = judged(study, ODD_ID, "A", "B", live, -1, kind="repeat", server=6.0)
    j_other = judged(study, ODD_ID, "B", "C", live, 0, server=3.0)
    quality.annotator_exclude(study=study, annotator=spam, reason="too fast")
    ItemFlag.objects.create(item=Item.objects.get(study=study, external_id=ODD_ID), annotator=live,
                            reason=ItemFlag.Reason.BROKEN, note="the reference is cut off")
    study.refresh_from_db()
    return study, {"live": j_live, "spam": j_spam, "repeat": j_repeat, "other": j_other}


def reader_url(study, item, first=None, second=None):
    query = {"item": item, **({"first": first, "second": second} if first else {})}
    return f"/s/{study.slug}/item/?{urlencode(query)}"


def text_of(fragment: str) -> str:
    """A fragment of HTML as its words (tags dropped, entities decoded, spaces collapsed)."""
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def element(html: str, pattern: str) -> str:
    """The first <tr>, <li>, <p> or <section> whose opening tag matches ``pattern``, up to its end tag."""
    found = re.search(rf"<(tr|li|p|section)\b[^>]*{pattern}[^>]*>(.*?)</\1>", html, re.S)
    assert found, pattern
    return found.group(2)


def test_the_reader_of_one_pair_shows_every_judgement_in_the_researchers_terms(client, reader_study):
    study, j = reader_study
    researcher_client(client, study)
    response = client.get(reader_url(study, ODD_ID, "A", "B"))
    assert response.status_code == 200
    page = response.content.decode()
    words = text_of(page)
    assert "The first question about Zebras" in words and "A reference text" in words
    # The two outputs of the pair side by side, in the pair's order; C's is not shown.
    outputs = re.findall(r'<article class="card item-output" data-system="([^"]+)"', page)
    assert outputs == ["A", "B"]
    assert "C says hello" not in words
    # Every judgement on the comparison, oldest first: the imported one, then the three live.
    rows = re.findall(r'data-judgement="(\d+)"', page)
    imported = Judgement.objects.get(annotator__external_id="e1")
    assert rows == [str(imported.pk), str(j["live"].pk), str(j["spam"].pk), str(j["repeat"].pk)]
    e1 = text_of(element(page, f'data-judgement="{imported.pk}"'))
    assert "import:e1" in e1 and "A better" in e1 and "imported with the study" in e1
    assert "not counted" not in e1 and "counted" in e1
    live = text_of(element(page, f'data-judgement="{j["live"].pk}"'))
    assert "prolific:w-live" in live and "B better" in live and "12.5 s server" in live and "4.2 s reading" in live
    assert "A: B B: A" in live  # B was shown on the left, as A
    assert "not counted" not in live
    spam = text_of(element(page, f'data-judgement="{j["spam"].pk}"'))
    assert "A better" in spam and "excluded" in spam and "not counted: the worker is excluded" in spam
    repeat = text_of(element(page, f'data-judgement="{j["repeat"].pk}"'))
    assert "not counted: a repeat of the worker's earlier judgement" in repeat
    # The worker links to their row in the dashboard's quality table, which has that anchor.
    live_id = j["live"].annotator_id
    assert f'href="/s/{study.slug}/dashboard/#worker-{live_id}"' in page
    assert f'id="worker-{live_id}"' in client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert f'href="/s/{study.slug}/items/?annotator={live_id}"' in page
    # Counted: e1's and w-live's real judgements only.
    summary = text_of(element(page, r'class="card item-pair"'))
    assert "2 of 4 judgements counted: A 1 · about the same 0 · B 1" in summary
    # The protocol's metric: both scores and its label; the judge's two orders and its tie.
    m = text_of(element(page, 'data-metric="m"'))
    assert "protocol" in m and "A 0.900 · B 0.400" in m and "A better" in m
    ab = text_of(element(page, 'data-order="AB"'))
    ba = text_of(element(page, 'data-order="BA"'))
    assert "gpt-x" in ab and "pairwise-v2" in ab and "order AB (A shown first)" in ab and "B better" in ab
    assert "order BA (B shown first)" in ba and "A better" in ba
    assert "about the same" in text_of(element(page, "data-combined"))
    # The workers' report.
    flags = text_of(element(page, 'id="flags"'))
    assert "Text is broken, cut off or unreadable" in flags and "the reference is cut off" in flags
    assert "prolific:w-live" in flags


def test_the_reader_data_counts_as_the_protocol_does(reader_study):
    study, j = reader_study
    item = Item.objects.get(study=study, external_id=ODD_ID)
    data = selectors.items.item_reader_data(study=study, item=item, pair=("A", "B"))
    (pair,) = data["pairs"]
    counted = {row["id"] for row in pair["judgements"] if row["counted"]}
    protocol = set(selectors.quality.counted_judgements(study=study).filter(
        comparison__item=item, comparison__first__name="A", comparison__second__name="B").values_list("pk", flat=True))
    assert counted == protocol and len(counted) == 2
    quality.annotator_include(study=study, annotator=j["spam"].annotator)
    data = selectors.items.item_reader_data(study=study, item=item, pair=("A", "B"))
    assert {row["id"] for row in data["pairs"][0]["judgements"] if row["counted"]} == protocol | {j["spam"].pk}


def test_the_reader_without_a_pair_shows_every_output_and_each_judged_pair(client, reader_study):
    study, j = reader_study
    researcher_client(client, study)
    page = client.get(reader_url(study, ODD_ID)).content.decode()
    assert re.findall(r'<article class="card item-output" data-system="([^"]+)"', page) == ["A", "B", "C"]
    scores = text_of(element(page.replace("<article", "<section").replace("</article>", "</section>"),
                             'data-system="C"'))
    assert "C says hello to item 0" in scores and "m 0.400" in scores
    sections = re.findall(r'<h2 class="pair-head">(.*?)</h2>', page, re.S)
    assert [text_of(s).split(" side by side")[0] for s in sections] == ["A vs B", "B vs C"]
    assert page.count("data-judgement=") == 5
    pair_link = reader_url(study, ODD_ID, "A", "B").replace("&", "&amp;")
    assert f'href="{pair_link}"' in page
    # B vs C of this item: the tie answered live, and the metric's scores say the same.
    bc = text_of(element(page, 'id="pair-2"'))
    assert "about the same" in bc and "B 0.400 · C 0.400" in bc
    # Any pair can be opened with a plain GET form.
    assert re.search(r'<form method="get" action="/s/reader/item/" class="pair-chooser">', page)
    assert f'name="item" value="{html_lib.escape(ODD_ID)}"' in page


def test_the_reader_pages_the_outputs_of_many_systems(client, monkeypatch):
    """At 200 systems the reader showed every output (a 10,000-px page): it shows
    OUTPUTS_PER_PAGE of them, by name, with plain page links that keep the item; the page's
    outputs are the only ones loaded, and a judged pair's systems still get their scores."""
    monkeypatch.setattr(selectors.items, "OUTPUTS_PER_PAGE", 4)
    names = [f"s{k:02d}" for k in range(10)]
    rows = [{"kind": "study", "name": "Many", "criterion": "quality", "metric": "m", "batch_size": 2, "budget": 20},
            {"kind": "item", "id": ODD_ID, "input": "A question"}]
    rows += [{"kind": "output", "item": ODD_ID, "system": s, "text": f"{s} answers"} for s in names]
    rows += [{"kind": "metric_score", "item": ODD_ID, "system": s, "metric": "m", "score": k / 10}
             for k, s in enumerate(names)]
    study = study_import(source=bundle_bytes(rows), slug="many")
    judged(study, ODD_ID, "s01", "s09", worker("w1"), 1)
    researcher_client(client, study)
    shown = lambda page: re.findall(r'<article class="card item-output" data-system="([^"]+)"', page)  # noqa: E731
    built = []
    post_init.connect(lambda sender, instance, **kw: built.append(instance.system_id), sender=Output, weak=False,
                      dispatch_uid="reader-outputs")
    try:
        first = client.get(reader_url(study, ODD_ID)).content.decode()
    finally:
        post_init.disconnect(sender=Output, dispatch_uid="reader-outputs")
    assert shown(first) == names[:4]
    # the outputs built: the page's four and s09 of the judged pair, not the item's ten
    assert len(built) == 5
    assert "s01 0.100 · s09 0.900" in text_of(element(first, 'id="pair-1"'))
    assert "10 systems answered it" in text_of(first)
    query = urlencode({"item": ODD_ID})
    assert f'href="?{query}&amp;page=2#outputs" rel="next"' in first
    assert "outputs 1–4 of 10" in text_of(first)
    last = client.get(reader_url(study, ODD_ID) + "&page=3").content.decode()
    assert shown(last) == names[8:] and f'href="?{query}&amp;page=2#outputs" rel="prev"' in last
    assert shown(client.get(reader_url(study, ODD_ID) + "&page=99").content.decode()) == names[8:]
    assert shown(client.get(reader_url(study, ODD_ID) + "&page=x").content.decode()) == names[:4]
    # a pair's reader shows its two outputs, unpaged
    pair = client.get(reader_url(study, ODD_ID, "s01", "s09")).content.decode()
    assert shown(pair) == ["s01", "s09"] and 'aria-label="pages of outputs"' not in pair


def test_the_reader_of_a_pair_only_judges_saw(client, reader_study):
    study, _ = reader_study
    researcher_client(client, study)
    page = client.get(reader_url(study, "plain")).content.decode()
    assert "No human judgement on this item yet." in text_of(page)
    assert "Only judges' verdicts (1 pair): B vs C" in text_of(element(page, 'id="pairs"'))
    page = client.get(reader_url(study, "plain", "B", "C")).content.decode()
    row = text_of(element(page, 'data-metric="judge"'))
    assert "gpt-x" in row and "order AB (B shown first)" in row and "B better" in row
    assert "No human judgement on this pair of the item." in text_of(page)


def test_item_ids_with_any_character_and_bad_requests(client, reader_study):
    study, _ = reader_study
    researcher_client(client, study)
    # A slash and spaces, percent-encoded in the query string; ".." too (a path would lose it).
    assert client.get(f"/s/{study.slug}/item/?item={quote(ODD_ID, safe='')}").context["item"].external_id == ODD_ID
    assert client.get(f"/s/{study.slug}/item/?item=doc/1+a+b").context["item"].external_id == ODD_ID
    assert client.get(f"/s/{study.slug}/item/?item=..").context["item"].external_id == ".."
    assert client.get(f"/s/{study.slug}/item/?item=doc/1").status_code == 404
    assert client.get(f"/s/{study.slug}/item/").status_code == 400
    # A pair is named in canonical order (the pair page's rule); reversed, the reader redirects.
    response = client.get(reader_url(study, ODD_ID, "B", "A"))
    assert response.status_code == 302 and response["Location"] == reader_url(study, ODD_ID, "A", "B")
    assert client.get(reader_url(study, ODD_ID, "A", "A")).status_code == 400
    assert client.get(reader_url(study, ODD_ID, "A", "Z")).status_code == 404
    assert client.get(f"/s/{study.slug}/item/?item=plain&first=A").status_code == 400


def test_rubric_answers_with_strength_and_reason(client):
    study = study_import(source=bundle_bytes(rubric_rows(items=4, imported=2)), slug="rubric-reader")
    researcher_client(client, study)
    page = client.get(reader_url(study, "r00", "A", "B")).content.decode()
    (row,) = re.findall(r'<tr class="" data-judgement="\d+">(.*?)</tr>', page, re.S)
    help_ = text_of(element(row, 'data-criterion="helpfulness"'))
    assert help_ == "Which answer helps more? A much better A is complete"
    correct = text_of(element(row, 'data-criterion="correctness"'))
    assert correct == "Which answer is more correct? B better A has a bug"
    assert text_of(element(row, 'data-criterion="style"')) == "Which answer reads better? about the same"
    assert '<q class="reason-text">A is complete</q>' in row
    summary = text_of(element(page, r'class="card item-pair"'))
    assert "1 of 1 judgement counted" in summary
    assert "Which answer helps more? A 1 · about the same 0 · B 0" in summary
    assert "Which answer is more correct? A 0 · about the same 0 · B 1" in summary
    # The judge is the helpfulness criterion's metric.
    judge = text_of(element(page, 'data-metric="judge_help"'))
    assert "Which answer helps more?" in judge and "gpt-x" in judge and "A better" in judge


def test_hostile_ids_and_texts_are_shown_as_text(client):
    study = study_import(source=bundle_bytes(hostile_rows()), slug="hostile-items")
    researcher_client(client, study)
    item = f"{SCRIPT}1"
    page = client.get(reader_url(study, item)).content.decode()
    assert SCRIPT not in page and IMG not in page
    assert html_lib.escape(SCRIPT) in page
    search = client.get(f"/s/{study.slug}/items/?{urlencode({'q': SCRIPT})}").content.decode()
    assert SCRIPT not in search and f"<mark>{html_lib.escape(SCRIPT)}</mark>" in search


def test_search_by_text_is_case_insensitive_and_names_where_it_matched(client, reader_study):
    study, _ = reader_study
    researcher_client(client, study)

    def hits(query):
        response = client.get(f"/s/{study.slug}/items/?{urlencode({'q': query})}")
        assert response.status_code == 200
        return [(r["item"].external_id, r["where"]) for r in response.context["rows"]], response.content.decode()

    found, page = hits("zebras")
    assert found == [(ODD_ID, "input")]
    assert "<mark>Zebras</mark>" in page
    assert f'href="{reader_url(study, ODD_ID)}"' in page
    assert hits("REFERENCE TEXT")[0] == [(ODD_ID, "reference")]
    assert hits("hello to item 2")[0] == [("plain", "output of A")]
    assert hits("question")[0] == [(ODD_ID, "input"), ("..", "input"), ("plain", "input")]
    assert hits("no such words")[0] == []
    assert "No item holds" in text_of(hits("no such words")[1])
    assert client.get(f"/s/{study.slug}/items/?q={'x' * 201}").status_code == 400


def test_an_empty_search_lists_judged_items_first_a_page_at_a_time(client, monkeypatch):
    rows = [{"kind": "study", "name": "Many", "batch_size": 2, "budget": 10}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(7)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} {n}"} for n in range(7) for s in "AB"]
    study = study_import(source=bundle_bytes(rows), slug="many")
    judged(study, "i05", "A", "B", worker("w1"), 1)
    judged(study, "i03", "A", "B", worker("w2"), -1)
    researcher_client(client, study)
    monkeypatch.setattr(selectors.items, "ITEMS_PER_PAGE", 3)
    first = client.get(f"/s/{study.slug}/items/")
    assert [r["item"].external_id for r in first.context["rows"]] == ["i03", "i05", "i00"]
    assert [r["judgements"] for r in first.context["rows"]] == [1, 1, 0]
    html = first.content.decode()
    assert "items 1–3 of 7 (page 1 of 3)" in html and 'href="?page=2" rel="next"' in html
    second = client.get(f"/s/{study.slug}/items/?page=2")
    assert [r["item"].external_id for r in second.context["rows"]] == ["i01", "i02", "i04"]
    # A query's pages keep the query.
    page = client.get(f"/s/{study.slug}/items/?q=input").content.decode()
    assert 'href="?q=input&amp;page=2" rel="next"' in page


def test_one_workers_items_from_the_quality_table(client, reader_study):
    study, j = reader_study
    researcher_client(client, study)
    live = j["live"].annotator
    dashboard = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    quality_row = element(dashboard, f'id="worker-{live.pk}"')
    assert f'href="/s/{study.slug}/items/?annotator={live.pk}"' in quality_row
    response = client.get(f"/s/{study.slug}/items/?annotator={live.pk}")
    (row,) = response.context["rows"]
    assert row["item"].external_id == ODD_ID
    theirs = text_of(element(response.content.decode(), 'class="card item-hit"'))
    assert "A vs B B better · A vs B B better (repeat) · B vs C about the same" in theirs
    assert f'href="{reader_url(study, ODD_ID, "B", "C")}"'.replace("&", "&amp;") in response.content.decode()
    assert "prolific:w-live" in text_of(element(response.content.decode(), "data-annotator"))
    # Their items that hold a text; another worker's only theirs.
    assert client.get(f"/s/{study.slug}/items/?annotator={live.pk}&q=third").context["rows"] == []
    # A worker who never answered in this study is not named here (nor is a bad number).
    stranger = Annotator.objects.create(platform="prolific", external_id="elsewhere")
    assert client.get(f"/s/{study.slug}/items/?annotator={stranger.pk}").status_code == 404
    assert client.get(f"/s/{study.slug}/items/?annotator=x1").status_code == 400


def test_the_pair_page_and_the_dashboard_link_to_the_reader(client):
    study = study_import(source=bundle_bytes(rubric_rows(items=4, imported=2)), slug="rubric-links")
    researcher_client(client, study)
    page = client.get(f"/s/{study.slug}/pair/?first=A&second=B").content.decode()
    link = f'href="{reader_url(study, "r00", "A", "B")}"'.replace("&", "&amp;")
    assert link in element(page, 'id="items"')        # the items table
    assert link in element(page, 'id="reasons"')      # the judgements' reasons
    assert f'href="/s/{study.slug}/items/"' in client.get(f"/s/{study.slug}/dashboard/").content.decode()


def test_reading_items_writes_nothing(client, reader_study):
    study, j = reader_study
    researcher_client(client, study)
    for url in (reader_url(study, ODD_ID), reader_url(study, ODD_ID, "A", "B"), f"/s/{study.slug}/items/?q=a",
                f"/s/{study.slug}/items/?annotator={j['live'].annotator_id}"):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        assert [q["sql"] for q in captured.captured_queries if WRITE_STATEMENT.match(q["sql"])] == [], url


@pytest.mark.parametrize("role, status", [("annotator", 403), ("other-researcher", 404), ("anonymous", 302)])
def test_only_the_studys_researchers_read_its_items(reader_study, role, status):
    study, _ = reader_study
    client = Client()
    if role == "annotator":
        researcher_client(client, study, role="annotator")
    elif role == "other-researcher":
        other = study_import(source=bundle_bytes(reader_rows()), slug="other")
        researcher_client(client, other)
    for url in (reader_url(study, ODD_ID, "A", "B"), f"/s/{study.slug}/items/?q=zebras"):
        response = client.get(url)
        assert response.status_code == status, url
        assert b"Zebras" not in response.content
