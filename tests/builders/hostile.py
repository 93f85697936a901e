"""Rendering: hostile texts in a bundle and how to tell they stay inert."""
from __future__ import annotations

from html.parser import HTMLParser


SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
HOSTILE_SYSTEMS = (SCRIPT, IMG, "=HYPERLINK(\"http://x\")", "+cmd|calc", "-2+3", "@SUM(1)")


def hostile_rows(n_items=4):
    """A study whose item ids, inputs, outputs, system and annotator names are attacks."""
    rows = [{"kind": "study", "name": f"Study {SCRIPT}", "criterion": IMG, "instructions": SCRIPT,
             "batch_size": 2, "metric": "m", "completion_code": "CODE"}]
    items = [f"{SCRIPT}{n}" if n % 2 else f"=1+{n}" for n in range(n_items)]
    rows += [{"kind": "item", "id": item, "input": f"{IMG} input {n}"} for n, item in enumerate(items)]
    rows += [{"kind": "output", "item": item, "system": s, "text": f"{SCRIPT} {IMG} {k}"}
             for item in items for k, s in enumerate(HOSTILE_SYSTEMS)]
    rows += [{"kind": "metric_score", "item": item, "system": s, "metric": "m", "score": float(k)}
             for item in items for k, s in enumerate(HOSTILE_SYSTEMS)]
    rows += [{"kind": "human_preference", "item": items[0], "first": HOSTILE_SYSTEMS[0],
              "second": HOSTILE_SYSTEMS[1], "preference": -1, "annotator": "=cmd()"}]
    return rows


PAYLOADS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=2">',
    "[click](javascript:window.__xss=3)",
    "[click](JaVaScRiPt:window.__xss=4)",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<a href=\"javascript:window.__xss=5\">x</a>",
    "```html\n<script>window.__xss=6</script>\n```",
    "```<script>x</script>\ncode\n```",
    "![pic](https://example.org/x.png)",
    "<svg onload=window.__xss=7>",
    "[x](https://example.org \"title\\\" onmouseover=\\\"window.__xss=8\")",
    "<details open ontoggle=window.__xss=9>",
]


class _Elements(HTMLParser):
    """Every element of an HTML fragment as (tag, {attribute: value}), as a browser parses it."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.found = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    """No element that runs or fetches, no event handler, no link but http(s) and mailto."""
    for tag, attributes in _Elements(html).found:
        assert tag not in {"script", "img", "svg", "iframe", "object", "embed", "style", "details"}, html
        assert not [a for a in attributes if a.lower().startswith("on")], (tag, attributes)
        href = (attributes.get("href") or "").strip().lower()
        assert not href or href.startswith(("http://", "https://", "mailto:")), (tag, attributes)
