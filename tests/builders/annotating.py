"""The serving loop through the services: workers, answered HITs, many at once."""
from __future__ import annotations

import random
import threading
import time

from django.db import connection

from annotation.models import Annotator, Study
from annotation.services import hits, quality


def worker(name: str) -> Annotator:
    return Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id=name)


def answer_rubric_hits(study: Study, workers: list, at_most: int, answer, key: str = "k",
                       read_seconds: float | None = None) -> int:
    """Serve and answer up to ``at_most`` HITs of a rubric study through the services, the workers
    taking turns; ``answer(assignment)`` gives the screen answers (criterion -> {value, reason}).
    Returns the HITs answered."""
    answered = 0
    for n in range(at_most):
        annotator = workers[n % len(workers)]
        assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if assignment is None:
            continue
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                              answers=answer(assignment), idempotency_key=f"{key}{n}", read_seconds=read_seconds)
        answered += 1
    return answered


CONCURRENT_THREADS = 20
CONCURRENT_MAX_SECONDS = 60


def annotate_concurrently(study: Study, *, threads: int = CONCURRENT_THREADS, double_submit: bool = False) -> dict:
    """``threads`` annotators lease and submit until there is no work; returns what happened."""
    annotators = [Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id=f"t{n}")
                  for n in range(threads)]
    acknowledged, errors, refused = [], [], []
    guard = threading.Lock()
    deadline = time.monotonic() + CONCURRENT_MAX_SECONDS
    start = threading.Barrier(threads)

    def run(annotator: Annotator, seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            idle = 0
            while time.monotonic() < deadline and idle < 20:
                hit = hits.hit_next_for_annotator(study=Study.objects.get(pk=study.pk), annotator=annotator)
                if hit is None:
                    idle += 1  # rounds may be closing in the background: look again shortly
                    time.sleep(0.05)
                    continue
                idle = 0
                key = hits.new_idempotency_key()
                answer = rng.choice([1, 1, 0, -1])
                attempts = 2 if double_submit else 1
                for _ in range(attempts):
                    try:
                        hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=answer,
                                              idempotency_key=key)
                        with guard:
                            acknowledged.append(key)
                    except hits.HitError as error:
                        with guard:
                            refused.append(str(error))
        except Exception as error:  # noqa: BLE001 — every failure is reported by the test
            with guard:
                errors.append(repr(error))
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(a, n)) for n, a in enumerate(annotators)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(CONCURRENT_MAX_SECONDS + 30)
    return {"acknowledged": acknowledged, "errors": errors, "refused": refused}


def workers_of(names) -> dict[str, Annotator]:
    return {n: hits.annotator_for_worker(platform="prolific", worker_id=n) for n in names}


def answer_hits(study: Study, workers: dict, answer, *, stop_after: int | None = None, by_item: bool = False) -> int:
    """Serve the workers in turn through the services until none gets a HIT (or ``stop_after``
    judgements); ``answer(first, second, worker)`` is the canonical label (``by_item``:
    ``answer(item, first, second, worker)``, the item's external id first, e.g. a synthetic
    arena's label of that prompt). Returns the judgements made."""
    made = 0
    while stop_after is None or made < stop_after:
        progressed = False
        for name, annotator in workers.items():
            study.refresh_from_db()
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            pair = (hit.comparison.first.name, hit.comparison.second.name, name)
            value = answer(hit.comparison.item.external_id, *pair) if by_item else answer(*pair)
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value)
            made += 1
            progressed = True
        if not progressed:
            break
    return made


def answer_null_with_an_exclusion(study: Study, *, exclude_after: int) -> None:
    """A null study answered by three workers: each pair's judgements alternate +1 / -1 in the
    order they are served (evidence that never accumulates, whatever items the app draws); the
    third worker is excluded after ``exclude_after`` judgements (the re-decision rebuilds the
    pairs from the others' judgements, which then need not alternate), the other two answer
    until nothing is served. The study is refreshed at the end."""
    workers = workers_of(["n1", "n2", "n3"])
    served: dict[tuple[str, str], int] = {}

    def alternate(first, second, name):
        served[(first, second)] = served.get((first, second), 0) + 1
        return 1 if served[(first, second)] % 2 else -1

    answer_hits(study, workers, alternate, stop_after=exclude_after)
    quality.annotator_exclude(study=study, annotator=workers["n3"], reason="test")
    answer_hits(study, {k: v for k, v in workers.items() if k != "n3"}, alternate)
    study.refresh_from_db()
