"""Stored studies in a given state: comparisons stored, weighted item choice, rounds filled."""
from __future__ import annotations

from annotation import jobs
from annotation.models import Annotator, Comparison, Item, Output, PairState, Study
from annotation.services import hits
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows, one_pair_rows


def weighted_study(choice):
    """A one-pair study whose items' separability rises with their position, chosen by ``choice``."""
    study = study_import(source=bundle_bytes(one_pair_rows(items=20, batch=8, budget=8)))
    Study.objects.filter(pk=study.pk).update(item_choice=choice, item_choice_temperature=0.25)
    study.refresh_from_db()
    comparisons = comparisons_stored(study)
    for n, c in enumerate(comparisons):
        c.separability = n / len(comparisons)
    Comparison.objects.bulk_update(comparisons, ["separability"])
    return study


def comparisons_stored(study):
    """Every pair's comparison of every item of ``study``, stored now where it is not yet (as
    the separability job stores the scored ones; serving stores the others when it first leases
    them), ordered by pair and item position."""
    outputs = set(Output.objects.filter(item__study=study).values_list("item_id", "system_id"))
    rows = [Comparison(study=study, item_id=item_id, first_id=pair.first_id, second_id=pair.second_id, pair=pair)
            for pair in PairState.objects.filter(study=study).order_by("id")
            for item_id in Item.objects.filter(study=study).order_by("position").values_list("id", flat=True)
            if (item_id, pair.first_id) in outputs and (item_id, pair.second_id) in outputs]
    Comparison.objects.bulk_create(rows, ignore_conflicts=True)
    return list(Comparison.objects.filter(study=study).order_by("pair_id", "item__position"))


def first_rounds_filled_unclosed(prefix: str) -> Study:
    """A 3-pair study (20 items, batch 4) whose every pair's first round is filled and left for
    the test to close: the close that the submits ask for is switched off while they run."""
    study = study_import(source=bundle_bytes(crowd_rows(items=20, batch=4, budget=60)))
    annotators = [Annotator.objects.create(platform="prolific", external_id=f"{prefix}{n}") for n in range(4)]
    original, jobs.rounds_close = jobs.rounds_close, lambda study_id: None
    try:
        for _ in range(12):
            for annotator in annotators:
                hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
                if hit is not None:
                    hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=1,
                                          idempotency_key=hits.new_idempotency_key())
    finally:
        jobs.rounds_close = original
    assert PairState.objects.filter(study=study, status="filled").count() == 3
    return study
