"""Bundles as rows and bytes: the small studies most tests import."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from protocol.bundle import write_bundle_rows


REPO = Path(__file__).resolve().parent.parent.parent
BUNDLES = REPO / "data" / "bundles"


def bundle_bytes(rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def bundle_slice(path, *, items: int, systems: int, **study_settings) -> bytes:
    """The study line of a shipped bundle with its first ``items`` items and the outputs of its
    first ``systems`` systems (by name), as bundle bytes; ``study_settings`` update the study line."""
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    keep = {r["id"] for r in rows if r["kind"] == "item"}
    keep = set(sorted(keep, key=[r.get("id") for r in rows].index)[:items])
    names = sorted({r["system"] for r in rows if r["kind"] == "output"})[:systems]
    study = {**rows[0], **study_settings}
    return bundle_bytes([study] + [r for r in rows if r["kind"] == "item" and r["id"] in keep] + [
        r for r in rows if r["kind"] == "output" and r["item"] in keep and r["system"] in names
        and r.get("sample", 0) == 0])


#: true quality of the crowd study's systems: A beats B and C, B and C are a tie
QUALITY = {"A": 3.0, "B": 2.0, "C": 1.9}


def crowd_rows(items=40, batch=5, budget=90):
    """A 3-system crowd study with a metric that mostly agrees with QUALITY."""
    rng = random.Random(7)
    rows = [{"kind": "study", "name": "Crowd study", "criterion": "quality", "instructions": "Pick the better.",
             "batch_size": batch, "budget": budget, "metric": "m", "completion_code": "C0DE42"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in QUALITY]
    rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "m",
              "score": QUALITY[s] + rng.gauss(0, 0.5)} for n in range(items) for s in QUALITY]
    return rows


def many_systems_rows(k: int, items: int = 3):
    """k systems (sys00, sys01, ...) on ``items`` items, a metric ranking them in that order."""
    systems = [f"sys{n:02d}" for n in range(k)]
    rows = [{"kind": "study", "name": f"Arena {k}", "batch_size": 2, "budget": 100, "metric": "m"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} {n}"} for n in range(items) for s in systems]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m", "score": k - j + 0.1 * n}
             for n in range(items) for j, s in enumerate(systems)]
    return rows


def one_pair_rows(items=12, batch=1, budget=1):
    """Two systems, no metric: one pair."""
    rows = [{"kind": "study", "name": "One pair", "batch_size": batch, "budget": budget}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in ("A", "B")]
    return rows


def write_tiny_bundle(path, rng):
    """A 3-system, 40-item bundle with human and metric scores (S1 best, S2 and S3 close), for replays."""
    systems = ["S1", "S2", "S3"]
    quality = {"S1": 0.9, "S2": 0.0, "S3": -0.2}
    rows = [{"kind": "study", "name": "tiny", "criterion": "quality"}]
    items = [f"doc-{k}" for k in range(40)]
    rows += [{"kind": "item", "id": item, "input": f"text {item}"} for item in items]
    rows += [{"kind": "output", "item": item, "system": s, "text": f"{s} on {item}"} for item in items for s in systems]
    for item in items:
        for s in systems:
            score = quality[s] + rng.normal()
            rows.append({"kind": "human_score", "item": item, "system": s, "score": round(score, 3), "annotator": "e1"})
            rows.append({"kind": "metric_score", "item": item, "system": s, "metric": "m1",
                         "score": round(score + rng.normal(), 3)})
    write_bundle_rows(rows, path)


CHAT_ANSWER = """Two steps:

1. Parse the input
2. **Validate** it

| metric | value |
|-------:|-------|
| BLEU   | 31.2  |

```python
def best(xs):
    return max(xs) if xs else None
```

See [the docs](https://docs.python.org/3/)."""


def chat_rows(n_items=3, answers=("A", "B"), *, texts=None, roles=None, **settings):
    """A markdown chat study: each item a system+user conversation, each output one assistant
    turn (``texts``: the outputs' contents, else CHAT_ANSWER and a short answer)."""
    texts = texts or {answers[0]: CHAT_ANSWER, answers[1]: "Just `max(xs)`."}
    rows = [{"kind": "study", "name": "Chat study", "text_format": "markdown", "batch_size": 1,
             "criterion": "helpfulness", **settings}]
    for n in range(n_items):
        rows.append({"kind": "item", "id": f"chat-{n}", "input": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"Question {n}: how do I find the *largest* number?"}]})
        rows += [{"kind": "output", "item": f"chat-{n}", "system": s,
                  "text": [{"role": "assistant", "content": texts[s]}]} for s in answers]
    return rows


RUBRIC = [
    {"name": "helpfulness", "label": "Which answer helps more?", "strength": True, "reason": "optional",
     "metric": "judge_help"},
    {"name": "correctness", "label": "Which answer is more correct?", "reason": "required"},
    {"name": "style", "label": "Which answer reads better?"},
]


def rubric_rows(items=40, *, imported=2, budget=150, batch=5):
    """A three-criterion rubric study of systems A, B, C: a judge metric for helpfulness, and
    ``imported`` items of pair A/B judged on every criterion by annotator e1."""
    rows = [{"kind": "study", "name": "Rubric study", "criteria": [dict(c) for c in RUBRIC], "batch_size": batch, "budget": budget,
             "text_format": "markdown"}]
    rows += [{"kind": "item", "id": f"r{n:02d}", "input": f"Question {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"r{n:02d}", "system": s, "text": f"**{s}** answers {n}"}
             for n in range(items) for s in "ABC"]
    rows += [{"kind": "metric_preference", "item": f"r{n:02d}", "first": a, "second": b, "metric": "judge_help",
              "preference": 1, "judge": "gpt-x", "order": "AB"} for n in range(items) for a, b in ("AB", "AC", "BC")]
    for n in range(imported):
        rows += [
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": -1,
             "annotator": "e1", "criterion": "helpfulness", "strength": 2, "reason": "A is complete"},
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": 1,
             "annotator": "e1", "criterion": "correctness", "reason": "A has a bug"},
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": 0,
             "annotator": "e1", "criterion": "style"},
        ]
    return rows


#: the texts of the checks in checked_rows: GOOD beats BAD
GOOD, BAD = "A clear, correct and complete answer.", "answer answer answer the the"

#: the ranking studies' systems: s5 > s4 > ... > s0 (the higher number wins every item)
RANKING_SYSTEMS = [f"s{n}" for n in range(6)]
RANKING_SETTINGS = {"pair_design": "ranking", "family_control": "none"}


def ranking_rows(items=30, *, metric=False, **settings):
    """A ranking-design study of RANKING_SYSTEMS (docs/ranking.md); ``metric``: a judge whose
    mean score orders the systems as the truth does."""
    rows = [{"kind": "study", "name": "Leaderboard", "batch_size": 10, "budget": 5000, **RANKING_SETTINGS,
             **settings}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Prompt {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in RANKING_SYSTEMS]
    if metric:
        rows[0]["metric"] = "judge"
        rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "judge",
                  "score": float(j) + 0.01 * n} for n in range(items) for j, s in enumerate(RANKING_SYSTEMS)]
    return rows


def ranking_truth(first: str, second: str) -> int:
    """+1 when ``first`` is the better of two RANKING_SYSTEMS."""
    return (int(first[1:]) > int(second[1:])) - (int(first[1:]) < int(second[1:]))


def checked_rows(items=12, **settings):
    out = [{"kind": "study", "name": "Checked", "batch_size": 5, "budget": 60, "completion_code": "OK1", **settings}]
    out += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    out += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
            for n in range(items) for s in ("A", "B", "C")]
    out += [{"kind": "check", "id": f"gold-{n}", "input": f"Check input {n}", "first": GOOD, "second": BAD,
             "expected": "first"} for n in range(3)]
    out += [{"kind": "check", "id": "same", "input": "Two identical texts", "first": GOOD, "second": GOOD,
             "expected": "tie"}]
    return out


CHAT_ROWS = [
    {"kind": "study", "name": "chat", "text_format": "markdown"},
    {"kind": "item", "id": "c1", "input": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "List *two* primes."}]},
    {"kind": "output", "item": "c1", "system": "A", "text": [{"role": "assistant", "content": "- 2\n- 3"}]},
    {"kind": "output", "item": "c1", "system": "B", "text": [{"role": "assistant", "content": "2, 3"},
                                                              {"role": "user", "content": "more"},
                                                              {"role": "assistant", "content": "5"}]},
    {"kind": "metric_preference", "item": "c1", "first": "A", "second": "B", "metric": "gpt35",
     "preference": 1, "judge": "gpt-3.5-turbo", "prompt": "pandalm-v1", "order": "AB"},
    {"kind": "metric_preference", "item": "c1", "first": "B", "second": "A", "metric": "gpt35",
     "preference": 1, "judge": "gpt-3.5-turbo", "prompt": "pandalm-v1", "order": "AB"},
]
