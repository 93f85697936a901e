"""Conversations and markdown on the annotator's screen: rendered, and inert whatever they hold."""
import re

import pytest
from django.test import Client

from annotation import models
from annotation.rendering import MARKDOWN, MAX_DIFF_WORDS, PLAIN, render_conversation, stored_html, word_diff
from annotation.services.studies import study_import
from protocol.bundle import BundleError, read_bundle
from tests.builders.bundles import bundle_bytes, chat_rows
from tests.builders.crowd import current_hit, start_worker
from tests.builders.hostile import PAYLOADS, assert_inert

ROLE_PAYLOADS = ['<script>window.__xss=10</script>', '" onmouseover="window.__xss=11', "user<img src=x onerror=1>"]


@pytest.mark.parametrize("text_format", [PLAIN, MARKDOWN])
@pytest.mark.parametrize("role", ROLE_PAYLOADS)
def test_a_hostile_role_is_shown_as_text_and_never_a_class(role, text_format):
    html = render_conversation([{"role": role, "content": "hi"}], text_format)
    assert_inert(html)
    assert 'class="turn turn-other"' in html and "<script>" not in html and "<img" not in html


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payloads_inside_conversation_turns_stay_inert(payload):
    assert_inert(render_conversation([{"role": "user", "content": payload},
                                      {"role": "assistant", "content": payload}], MARKDOWN))


def test_the_bundle_refuses_a_role_outside_the_allow_list():
    rows = chat_rows(1)
    rows[1]["input"][0]["role"] = ROLE_PAYLOADS[0]
    with pytest.raises(BundleError, match="line 2: field 'input' message 1: role must be one of"):
        read_bundle(bundle_bytes(rows))


@pytest.mark.django_db
def test_the_hit_shows_the_conversation_rendered_with_its_raw_text_one_click_away():
    study = study_import(source=bundle_bytes(chat_rows(2)), slug="chat")
    client = Client()
    start_worker(client, "chat", "w1")
    html = _hit_html(client, "chat")
    assert html.count('class="conversation"') == 3  # the input and both outputs
    assert '<span class="role">system</span>' in html and '<span class="role">assistant</span>' in html
    assert "<table>" in html and '<pre class="code"><code class="language-python">' in html
    assert '<a href="https://docs.python.org/3/" target="_blank" rel="noopener noreferrer nofollow">' in html
    assert html.count('<details class="raw-text">') == 3 and "| BLEU   | 31.2  |" in html
    assert study.text_format == "markdown"


@pytest.mark.django_db
def test_payloads_in_a_chat_study_reach_the_page_inert():
    payload = "\n\n".join(PAYLOADS)
    study = study_import(source=bundle_bytes(chat_rows(1, texts={"A": payload, "B": payload})), slug="chat-x")
    # A role that got past the bundle reader (e.g. written by another tool) is still escaped,
    # rendered as the import renders a markdown study's texts.
    messages = [{"role": ROLE_PAYLOADS[2], "content": payload}]
    models.Output.objects.filter(item__study=study).update(messages=messages,
                                                           html=stored_html(None, messages, MARKDOWN))
    client = Client()
    start_worker(client, "chat-x", "w1")
    html = _hit_html(client, "chat-x")
    body = html.split('<div class="panes">')[1].split('<div class="answers">')[0]
    raws = re.findall(r'<details class="raw-text"><summary>Raw text</summary><pre class="raw">(.*?)</pre></details>',
                      body, re.S)
    assert len(raws) == 3 and all("<" not in raw for raw in raws)  # the raw source, escaped
    diff_box = re.search(r'<details class="card word-diff".*?</details>', body, re.S).group(0)
    assert set(re.findall(r"</?(\w+)", diff_box)) <= {"details", "summary", "div", "p", "a"}
    diff_url = re.search(r'hx-get="([^"]+/diff/)"', diff_box).group(1)
    diff = client.get(diff_url, HTTP_HX_REQUEST="true").content.decode()
    assert set(re.findall(r"</?(\w+)", diff)) <= {"div", "pre", "ins", "del"}
    assert_inert(re.sub(r'<details class="(raw-text|card word-diff)".*?</details>', "", body, flags=re.S))
    assert "&lt;span class=&quot;role&quot;&gt;" not in body and "user&lt;img src=x onerror=1&gt;" in body


def _hit_html(client, slug) -> str:
    assignment, _ = current_hit(client, slug)
    assert assignment is not None
    return client.get(f"/s/{slug}/annotate/").content.decode()


def test_word_diff_marks_only_the_differing_words_and_escapes_everything():
    left, right = word_diff("the <b>cat</b> sat on the mat", "the <b>dog</b> sat on the mat")
    assert left == "the <del>&lt;b&gt;cat&lt;/b&gt;</del> sat on the mat"
    assert right == "the <ins>&lt;b&gt;dog&lt;/b&gt;</ins> sat on the mat"
    assert word_diff("x " * (MAX_DIFF_WORDS + 1), "y") is None


@pytest.mark.django_db
def test_a_markdown_hit_offers_the_word_diff_and_a_plain_one_does_not(toy_rows):
    study_import(source=bundle_bytes(chat_rows(1)), slug="chat")
    client = Client()
    start_worker(client, "chat", "w1")
    html = _hit_html(client, "chat")
    assert 'id="word-diff"' in html and "data-scroll-sync" in html
    assert "<ins>" not in html  # the diff is computed when the worker opens it, not with every HIT
    assignment, _ = current_hit(client, "chat")
    fragment = client.get(f"/s/chat/hits/{assignment.pk}/diff/", HTTP_HX_REQUEST="true")
    assert "<ins>" in fragment.content.decode() and "<html" not in fragment.content.decode()
    page = client.get(f"/s/chat/hits/{assignment.pk}/diff/").content.decode()  # without JavaScript: a page
    assert "<ins>" in page and 'href="/s/chat/annotate/"' in page
    # Another worker's HIT has no diff for this one.
    intruder = Client()
    start_worker(intruder, "chat", "w9")
    assert intruder.get(f"/s/chat/hits/{assignment.pk}/diff/").status_code == 404
    study_import(source=bundle_bytes(toy_rows), slug="plain")
    other = Client()
    start_worker(other, "plain", "w2")
    assert 'id="word-diff"' not in _hit_html(other, "plain")
