"""LLM judges (tests/judges): studies whose answers carry their true quality for the fake judge to read."""
from __future__ import annotations

import itertools
import random


JUDGE_SYSTEMS = ("A", "B", "C")


def judge_quality(item: int, system: str, seed: int = 11) -> int:
    """The true quality (1-5) of a system's answer to an item of ``judge_rows``' study."""
    return random.Random(f"{seed}:{item}:{system}").randint(1, 5)


def judge_rows(items: int = 20, *, humans: int = 0, token: str = "", criteria=None, **settings) -> list[dict]:
    """A study of 3 systems whose answers carry their quality in their text ("(quality N)", the
    fake judge reads it, tests/fake_openai.py) and ``humans`` truthful imported human judgements
    per pair (the first items; in a rubric every criterion answered alike). ``token`` makes the
    texts unique (the judge cache is keyed by text)."""
    study = {"kind": "study", "name": f"Judged {token}", "criterion": "helpfulness", "batch_size": 5,
             "budget": 40, **settings}
    if criteria:
        study["criteria"] = criteria
    rows = [study]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Question {n} {token}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s,
              "text": f"{s} answers {n} {token} (quality {judge_quality(n, s)})"}
             for n in range(items) for s in JUDGE_SYSTEMS]
    for a, b in itertools.combinations(JUDGE_SYSTEMS, 2):
        for n in range(humans):
            qa, qb = judge_quality(n, a), judge_quality(n, b)
            value = (qa > qb) - (qa < qb)
            row = {"kind": "human_preference", "item": f"i{n:02d}", "first": a, "second": b, "annotator": "h1"}
            if criteria:
                rows += [{**row, "criterion": c["name"], "preference": value} for c in criteria]
            else:
                rows.append({**row, "preference": value})
    return rows
