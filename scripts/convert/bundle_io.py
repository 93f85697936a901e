"""Deterministic writer (and a self-contained checker) for study bundles.

Used by the ``scripts/convert_*.py`` converters. The writer sorts every row, writes compact
JSON with ``kind`` first, and gzips with ``mtime=0`` and no file name in the header, so
regenerating a bundle from the same source gives a byte-identical file.

``check_rows`` applies the bundle rules of docs/bundle-format.md without Django or
``protocol.bundle`` so a converter can refuse to write a bad bundle. When
``protocol.bundle.read_bundle`` exists, ``validate_with_protocol`` also runs it on the file.
"""
from __future__ import annotations

import gzip
import io
import json
import math
import re
from collections import Counter
from pathlib import Path

KIND_ORDER = {
    "study": 0,
    "item": 1,
    "output": 2,
    "metric_score": 3,
    "metric_preference": 4,
    "human_score": 5,
    "human_preference": 6,
}
FIELDS = {
    # a study of one criterion names it; a rubric lists its criteria (protocol.bundle checks them)
    "study": ({"kind", "name", "instructions"}, {"criterion", "criteria", "batch_size"}),
    "item": ({"kind", "id", "input"}, {"reference"}),
    "output": ({"kind", "item", "system", "text"}, {"sample"}),
    "metric_score": ({"kind", "item", "system", "metric", "score"}, set()),
    # judge, prompt, order: which judge gave the verdict, with which prompt, in which position
    # order ("AB": first shown first); both orders of one comparison are two rows.
    "metric_preference": ({"kind", "item", "first", "second", "metric", "preference"}, {"judge", "prompt", "order"}),
    "human_score": ({"kind", "item", "system", "score"}, {"annotator"}),
    "human_preference": ({"kind", "item", "first", "second", "preference"}, {"annotator"}),
}


def natural_key(value) -> tuple:
    """Sort 'M2' before 'M10' and 'p9' before 'p10'; any string works."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(value)))


def _row_key(row: dict) -> tuple:
    k = row["kind"]
    nk = natural_key
    if k == "study":
        return (0,)
    if k == "item":
        return (1, nk(row["id"]))
    if k == "output":
        return (2, nk(row["item"]), nk(row["system"]), row.get("sample", 0))
    if k == "metric_score":
        return (3, row["metric"], nk(row["item"]), nk(row["system"]))
    if k == "metric_preference":
        return (4, row["metric"], nk(row["item"]), nk(row["first"]), nk(row["second"]), row.get("order", ""))
    if k == "human_score":
        return (5, nk(row["item"]), nk(row["system"]), row.get("annotator", ""))
    if k == "human_preference":
        return (6, nk(row["item"]), nk(row["first"]), nk(row["second"]), row.get("annotator", ""))
    raise ValueError(f"unknown kind {k!r}")


def check_rows(rows: list[dict]) -> list[str]:
    """Return a list of problems ("row N: ...", 1-based in the given order); empty when valid."""
    problems: list[str] = []
    items: set[str] = set()
    systems: set[str] = set()
    seen: Counter = Counter()
    if not rows or rows[0].get("kind") != "study":
        problems.append("row 1: the first row must be the study")
    for n, row in enumerate(rows, 1):
        kind = row.get("kind")
        if kind not in FIELDS:
            problems.append(f"row {n}: unknown kind {kind!r}")
            continue
        required, optional = FIELDS[kind]
        keys = set(row)
        if required - keys:
            problems.append(f"row {n}: missing {sorted(required - keys)}")
        if keys - required - optional:
            problems.append(f"row {n}: unknown fields {sorted(keys - required - optional)}")
        if kind == "study" and n != 1:
            problems.append(f"row {n}: a second study row")
        if n > 1 and KIND_ORDER[kind] < KIND_ORDER[rows[n - 2].get("kind", "study")]:
            problems.append(f"row {n}: {kind} after {rows[n - 2].get('kind')}")
        for f in ("name", "criterion", "instructions", "id", "input", "item", "system",
                  "metric", "first", "second", "annotator", "judge", "prompt"):
            if f in row and (not isinstance(row[f], str) or not row[f].strip()):
                problems.append(f"row {n}: {f} must be a non-empty string")
        if "text" in row and not isinstance(row["text"], str):
            problems.append(f"row {n}: text must be a string (it may be empty: a system that generated nothing)")
        if "reference" in row and (not isinstance(row["reference"], str) or not row["reference"].strip()):
            problems.append(f"row {n}: reference must be a non-empty string when present")
        for f in ("score", "preference", "sample"):
            if f in row:
                v = row[f]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    problems.append(f"row {n}: {f} must be a finite number, got {v!r}")
        if "preference" in row and row["preference"] not in (-1, 0, 1):
            problems.append(f"row {n}: preference {row['preference']!r} not in -1/0/1")
        if "order" in row and row["order"] not in ("AB", "BA"):
            problems.append(f"row {n}: order must be \"AB\" or \"BA\", got {row['order']!r}")
        if "sample" in row and (not isinstance(row["sample"], int) or row["sample"] < 0):
            problems.append(f"row {n}: sample must be an int >= 0")
        if kind == "item":
            key = ("item", row["id"])
            items.add(row["id"])
        elif kind == "output":
            if row["item"] not in items:
                problems.append(f"row {n}: output for unknown item {row['item']!r}")
            systems.add(row["system"])
            key = ("output", row["item"], row["system"], row.get("sample", 0))
        elif kind == "study":
            key = ("study",)
        else:
            if row.get("item") not in items:
                problems.append(f"row {n}: unknown item {row.get('item')!r}")
            for f in ("system", "first", "second"):
                if f in row and row[f] not in systems:
                    problems.append(f"row {n}: unknown system {row[f]!r} (no output)")
            if "first" in row and row.get("first") == row.get("second"):
                problems.append(f"row {n}: first == second")
            if kind == "metric_score":
                key = (kind, row["item"], row["system"], row["metric"])
            elif kind == "metric_preference":
                # Both orders of a judge may be given: the output shown first is part of the key.
                shown_first = {"AB": row["first"], "BA": row["second"]}.get(row.get("order", ""), "")
                key = (kind, row["item"], *sorted((row["first"], row["second"])), row["metric"], shown_first)
            elif kind == "human_score":
                key = (kind, row["item"], row["system"], row.get("annotator"))
            else:
                key = (kind, row["item"], *sorted((row["first"], row["second"])), row.get("annotator"))
        seen[key] += 1
        if seen[key] == 2:
            problems.append(f"row {n}: duplicate {key}")
    return problems


def render(study: dict, rows: list[dict]) -> bytes:
    """Sorted, checked, gzip-compressed bundle bytes (deterministic)."""
    ordered = [dict(study, kind="study")] + sorted(rows, key=_row_key)
    ordered = [{"kind": r["kind"], **{k: v for k, v in r.items() if k != "kind"}} for r in ordered]
    problems = check_rows(ordered)
    if problems:
        raise ValueError(f"{len(problems)} problems:\n" + "\n".join(problems[:50]))
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
                   for r in ordered)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    return buf.getvalue()


def write_bundle(path: str | Path, study: dict, rows: list[dict]) -> dict:
    """Write the bundle and return a summary (lines by kind, items, systems, bytes)."""
    data = render(study, rows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    counts = Counter(r["kind"] for r in rows)
    counts["study"] = 1
    summary = {
        "path": str(path),
        "lines": sum(counts.values()),
        "bytes": len(data),
        "by_kind": dict(sorted(counts.items(), key=lambda kv: KIND_ORDER[kv[0]])),
        "items": counts["item"],
        "systems": len({r["system"] for r in rows if r["kind"] == "output"}),
    }
    summary["protocol_check"] = validate_with_protocol(path)
    return summary


def validate_with_protocol(path: str | Path) -> str:
    """Run protocol.bundle.read_bundle on the file if the module exists; raise on error."""
    try:
        from protocol.bundle import read_bundle  # type: ignore
    except ImportError:
        return "protocol.bundle not available"
    read_bundle(str(path))
    return "read_bundle ok"


def read_jsonl(path):
    """Rows of a gzipped JSON Lines source file (blank lines skipped)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
