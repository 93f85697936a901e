"""docs/results.md is assembled from sections, each written by its own generator script.

A generator calls ``replace_section(name, markdown)``; the text between
``<!-- BEGIN name -->`` and ``<!-- END name -->`` is replaced (the section is appended when
it is new), so the scripts can run in any order and rerunning one leaves the others alone.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"
HEADER = (
    "# evalapp results on real data\n\n"
    "Every number on this page is printed by a committed script (named in each section) "
    "run on the bundles in `data/bundles/`. Regenerate a section by rerunning its script.\n"
)


def replace_section(name: str, markdown: str, path: Path = RESULTS) -> None:
    text = path.read_text() if path.exists() else HEADER
    block = f"<!-- BEGIN {name} -->\n{markdown.rstrip()}\n<!-- END {name} -->"
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def publish(name: str, text: str, result, *, write: bool, as_json: bool = False) -> None:
    """A generator's last step: section ``name`` of docs/results.md becomes ``text`` (unless not
    ``write``), and ``text`` is printed (or ``result`` as JSON when ``as_json``)."""
    if write:
        replace_section(name, text)
    print(json.dumps(result, indent=1) if as_json else text)
