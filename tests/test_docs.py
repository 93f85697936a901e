"""The documents stay a front door and a set of guides that hold together (issue 40, part 4).

The README stays short; every relative link in the README and docs/ reaches a file (and a
heading, when it names one); measurements carry their command, not a commit or a date; the
package index of docs/architecture.md names every module of annotation/ and protocol/.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

# [text](target) and ![alt](target), not inside inline code; targets without a scheme.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
# A commit named by its hash (7 to 40 hex digits with at least one letter and one digit), or a
# run history by its date, in the README and every guide: the figure, the machine and the
# command say what a reader needs. (No guide needs a date today; data provenance lives in
# data/bundles/PROVENANCE.md, which this does not read.)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def documents() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose(text: str) -> str:
    """The text without fenced blocks and inline code, where a path or a hash may be literal."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown file (lowercase, punctuation dropped,
    spaces to hyphens, a -N suffix for a repeated one)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", text).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(path: Path) -> list[str]:
    text = path.read_text()
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # http:, https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved.read_text()):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    return broken


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move details to their guide in docs/")


def test_readme_keeps_the_two_commands():
    text = README.read_text()
    assert "\nbash scripts/demo.sh\n" in text
    assert "\nbash scripts/test.sh\n" in text


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert broken_links(path) == []


def test_link_check_sees_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](page.md#title) [gone](missing.md) [no](page.md#nowhere) `[code](x.md)`\n")
    broken = broken_links(page)
    assert len(broken) == 2 and broken[0].startswith("missing.md (no file") and "#nowhere" in broken[1]


def test_heading_anchors_follow_github():
    text = "# Ranking many systems: a sort, or an active fit (issue 22)\n## An active Bradley–Terry design (`protocol/active_ranking.py`)\n## Notes\n## Notes\n"
    assert heading_anchors(text) == {
        "ranking-many-systems-a-sort-or-an-active-fit-issue-22",
        "an-active-bradleyterry-design-protocolactive_rankingpy",
        "notes", "notes-1"}


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_measurements_carry_no_commit_or_date(path):
    text = prose(path.read_text())
    assert COMMIT.findall(text) == [], f"{path.name}: name the change, not its commit"
    assert DATE.findall(text) == [], f"{path.name}: state the current figure, not a dated history"


def test_commit_and_date_patterns_match_what_they_guard():
    assert COMMIT.findall("on e5556a4 and 2e1420c, 1,225 pairs") == ["e5556a4", "2e1420c"]
    assert COMMIT.findall("deadbeef0123456789abcdef0123456789abcdef") == ["deadbeef0123456789abcdef0123456789abcdef"]
    assert COMMIT.findall("50 × 2,000 in 14.2 s, decade, 1234567") == []
    assert DATE.findall("Then (2026-11-26, sixth session)") == ["2026-11-26"]


def package_modules() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for package in ("annotation", "protocol")
                  for path in (ROOT / package).rglob("*.py")
                  if path.name != "__init__.py" and "migrations" not in path.parts)


def test_architecture_indexes_every_module():
    index = (DOCS / "architecture.md").read_text().split("## Package index", 1)
    assert len(index) == 2, "docs/architecture.md has no '## Package index'"
    missing = [module for module in package_modules() if f"| `{module}` |" not in index[1]]
    assert missing == [], f"docs/architecture.md, Package index: add a line for {missing}"
    listed = re.findall(r"^\| `((?:annotation|protocol)/[^`]+\.py)` \|", index[1], re.M)
    assert sorted(set(listed) - set(package_modules())) == [], "the index names modules that are gone"
