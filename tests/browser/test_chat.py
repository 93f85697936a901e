"""Chat studies in a real browser: conversations turn by turn, markdown answers rendered (lists,
tables, highlighted code), hostile content inert, at desktop and phone sizes."""
from pathlib import Path

import pytest

from annotation.services import study_import
from tests.factories import BUNDLES, bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = [(1366, 768), (390, 844)]

ANSWER = """Here is how:

| step | command |
|------|---------|
| 1    | `pip install x` |
| 2    | `x --run` |

```python
def greet(name):
    return f"hello {name}"
```

1. install
2. run

[docs](https://example.org/docs) [bad](javascript:window.__xss=1)

<img src=x onerror="window.__xss=2"> <script>window.__xss=3</script>"""


def code_rows():
    rows = [{"kind": "study", "name": "Code answers", "batch_size": 2, "budget": 4, "text_format": "markdown",
             "completion_code": "CHAT1"}]
    rows += [{"kind": "item", "id": f"q{n}", "input": [
        {"role": "system", "content": "You are a helpful assistant. <b onmouseover=window.__xss=4>x</b>"},
        {"role": "user", "content": f"How do I run x? ({n})"}]} for n in range(3)]
    rows += [{"kind": "output", "item": f"q{n}", "system": s, "text": [{"role": "assistant", "content": f"{s}. {ANSWER}"}]}
             for n in range(3) for s in "AB"]
    return rows


def fits_the_width(page) -> bool:
    return page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("width,height", SIZES)
def test_tables_highlighted_code_and_lists_render_and_nothing_hostile_runs(page, live_server, width, height):
    page.set_viewport_size({"width": width, "height": height})
    study = study_import(source=bundle_bytes(code_rows()))
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=chat-{width}&STUDY_ID=s&SESSION_ID=t")
    left = page.locator("#output-left")
    assert left.locator(".turn-assistant table th").first.is_visible()
    assert left.locator("pre.code code.language-python span.k").first.inner_text() == "def"
    assert left.locator("ol li").count() == 2
    link = left.locator("a", has_text="docs")
    assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel")
    assert left.locator("a", has_text="bad").count() == 0  # the javascript: link is text, not a link
    assert page.locator("#input .turn-system .role").inner_text().lower() == "system"
    assert page.evaluate("window.__xss") is None and page.locator("#output-left img").count() == 0
    assert fits_the_width(page), "the HIT scrolls sideways"
    page.screenshot(path=str(SCREENSHOTS / f"chat-code-{width}x{height}.png"), full_page=False)


@pytest.mark.parametrize("width,height", SIZES)
def test_the_pandalm_chat_demo_shows_its_real_answers_as_markdown(page, live_server, width, height):
    """The demo study (data/bundles/pandalm_chat.jsonl.gz): each prompt the user's turn, each
    response the assistant's; its real answers' numbered and bulleted lists are rendered."""
    page.set_viewport_size({"width": width, "height": height})
    study = study_import(source=BUNDLES / "pandalm_chat.jsonl.gz", slug="pandalm-chat", metric="gpt35")
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=demo-{width}&STUDY_ID=s&SESSION_ID=t")
    for _ in range(25):  # answer "about the same" until a HIT shows a list
        assert page.locator("#input .turn-user").count() == 1
        if page.locator(".output .turn-assistant li").count():
            break
        counter = page.locator("[data-progress]").inner_text()
        page.click("button:has-text('About the same')")
        page.wait_for_function("c => document.querySelector('[data-progress]').innerText !== c", arg=counter)
    assert page.locator(".output .turn-assistant li").first.is_visible()
    assert fits_the_width(page), "the HIT scrolls sideways"
    page.screenshot(path=str(SCREENSHOTS / f"chat-pandalm-{width}x{height}.png"), full_page=False)
