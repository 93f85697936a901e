"""The style-controlled leaderboard (protocol/style_control.py): answers whose length sways the humans."""
from __future__ import annotations

import random


#: true log-strength of the style study's systems and the true effect of 100 more words
STYLE_QUALITY = {"A": 0.3, "B": 0.0, "C": -0.3}
STYLE_WORDS_EFFECT = 1.0


def style_rows(items=80, judgements=6, seed=3, judged_items=None, **settings):
    """A 3-system study whose answers differ in length (20 to 220 words) and markdown, with
    ``judgements`` imported human judgements per item and pair (on the first ``judged_items``
    items, default all) drawn from Bradley–Terry with
    STYLE_QUALITY and a word effect of STYLE_WORDS_EFFECT log-odds per 100 words; C writes the
    longest answers, A the shortest, so that the plain leaderboard credits C with its length."""
    rng = random.Random(seed)
    rows = [{"kind": "study", "name": "Style study", "batch_size": 5, "budget": 300, "text_format": "markdown",
             **settings}]
    rows += [{"kind": "item", "id": f"q{n:03d}", "input": f"Question {n}"} for n in range(items)]
    length = {"A": 60, "B": 110, "C": 160}
    words = {}
    for n in range(items):
        for s in STYLE_QUALITY:
            count = max(20, min(220, int(rng.gauss(length[s], 40))))
            words[(n, s)] = count
            body = " ".join(["word"] * count)
            if rng.random() < 0.5:
                body = f"## Answer\n\n{body}"
            if rng.random() < 0.5:
                body = f"{body}\n\n- point one\n- point two"
            if rng.random() < 0.5:
                body = f"**{s}** {body}"
            rows.append({"kind": "output", "item": f"q{n:03d}", "system": s, "text": body})
    for n in range(items if judged_items is None else judged_items):
        for a, b in (("A", "B"), ("A", "C"), ("B", "C")):
            logit = STYLE_QUALITY[a] - STYLE_QUALITY[b] + STYLE_WORDS_EFFECT * (words[(n, a)] - words[(n, b)]) / 100
            for k in range(judgements):
                value = 1 if rng.random() < 1 / (1 + pow(2.718281828459045, -logit)) else -1
                rows.append({"kind": "human_preference", "item": f"q{n:03d}", "first": a, "second": b,
                             "preference": value, "annotator": f"e{k}"})
    return rows
