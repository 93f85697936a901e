"""Long LLM answers at crowd speed (issue 36): a markdown study's texts are rendered once, at
import, and a HIT only reads them; what rendering accepts is bounded and checked at import with
the line; the word diff is a longest common subsequence of the words, linear in practice."""
import importlib

import pytest
from django.apps import apps
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation import models
from annotation.rendering import MARKDOWN, RENDER_LIMITS, stored_html, word_diff
from annotation.services.studies import study_import
from protocol.bundle import BundleError
from tests.builders.bundles import bundle_bytes, chat_rows
from tests.builders.crowd import current_hit, start_worker

MARKER = '<p class="stored-at-import">stored</p>'


def _hit_page(slug: str, worker: str = "w1") -> str:
    client = Client()
    start_worker(client, slug, worker)
    assignment, _ = current_hit(client, slug)
    assert assignment is not None
    return client.get(f"/s/{slug}/annotate/").content.decode()


@pytest.mark.django_db
def test_a_markdown_hit_shows_the_html_rendered_at_import_not_a_new_rendering():
    study = study_import(source=bundle_bytes(chat_rows(1)), slug="chat")
    outputs = models.Output.objects.filter(item__study=study)
    assert all('<div class="conversation">' in o.html for o in outputs)
    item = models.Item.objects.get(study=study)
    assert item.input_html == stored_html(item.input, item.input_messages, MARKDOWN)
    # What a HIT shows is what was stored: change the stored HTML and the page follows.
    outputs.update(html=MARKER)
    models.Item.objects.filter(study=study).update(input_html=MARKER)
    page = _hit_page("chat")
    assert page.count(MARKER) == 3  # the input and both outputs
    assert "largest" not in page.split('<details class="raw-text">')[0]  # not rendered again from the text


@pytest.mark.django_db
def test_a_plain_study_stores_no_html_and_escapes_its_texts_when_shown():
    rows = chat_rows(1, text_format="plain")
    rows[2]["text"] = "a <b>bold</b> claim"
    study = study_import(source=bundle_bytes(rows), slug="plain-chat")
    assert set(models.Output.objects.filter(item__study=study).values_list("html", flat=True)) == {""}
    assert "a &lt;b&gt;bold&lt;/b&gt; claim" in _hit_page("plain-chat")


@pytest.mark.django_db
def test_a_check_of_a_markdown_study_is_rendered_at_import():
    rows = chat_rows(2, check_every=2)
    rows.append({"kind": "check", "id": "c1", "input": "Pick the *right* one", "first": "**right**",
                 "second": "wrong", "expected": "first"})
    study = study_import(source=bundle_bytes(rows), slug="chat-checks")
    check = models.CheckItem.objects.get(study=study)
    assert "<em>right</em>" in check.input_html and "<strong>right</strong>" in check.first_html
    assert "wrong" in check.second_html and check.reference_html == ""


def _table(rows: int, columns: int) -> str:
    return "\n".join(["|" + "h|" * columns, "|" + "---|" * columns, *(["|" + "x|" * columns] * rows)])


HOSTILE = {
    "text": ("*a" * (RENDER_LIMITS.text_chars // 2 + 1), "characters (at most 100,000 are rendered"),
    "table": (_table(RENDER_LIMITS.table_cells // 10, 10), "a table of more than 5,000 cells"),
    "fence": ("```html\n" + "<div>x</div>\n" * (RENDER_LIMITS.fence_chars // 13 + 1) + "```",
              "a code block of"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_text_beyond_the_rendering_limits_is_refused_at_import_with_its_line(what):
    text, message = HOSTILE[what]
    rows = chat_rows(2, texts={"A": "fine", "B": "fine"})
    rows[5]["text"][0]["content"] = text  # line 6: the second item's output of A
    with pytest.raises(BundleError) as refused:
        study_import(source=bundle_bytes(rows), slug="hostile")
    problems = [str(p) for p in refused.value.problems]
    assert len(problems) == 1 and problems[0].startswith("line 6: output of 'A' on item 'chat-1'")
    assert message in problems[0]
    assert not models.Study.objects.filter(slug="hostile").exists()
    # The same text in a plain study is only escaped when shown: no limit to refuse it.
    plain = chat_rows(2, texts={"A": "fine", "B": "fine"}, text_format="plain")
    plain[5]["text"][0]["content"] = text
    assert study_import(source=bundle_bytes(plain), slug="plain-ok").text_format == "plain"


@pytest.mark.django_db
def test_markdown_studies_imported_before_are_rendered_by_the_migration():
    study = study_import(source=bundle_bytes(chat_rows(2)), slug="older")
    expected = sorted(models.Output.objects.filter(item__study=study).values_list("html", flat=True))
    models.Output.objects.filter(item__study=study).update(html="")
    models.Item.objects.filter(study=study).update(input_html="")
    migration = importlib.import_module("annotation.migrations.0021_rendered_html")
    migration.render_stored_texts(apps, None)
    assert sorted(models.Output.objects.filter(item__study=study).values_list("html", flat=True)) == expected
    assert all(models.Item.objects.filter(study=study).values_list("input_html", flat=True))


def _lcs_length(a: list[str], b: list[str]) -> int:
    """The longest common subsequence's length by the textbook dynamic programme (a reference
    independent of rapidfuzz)."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _unmarked(html: str, tag: str) -> list[str]:
    import re

    return re.sub(rf"<{tag}>.*?</{tag}>", " ", html).split()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("a b c d <e>".split()), max_size=30),
       st.lists(st.sampled_from("a b c d <e>".split()), max_size=30))
def test_the_word_diff_keeps_a_longest_common_subsequence_of_the_words(left_words, right_words):
    left, right = " ".join(left_words), " ".join(right_words)
    marked_left, marked_right = word_diff(left, right)
    common_left, common_right = _unmarked(marked_left, "del"), _unmarked(marked_right, "ins")
    assert common_left == common_right  # the words left unmarked are common to both, in order
    assert len(common_left) == _lcs_length(left_words, right_words)  # and as many as can be
    # Every word is shown once, escaped, on its side.
    for marked, words in ((marked_left, left_words), (marked_right, right_words)):
        plain = marked.replace("<del>", "").replace("</del>", "").replace("<ins>", "").replace("</ins>", "")
        assert plain.split() == [w.replace("<", "&lt;").replace(">", "&gt;") for w in words]


@pytest.mark.django_db
def test_a_lease_fits_the_hit_unless_the_study_sets_one():
    long = chat_rows(3, texts={"A": "word " * 1400, "B": "word " * 1400})
    study = study_import(source=bundle_bytes(long), slug="long-lease")
    # About 2,800 words a HIT: 700 s to read at 240 words a minute, held twice that.
    assert 1380 <= study.lease_timeout_seconds <= 1420
    assert study_import(source=bundle_bytes(chat_rows(1)), slug="short-lease").lease_timeout_seconds == 180
    assert study_import(source=bundle_bytes(chat_rows(1, lease_timeout_seconds=600)),
                        slug="set-lease").lease_timeout_seconds == 600
