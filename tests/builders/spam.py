"""Honest workers and a spammer (quality control)."""
from __future__ import annotations

import random
from datetime import timedelta

from django.utils import timezone

from annotation.models import Annotator, Assignment, Study
from annotation.services import hits
from tests.builders.bundles import bundle_bytes


#: C and D are even: every honest answer on that pair is a tie
SPAM_QUALITY = {"A": 3.0, "B": 2.0, "C": 1.0, "D": 1.2}
HONEST = [f"honest{n}" for n in range(5)]


def spam_bundle(slug: str, items: int = 20) -> bytes:
    # The paper's rule: its decision is a function of the counted judgements alone, so a run
    # re-decided after an exclusion equals the run without the excluded worker. (An e-process's
    # wealth depends on when each judgement came; tests/quality/test_weighted_null.py drives
    # exclusion and re-inclusion under it.)
    rows = [{"kind": "study", "name": slug, "batch_size": 10, "budget": 200, "allocation_policy": "paper",
             "protocol_rule": "bayes"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in SPAM_QUALITY]
    return bundle_bytes(rows)


def spam_truth(first: str, second: str) -> int:
    diff = SPAM_QUALITY[first] - SPAM_QUALITY[second]
    return 0 if abs(diff) < 0.5 else (1 if diff > 0 else -1)


def annotate_with_spammer(study: Study, workers: dict[str, Annotator], rng: random.Random, spammer: str | None) -> int:
    """Serve the workers in turn until none gets a HIT; returns the judgements made.

    Honest workers answer the truth after 15 s; the spammer answers at random after 0.2 s
    (the lease's issue time is set back by that much: the server measures time on task), and
    so gets through three HITs in an honest worker's one.
    """
    made = 0
    turns = [name for name in workers for _ in range(3 if name == spammer else 1)]
    while True:
        progressed = False
        for name in turns:
            annotator = workers[name]
            study.refresh_from_db()
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            spam = name == spammer
            seconds = 0.2 if spam else 15.0
            Assignment.objects.filter(pk=hit.pk).update(issued_at=timezone.now() - timedelta(seconds=seconds))
            hit.refresh_from_db()
            comparison = hit.comparison
            value = rng.choice([-1, 0, 1]) if spam else spam_truth(comparison.first.name, comparison.second.name)
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value, seconds_on_task=seconds)
            made += 1
            progressed = True
        if not progressed:
            return made
