"""The item reader in a real browser at laptop and phone sizes: reached from the pair page's
items table, the two outputs readable side by side (stacked on a phone), no sideways scroll.
docs/screenshots/item-reader-*.png: the demo's PandaLM chat study (real prompts, real answers
and the GPT-3.5 / PandaLM-7B verdicts) after simulated workers judged it."""
import gzip
import json
import random
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from annotation.models import Assignment, Item, ItemFlag, Judgement
from annotation.services import hits, quality
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.annotating import workers_of
from tests.builders.browser import browser_login
from tests.builders.bundles import BUNDLES, bundle_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

ITEMS = ("p325", "p63", "p104", "p27")
SYSTEMS = ("bloom-7b", "llama-7b", "opt-7b")
FIRST, SECOND = "bloom-7b", "llama-7b"


def pandalm_chat_slice() -> bytes:
    """The demo's PandaLM chat bundle on ITEMS x SYSTEMS with the judges' verdicts, run with
    GPT-3.5's verdicts as the protocol's metric, three ratings per item and repeats."""
    rows = [json.loads(line) for line in gzip.open(BUNDLES / "pandalm_chat.jsonl.gz", "rt")]
    study = {**rows[0], "metric": "gpt35", "ratings_per_item": 3, "batch_size": 4, "budget": 60, "repeat_every": 6}
    keep = [r for r in rows[1:] if (r["kind"] == "item" and r["id"] in ITEMS)
            or (r["kind"] == "output" and r["item"] in ITEMS and r["system"] in SYSTEMS)
            or (r["kind"] == "metric_preference" and r["item"] in ITEMS and {r["first"], r["second"]} <= set(SYSTEMS))]
    return bundle_bytes([study] + keep)


def simulated_workers(study, rng) -> None:
    """Four workers who mostly agree with GPT-3.5 and take 20-80 s, and a fast one who answers
    at random (then excluded); through the services, as the annotate page would."""
    verdicts = {(r.item.external_id, r.first.name, r.second.name): r.value
                for r in study.metrics.get(name="gpt35").preferences.select_related("item", "first", "second")}
    workers = workers_of(["ana", "ben", "chloe", "dev", "fast"])
    for _ in range(60):
        progressed = False
        for name, annotator in workers.items():
            study.refresh_from_db()
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            seconds = 2.0 if name == "fast" else rng.uniform(20, 80)
            Assignment.objects.filter(pk=hit.pk).update(issued_at=timezone.now() - timedelta(seconds=seconds))
            hit.refresh_from_db()
            c = hit.comparison
            truth = verdicts.get((c.item.external_id, c.first.name, c.second.name), 0)
            if name == "fast":
                value = rng.choice([-1, 0, 1])
            else:
                value = truth if rng.random() < 0.75 else rng.choice([0, -truth or 1])
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value, seconds_on_task=seconds,
                                  read_seconds=round(seconds * rng.uniform(0.3, 0.7), 1))
            progressed = True
        if not progressed:
            break
    quality.annotator_exclude(study=study, annotator=workers["fast"], reason="answers in 2 s")
    ItemFlag.objects.create(item=Item.objects.get(study=study, external_id="p325"), annotator=workers["chloe"],
                            reason=ItemFlag.Reason.IDENTICAL, note="two answers are nearly the same list")


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_item_reader_from_the_pair_page_at_laptop_and_phone_sizes(page, live_server, size):
    study = study_import(source=pandalm_chat_slice(), slug="pandalm-chat")
    simulated_workers(study, random.Random(4))
    judged = Judgement.objects.filter(comparison__study=study, comparison__item__external_id="p325",
                                      comparison__first__name=FIRST, comparison__second__name=SECOND)
    assert judged.count() >= 2, "the simulated workers judged the item's pair"
    width, height = size
    page.set_viewport_size({"width": width, "height": height})  # the page fixture checks the CSP too
    browser_login(page, live_server, study, username=f"reader{width}")
    page.goto(f"{live_server.url}/s/{study.slug}/pair/?first={FIRST}&second={SECOND}")
    page.click("#items a:text-is('p325')")
    page.wait_for_url("**/item/?item=p325&first=bloom-7b&second=llama-7b")
    page.wait_for_selector("table.item-judgements")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # The prompt turn by turn, the two answers rendered as lists, each with its raw text.
    assert "Provide a list of the skills" in page.locator("#input .turn-user").inner_text()
    outputs = page.locator(".item-output")
    assert outputs.count() == 2
    assert [outputs.nth(k).get_attribute("data-system") for k in range(2)] == [FIRST, SECOND]
    assert outputs.nth(0).locator(".markdown li").count() == 6 and outputs.nth(1).locator(".markdown li").count() == 9
    assert outputs.nth(0).locator("details.raw-text").count() == 1
    left, right = (outputs.nth(k).bounding_box() for k in range(2))
    if width >= 1000:   # side by side, each half the page
        assert abs(left["y"] - right["y"]) < 2 and left["x"] + left["width"] <= right["x"]
        assert min(left["width"], right["width"]) > 500
    else:               # stacked, each the page's width
        assert right["y"] >= left["y"] + left["height"] and min(left["width"], right["width"]) > 330
    for box in (left, right):
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    # Every judgement of the comparison, and the excluded worker's marked as not counted.
    rows = page.locator("table.item-judgements tbody tr")
    assert rows.count() == judged.count()
    counted = judged.filter(kind="real").exclude(annotator__external_id="fast").count()
    assert page.locator(".counted-summary").get_attribute("data-counted") == str(counted)
    assert page.locator("table.item-judgements tr.not-counted").count() == judged.count() - counted
    # Both judges' verdicts on the pair, and the report.
    assert page.locator("table.item-metrics tr[data-metric=gpt35]").count() == 1
    assert page.locator("table.item-metrics tr[data-metric=pandalm7b]").count() == 1
    assert "nearly the same list" in page.locator("#flags").inner_text()
    page.screenshot(path=str(SCREENSHOTS / f"item-reader-{width}x{height}.png"), full_page=True)
    # Every system's output of the item, then the search that finds it: no sideways scroll either.
    page.click("a[data-all-outputs]")
    page.wait_for_url("**/item/?item=p325")
    assert page.locator(".item-output").count() == 3
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.goto(f"{live_server.url}/s/{study.slug}/items/?q=CREW+MEMBER")
    assert page.locator(".item-hit").count() == 1 and page.locator(".item-hit mark").inner_text() == "Crew Member"
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.click(".item-hit a.item-link")
    page.wait_for_url("**/item/?item=p325")


def many_systems_bundle(systems: int = 200) -> bytes:
    """One prompt answered by ``systems`` systems (a few sentences each) with a score metric:
    the item reader of a 200-system arena."""
    rows = [{"kind": "study", "name": f"Arena of {systems} systems", "criterion": "quality", "metric": "judge_score",
             "batch_size": 2, "budget": 100},
            {"kind": "item", "id": "p0001", "input": "Explain why the sky is blue, in a few sentences."}]
    for k in range(systems):
        name = f"S{k + 1:03d}"
        rows.append({"kind": "output", "item": "p0001", "system": name,
                     "text": f"{name}: sunlight is scattered by the molecules of the air, and blue light, of a "
                             f"shorter wavelength, is scattered more than red (Rayleigh scattering). "
                             f"So the sky looks blue from every direction. Answer {k + 1} of {systems}."})
        rows.append({"kind": "metric_score", "item": "p0001", "system": name, "metric": "judge_score",
                     "score": round(0.3 + 0.6 * ((k * 37) % systems) / systems, 3)})
    return bundle_bytes(rows)


@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_item_reader_of_200_systems_is_paged_at_laptop_and_phone_sizes(page, live_server, size):
    """200 outputs on one page were 10,000 px at 1366 px wide: the reader shows 20 a page,
    and its page links (plain links) reach the others. docs/screenshots/item-reader-200-systems-*.png."""
    study = study_import(source=many_systems_bundle(), slug="arena-200")
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    user = User.objects.create_user(f"arena{width}", password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/item/%3Fitem%3Dp0001")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "res-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url("**/item/?item=p0001")
    outputs = page.locator(".item-output")
    assert outputs.count() == 20 and outputs.nth(0).get_attribute("data-system") == "S001"
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # a laptop's page is a few screens, not the 13 of 200 outputs
    assert page.evaluate("document.documentElement.scrollHeight") <= (4000 if width >= 1000 else 16000)
    page.screenshot(path=str(SCREENSHOTS / f"item-reader-200-systems-{width}x{height}.png"), full_page=True)
    page.locator("nav[aria-label='pages of outputs'] a[rel=next]").first.click()
    page.wait_for_url("**/item/?item=p0001&page=2#outputs")
    assert outputs.nth(0).get_attribute("data-system") == "S021" and outputs.count() == 20
    page.locator("nav[aria-label='pages of outputs'] a:text-is('10')").first.click()
    page.wait_for_url("**/item/?item=p0001&page=10#outputs")
    assert outputs.count() == 20 and outputs.nth(19).get_attribute("data-system") == "S200"
    assert page.locator("nav[aria-label='pages of outputs'] a[rel=next]").count() == 0
