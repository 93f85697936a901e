"""A bundle's human judgements decide the pairs they separate at the protocol's start (the
PandaLM demo's 10 pairs all ended exhausted with log e-value 0: the judgements were recorded as
one round whose bets were made before any of them, so every bet was 0 and gave no evidence)."""
import random

import pytest

from django.contrib.auth.models import User
from django.test import Client

from annotation.models import PairState
from annotation.reports import study_dashboard_refresh
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes

pytestmark = pytest.mark.django_db

ITEMS = 60


def separated_rows(*, seed: int = 3):
    """Three systems with every item judged once per pair: A beats B on 54 of 60 items; B and C
    are equal (each wins an item with probability 1/2)."""
    rng = random.Random(seed)
    rows = [{"kind": "study", "name": "Imported judgements", "criterion": "quality", "gamma": 0.05}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(ITEMS)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(ITEMS) for s in "ABC"]
    for n in range(ITEMS):
        item = f"i{n:02d}"
        rows.append({"kind": "human_preference", "item": item, "first": "A", "second": "B",
                     "preference": 1 if n % 10 else -1, "annotator": "h1"})
        rows.append({"kind": "human_preference", "item": item, "first": "B", "second": "C",
                     "preference": rng.choice((1, -1)), "annotator": "h1"})
        rows.append({"kind": "human_preference", "item": item, "first": "A", "second": "C",
                     "preference": 1 if n % 10 else -1, "annotator": "h1"})
    return rows


def pair(study, first, second):
    return PairState.objects.get(study=study, first__name=first, second__name=second)


def test_imported_judgements_decide_a_separated_pair_at_the_start_and_not_a_null_one():
    study = study_import(source=bundle_bytes(separated_rows()))
    assert study.protocol_imported_judgements == 3 * ITEMS
    for first, second in (("A", "B"), ("A", "C")):
        row = pair(study, first, second)
        assert row.hits == ITEMS
        assert row.log_e_value > 3.0, (first, second, row.log_e_value)  # 1 / 0.05 = e^3.0
        assert (row.status, row.decision) == ("decided", 1), (first, second)
    null = pair(study, "B", "C")
    assert null.hits == ITEMS and null.decision == 0 and null.status == "exhausted"



def sorted_null_rows(seed: int, *, items: int = 100, systems: str = "ABCDE"):
    """Every pair null (an item's label a fair draw of -1, 0, +1 at 0.4 / 0.2 / 0.4, its three
    judgements agreeing with it 80 % of the time), the lines of each pair sorted by preference,
    worst first: each item's first judgement is the least of its three."""
    rng = random.Random(seed)
    rows = [{"kind": "study", "name": f"Sorted null {seed}", "criterion": "quality", "gamma": 0.05,
             "ratings_per_item": 3, "family_control": "none"}]
    rows += [{"kind": "item", "id": f"i{n:03d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:03d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in systems]
    for a, first in enumerate(systems):
        for second in systems[a + 1:]:
            lines = []
            for n in range(items):
                label = rng.choices((-1, 0, 1), (0.4, 0.2, 0.4))[0]
                lines += [{"kind": "human_preference", "item": f"i{n:03d}", "first": first, "second": second,
                           "preference": label if rng.random() < 0.8 else rng.choice((-1, 0, 1)),
                           "annotator": f"h{k}"} for k in range(3)]
            rows += sorted(lines, key=lambda line: line["preference"])
    return rows


def test_a_file_sorted_by_preference_decides_no_null_pair():
    """The e-process's step of an item is its first judgement. Taken in the file's order, a file
    sorted by preference gave every item its least judgement as its step: on these three null
    studies (30 pairs, each at gamma = 0.05) 4 pairs were decided, all against the first
    system. The import stores each item's judgements in an order that reads no value (a hash
    of item, pair and annotator, ``_store_imported_judgements``), so the first is any of them
    with equal chance: at most gamma of the pairs are decided (none here)."""
    decided = []
    for seed in range(3):
        study = study_import(source=bundle_bytes(sorted_null_rows(seed)))
        assert study.protocol_imported_judgements == 10 * 100 * 3
        decided += PairState.objects.filter(study=study).exclude(decision=0).values_list(
            "study__slug", "first__name", "second__name", "decision")
    assert len(decided) <= 0.05 * 30, decided


def test_the_dashboard_says_when_its_crowd_link_has_no_work_left():
    """A study whose imported judgements settle every pair: the dashboard's annotator link is
    marked (a researcher would otherwise send a crowd to "This study has finished"); a study
    with work left is not."""
    owner = User.objects.create_superuser("link-owner", password="pw-link-1")
    client = Client()
    client.force_login(owner)
    settled = study_import(source=bundle_bytes(separated_rows()), slug="settled")
    rows = [row for row in separated_rows() if row["kind"] != "human_preference"]
    open_ = study_import(source=bundle_bytes(rows), slug="with-work")
    marks = {}
    for study in (settled, open_):
        assert PairState.objects.filter(study=study).exists()
        study_dashboard_refresh(study_id=study.pk)
        marks[study.slug] = "data-no-crowd-work" in client.get(f"/s/{study.slug}/dashboard/").content.decode()
    assert not PairState.objects.filter(study=settled, status__in=("open", "filled", "waiting")).exists()
    assert marks == {"settled": True, "with-work": False}
