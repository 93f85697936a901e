"""LLM judges (tests/judges): studies whose answers carry their true quality for the fake judge to read."""
from __future__ import annotations

import itertools
import random

import numpy as np


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


def ridge_reference(votes_by_pair: dict, key: tuple[str, str], judges: list[dict], ridge: float = 5.0) -> dict:
    """The combined prediction of pair ``key`` written out in numpy (docs/formulas.md §8), not
    the protocol's function: the ridge fit (penalty ``ridge``, no intercept, shrunk towards the
    first judge) of the human item labels (the sign of each item's vote total) on the judges'
    verdicts over every pair but ``key``, clipped to [-1, 1]. votes_by_pair: pair -> item ->
    vote total; judges: one table each, pair -> item -> verdict."""
    q = len(judges)
    gram, moment = np.zeros((q, q)), np.zeros(q)
    for other, votes in votes_by_pair.items():
        if other == key:
            continue
        for item, total in votes.items():
            x = np.array([judge[other][item] for judge in judges], dtype=float)
            gram += np.outer(x, x)
            moment += x * np.sign(total)
    prior = np.zeros(q)
    prior[0] = 1.0
    beta = np.linalg.solve(gram + ridge * np.eye(q), moment + ridge * prior)
    return {item: float(np.clip(sum(judge[key][item] * b for judge, b in zip(judges, beta)), -1, 1))
            for item in judges[0][key]}
