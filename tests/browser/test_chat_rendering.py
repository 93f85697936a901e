"""A chat study in a real browser: rendered markdown (lists, tables, highlighted code) at laptop
and phone sizes, and payloads in markdown, code fences, links and roles that run nothing."""
from pathlib import Path

import pytest

from annotation import models
from annotation.rendering import MARKDOWN, stored_html
from annotation.services.studies import study_import
from protocol.bundle import bundle_rows, read_bundle
from tests.builders.browser import worker_page
from tests.builders.bundles import BUNDLES, bundle_bytes, chat_rows
from tests.builders.hostile import PAYLOADS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_chat_answers_render_lists_tables_and_highlighted_code(page, live_server, size):
    study_import(source=bundle_bytes(chat_rows(2)), slug="chat")
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(f"{live_server.url}/s/chat/start/?PROLIFIC_PID=w1&SESSION_ID=s1")
    page.wait_for_selector("#output-left .conversation")
    answer = page.locator(".output .conversation").filter(has=page.locator("table")).first
    assert answer.locator("ol li").count() == 2 and answer.locator("table th").count() == 2 and answer.locator("table td").count() == 2
    assert answer.locator("pre.code .k").first.inner_text() == "def"  # a Pygments keyword token
    assert answer.locator("pre.code .k").first.evaluate("e => getComputedStyle(e).color") == "rgb(0, 128, 0)"
    assert answer.locator("a").get_attribute("target") == "_blank"
    assert page.locator(".turn-user .role").first.inner_text().lower() == "user"
    # The raw text is one click away and shows the markdown source.
    raw = page.locator("#output-left details.raw-text, #output-right details.raw-text").first
    assert not raw.locator("pre").is_visible()
    raw.locator("summary").click()
    assert raw.locator("pre").is_visible()
    box = page.locator("#output-right").bounding_box()
    assert box["x"] + box["width"] <= size[0] + 1  # nothing wider than the screen


def test_payloads_in_markdown_code_links_and_roles_run_nothing(page, live_server):
    payload = "\n\n".join(PAYLOADS)
    study = study_import(source=bundle_bytes(chat_rows(1, texts={"A": payload, "B": payload})), slug="chat-x")
    # Messages another tool wrote past the bundle reader, rendered as an import renders them.
    messages = [{"role": '<img src=x onerror="window.__xss=20">', "content": payload},
                {"role": "assistant", "content": "[go](javascript:window.__xss=21)"}]
    models.Output.objects.filter(item__study=study).update(messages=messages,
                                                           html=stored_html(None, messages, MARKDOWN))
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/s/chat-x/start/?PROLIFIC_PID=w1&SESSION_ID=s1")
    page.wait_for_selector("#output-left .conversation")
    assert page.locator(".panes script, .panes img, .panes svg, .panes iframe").count() == 0
    hrefs = page.eval_on_selector_all(".panes a", "links => links.map(a => a.getAttribute('href'))")
    assert hrefs and all(h is None or h.startswith(("https:", "http:", "mailto:")) for h in hrefs)
    for link in page.locator(".panes a").all():
        link.hover()
    page.locator("details.raw-text summary").first.click()
    page.wait_for_timeout(500)  # an injected handler would have fired by now
    assert page.evaluate("window.__xss") is None and dialogs == []
    assert '<img src=x onerror="window.__xss=20">' in page.locator("#output-left .role").first.text_content()


SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def pandalm_chat_item(item: str, systems: tuple[str, ...]) -> bytes:
    """The shipped PandaLM chat bundle cut to one item and some of its systems, without its
    human labels (so the comparison is still open for a worker)."""
    bundle = read_bundle(BUNDLES / "pandalm_chat.jsonl.gz")
    rows = [r for r in bundle_rows(bundle) if r["kind"] != "human_preference"
            if r["kind"] == "study" or r.get("id") == item and r["kind"] == "item"
            or r.get("item") == item and all(r.get(k, systems[0]) in systems for k in ("system", "first", "second"))]
    return bundle_bytes([{**rows[0], "metric": "gpt35", "budget": 10}, *rows[1:]])


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_screenshots_of_the_real_chat_demo(browser, live_server, size):
    """docs/screenshots/annotate-pandalm-chat-*.png: a PandaLM prompt whose answers are numbered
    lists, shown as the demo serves it (one user turn, two assistant turns, rendered)."""
    study = study_import(source=pandalm_chat_item("p4", ("opt-7b", "pythia-6.9b")), slug="pandalm-chat")
    width, height = size
    context, page = worker_page(browser, live_server, study.slug, size, pid="shot")
    page.wait_for_selector("#output-left .conversation")
    assert page.locator("#input .turn-user").count() == 1
    for side in ("#output-left", "#output-right"):
        assert page.locator(f"{side} .turn-assistant ol li").count() >= 4  # the numbered list, rendered
    assert page.locator("#hit .answer-buttons").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SCREENSHOTS / f"annotate-pandalm-chat-{width}x{height}.png"))
    context.close()


def test_the_two_outputs_scroll_together_until_the_box_is_unticked(page, live_server):
    long = "\n\n".join(f"{n}. point number {n}" for n in range(1, 80))
    study_import(source=bundle_bytes(chat_rows(1, texts={"A": long, "B": long + "\n\n80. one more"})), slug="long")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/s/long/start/?PROLIFIC_PID=w1&SESSION_ID=s1")
    page.wait_for_selector("#output-left .conversation")
    toggle = page.locator("[data-scroll-sync] input")
    assert toggle.is_visible() and toggle.is_checked()
    page.eval_on_selector("#output-left", "e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_function("() => document.getElementById('output-right').scrollTop > 0")  # a function: CSP forbids eval of a string
    right = page.eval_on_selector("#output-right", "e => (e.scrollTop + e.clientHeight) / e.scrollHeight")
    assert right > 0.98  # the same proportion: the bottom
    toggle.uncheck()
    page.eval_on_selector("#output-left", "e => { e.scrollTop = 0; }")
    page.wait_for_timeout(300)
    assert page.eval_on_selector("#output-right", "e => e.scrollTop") > 0  # left alone
    page.set_viewport_size({"width": 1366, "height": 400})
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.click("#word-diff summary")
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 0  # the page is taller than the screen at this height
    # The sides are drawn at random: B's extra item is inserted on the right or deleted on the left.
    marked = page.locator("#diff-right ins, #diff-left del")
    marked.first.wait_for()  # computed when the box is opened
    page.wait_for_timeout(200)
    assert page.evaluate("window.scrollY") >= scrolled  # its arrival is no new HIT: the page stays put
    assert marked.count() == 1 and marked.first.inner_text().strip().startswith("80")


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_demo_chat_study_serves_its_real_answers_rendered(page, live_server, size):
    """The whole demo bundle, imported as the demo command does: it serves HITs (it carries no
    human labels that would settle every pair at import) and its real answers' lists render."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    study = study_import(source=BUNDLES / "pandalm_chat.jsonl.gz", slug="pandalm-chat", metric="gpt35")
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=demo-{size[0]}&STUDY_ID=s&SESSION_ID=t")
    for _ in range(25):  # answer "about the same" until a HIT shows a list
        assert page.locator("#input .turn-user").count() == 1
        if page.locator(".output .turn-assistant li").count():
            break
        counter = page.locator("[data-progress]").inner_text()
        page.click("button:has-text('About the same')")
        page.wait_for_function("c => document.querySelector('[data-progress]').innerText !== c", arg=counter)
    assert page.locator(".output .turn-assistant li").first.is_visible()
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth + 1"), "scrolls sideways"
