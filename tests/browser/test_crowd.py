"""Crowd sessions in real Chromium: a Prolific session at desktop and phone sizes, keys,
the minimum time on task, skip and flag (htmx and no-JS), and an MTurk HIT inside a
cross-site iframe."""
import http.server
import threading
from pathlib import Path

import pytest

from annotation.models import Assignment, ItemFlag, Judgement, Study
from annotation.services.studies import study_import
from tests.builders.bundles import BUNDLES, bundle_bytes, bundle_slice, crowd_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
CODE = "C0DE42"
LONG = " ".join(["This sentence makes the input long enough to need its own scroll bar."] * 60)


def crowd_study(items=12, **settings) -> Study:
    rows = crowd_rows(items=items, batch=4, budget=60)
    rows[0].update(settings)
    for row in rows:
        if row["kind"] == "item":
            row["input"] = f"{row['input']}. {LONG}"
            row["reference"] = f"Reference text for input {int(row['id'][1:])}."
    return study_import(source=bundle_bytes(rows))


def progress_text(page) -> str:
    return " ".join(page.locator("[data-progress]").inner_text().split())


def click_answer(page, value="left"):
    before = progress_text(page)
    page.click(f"#hit .answers button[value={value}]")
    page.wait_for_function("c => !document.querySelector('[data-progress]') || "
                           "document.querySelector('[data-progress]').innerText.replace(/\\s+/g, ' ').trim() !== c",
                           arg=before)


def box(page, selector):
    return page.locator(selector).bounding_box()


def test_prolific_session_on_a_laptop_screen(browser, live_server, tmp_path):
    study = crowd_study(session_hits_min=3, session_hits_max=3)
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=laptop&STUDY_ID=s&SESSION_ID=t")
    assert progress_text(page) == "Comparison 1 of 3"
    assert page.locator("details.instructions").get_attribute("open") is not None  # open on the first HIT
    assert page.locator("#reference").inner_text().startswith("Reference text for")
    click_answer(page)
    # After the first HIT: instructions collapsed behind "?", a short "saved", the next HIT at the top.
    assert progress_text(page) == "Comparison 2 of 3"
    assert page.locator("details.instructions").get_attribute("open") is None
    assert page.locator(".notice").inner_text() == "Saved ✓"
    assert page.evaluate("window.scrollY") == 0
    page.click("details.instructions summary")
    assert page.locator("details.instructions").get_attribute("open") is not None
    page.click("details.instructions summary")
    # Input, both outputs and the answer buttons on one screen, nothing overlapping.
    panes = [box(page, s) for s in ("#input", "#output-left", "#output-right")]
    answers = box(page, "#hit .answers")
    for pane in panes:
        assert pane["y"] >= 0 and pane["y"] + pane["height"] <= answers["y"] + 1
    assert answers["y"] + answers["height"] <= 768
    assert panes[0]["x"] + panes[0]["width"] <= panes[1]["x"] and panes[1]["x"] + panes[1]["width"] <= panes[2]["x"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366
    # The long input scrolls inside its pane.
    assert page.evaluate("(e => e.scrollHeight > e.clientHeight)(document.querySelector('#input'))")
    body = page.locator("#hit").inner_text()
    assert "i0" not in body and CODE not in page.content()  # no internal item ids
    page.screenshot(path=str(tmp_path / "laptop.png"))
    click_answer(page, "tie")
    click_answer(page, "right")
    assert page.locator("[data-end=share]").count() == 1
    own_code = page.locator(".completion-code").inner_text()  # the study's code and this worker's MAC
    assert own_code.startswith(f"{CODE}-")
    assert page.locator(f"a[href='https://app.prolific.com/submissions/complete?cc={own_code}']").count() == 1
    assert Judgement.objects.filter(comparison__study=study).count() == 3
    context.close()


def test_phone_layout_sticky_answers_no_horizontal_scroll(browser, live_server, tmp_path):
    study = crowd_study(session_hits_min=2, session_hits_max=4)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=phone&STUDY_ID=s&SESSION_ID=t")
    click_answer(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "phone.png"))
    # The answer buttons stay on screen while the worker scrolls through the outputs.
    page.locator("#output-right").scroll_into_view_if_needed()
    page.mouse.wheel(0, 200)
    answers = box(page, "#hit .answer-buttons")
    assert 0 <= answers["y"] and answers["y"] + answers["height"] <= 844
    page.click("details.instructions summary")  # a taller page, scrolled to its end
    page.click("details.flag summary")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("window.scrollY") > 0
    click_answer(page)
    assert page.evaluate("window.scrollY") == 0  # the next HIT opens at its top
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()


def key_note(page) -> str:
    note = page.locator("#hit [data-key-note]")
    return note.inner_text() if note.is_visible() else ""


def keys_count(page, comparison: int) -> None:
    """Wait until comparison ``comparison`` is shown and its keys count (its reaction time has
    passed since the page's script prepared it, however late a loaded machine ran that)."""
    page.wait_for_selector(f"[data-progress]:has-text('Comparison {comparison}')")
    page.wait_for_function("() => { const f = document.querySelector('form[data-hit-form]');"
                           " return f && f.dataset.keysFrom && performance.now() > Number(f.dataset.keysFrom); }")


def test_keys_meant_for_the_previous_hit_are_refused_visibly_and_the_next_key_counts(page, live_server):
    """Issue 36, 5: keys pressed within 600 ms of a new HIT were dropped with no sign. Now only
    what cannot be meant for the new HIT is refused, each time with a visible note: an
    auto-repeat of a held key, a key held down since before the HIT appeared, a key pressed as
    the HIT appeared (sooner than anyone reacts to it); the next press counts at once."""
    study = crowd_study()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=keys&STUDY_ID=s&SESSION_ID=t")
    keys_count(page, 1)
    page.keyboard.down("1")  # answers HIT 1 and stays down
    page.wait_for_selector("[data-progress]:has-text('Comparison 2')")
    page.keyboard.down("1")  # the held key's auto-repeat (repeat: true)
    assert "held down" in key_note(page)
    # the same key's keydown without the repeat flag (some systems send those), still not released
    page.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: '1', bubbles: true}))")
    page.wait_for_timeout(300)
    assert Judgement.objects.count() == 1 and "held down" in key_note(page)
    page.keyboard.up("1")
    keys_count(page, 2)
    page.keyboard.press("2")  # released, pressed again: it counts, once the HIT's reaction time passed
    page.wait_for_selector("[data-progress]:has-text('Comparison 3')")
    assert Judgement.objects.count() == 2
    # Three presses 150 ms apart: the first answers; the second, while that answer is saved or
    # as the next HIT appears, is refused visibly; the third, later, answers the next HIT.
    keys_count(page, 3)
    for _ in range(2):
        page.keyboard.press("1")
        page.wait_for_timeout(150)
    page.wait_for_selector("[data-progress]:has-text('Comparison 4')")
    assert Judgement.objects.count() == 3
    assert "only just appeared" in key_note(page) or "Saving" in key_note(page)
    keys_count(page, 4)
    page.keyboard.press("3")
    page.wait_for_selector("[data-progress]:has-text('Comparison 5')")
    assert Judgement.objects.count() == 4


def test_minimum_time_on_task_disables_the_answers(page, live_server):
    study = crowd_study(min_seconds_per_hit=4)
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=slow&STUDY_ID=s&SESSION_ID=t")
    buttons = page.locator("#hit .answers button")
    assert all(buttons.nth(n).is_disabled() for n in range(3))
    page.keyboard.press("1")
    page.wait_for_selector("#hit .answers button[value=left]:enabled", timeout=15000)
    assert Judgement.objects.count() == 0
    click_answer(page)
    assert Judgement.objects.count() == 1 and Judgement.objects.get().seconds_on_task >= 4


@pytest.mark.parametrize("javascript", [True, False])
def test_skip_and_flag(browser, live_server, javascript):
    study = crowd_study()
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=sf{javascript}&STUDY_ID=s&SESSION_ID=t")
    first = Assignment.objects.get(state=Assignment.State.LEASED)
    page.click("button[data-skip]")
    page.wait_for_selector(".notice:has-text('Skipped')")
    assert Assignment.objects.get(pk=first.pk).state == Assignment.State.SKIPPED
    second = Assignment.objects.get(state=Assignment.State.LEASED)
    assert second.comparison_id != first.comparison_id
    page.click("details.flag summary")
    page.check("input[name=reason][value=identical]")
    page.fill("input[name=note]", "both say the same")
    page.click("button:has-text('Report and skip')")
    page.wait_for_selector(".notice:has-text('reported')")
    flag = ItemFlag.objects.get()
    assert (flag.reason, flag.note, flag.item_id) == ("identical", "both say the same", second.comparison.item_id)
    assert page.locator("form[data-hit-form]").count() == 1
    if not javascript:
        page.click("#hit .answers button[value=tie]")
        page.wait_for_selector(".notice:has-text('Saved')")
        assert Judgement.objects.count() == 1
    context.close()


@pytest.mark.parametrize("bundle, size", [("summeval_relevance", (1366, 768)), ("wmt21_ende", (1366, 768)),
                                          ("summeval_relevance", (390, 844)), ("wmt21_ende", (390, 844))])
def test_screenshots_of_the_annotator_screen(browser, live_server, bundle, size):
    """docs/screenshots/: the second HIT of a real study (instructions collapsed, reference shown)."""
    study = study_import(source=bundle_slice(BUNDLES / f"{bundle}.jsonl.gz", items=4, systems=3,
                                             session_hits_min=10, session_hits_max=10),
                         slug=bundle.replace("_", "-"))
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=shot&STUDY_ID=s&SESSION_ID=t")
    click_answer(page)
    for selector in ("#input", "#output-left", "#output-right", "#hit .answer-buttons"):
        assert page.locator(selector).is_visible()
    answers = box(page, "#hit .answer-buttons")
    assert answers["y"] + answers["height"] <= height
    right = box(page, "#output-right")
    if width > 1000:  # all of the input and both outputs' tops above the answer bar
        assert right["y"] + right["height"] <= box(page, "#hit .answers")["y"] + 1
    else:  # the phone shows Output B's start above the sticky answers
        assert right["y"] < answers["y"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.wait_for_timeout(2600)  # the "saved" notice fades out
    page.screenshot(path=str(SCREENSHOTS / f"annotate-{bundle.split('_')[0]}-{width}x{height}.png"))
    context.close()


class ParentPage(http.server.BaseHTTPRequestHandler):
    """The 'MTurk' side: a page on another site that frames the HIT."""
    frame_src = ""

    def do_GET(self):
        body = (f'<!doctype html><title>MTurk</title><h1>HIT</h1>'
                f'<iframe id="hit" src="{self.frame_src}" width="1000" height="700"></iframe>').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def mturk_parent():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ParentPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def framed(page, parent, src):
    ParentPage.frame_src = src
    page.goto(parent + "/hit")
    return page.frame_locator("#hit")


@pytest.mark.parametrize("same_site", ["None", "Lax"])
def test_mturk_hit_inside_a_cross_site_iframe(page, live_server, mturk_parent, settings, same_site):
    # The production cookie settings (SameSite=None; Secure; Partitioned); Chromium accepts
    # Secure cookies from http://localhost, and this headless Chromium blocks third-party
    # cookies that are not partitioned. The parent origin stands in for www.mturk.com.
    settings.EVALAPP_CROWD_FRAME_ANCESTORS = [mturk_parent]
    settings.SESSION_COOKIE_SAMESITE = settings.CSRF_COOKIE_SAMESITE = same_site
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.EVALAPP_PARTITIONED_COOKIES = True
    study = crowd_study(session_hits_min=2, session_hits_max=2)
    assert live_server.url.startswith("http://localhost:")  # another site than 127.0.0.1
    start = (f"{live_server.url}/s/{study.slug}/start/?workerId=W{same_site}&assignmentId=A9&hitId=H9"
             f"&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com")
    frame = framed(page, mturk_parent, start)
    if same_site == "Lax":
        # Without SameSite=None the session is not kept in the frame: no HIT is ever shown.
        page.wait_for_timeout(1500)
        assert frame.locator("form[data-hit-form]").count() == 0
        assert not Judgement.objects.exists()
        return
    for n in (1, 2):
        frame.locator(f"[data-progress]:has-text('Comparison {n} of 2')").wait_for()
        frame.locator("#hit .answers button[value=left]").click()
    frame.locator("[data-end=share]").wait_for()
    form = frame.locator("form[action='https://workersandbox.mturk.com/mturk/externalSubmit']")
    assert form.count() == 1
    assert form.locator("input[name=assignmentId]").get_attribute("value") == "A9"
    assert Judgement.objects.filter(annotator__external_id="WNone").count() == 2


def test_mturk_preview_in_frame_and_other_pages_refuse_frames(page, live_server, mturk_parent, settings):
    settings.EVALAPP_CROWD_FRAME_ANCESTORS = [mturk_parent]
    study = crowd_study()
    frame = framed(page, mturk_parent, f"{live_server.url}/s/{study.slug}/start/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H")
    frame.locator("text=Accept the HIT to begin").wait_for()
    assert not Assignment.objects.exists()
    # The front page is DENY: Chromium refuses to render it in the frame.
    framed(page, mturk_parent, f"{live_server.url}/")
    page.wait_for_timeout(1000)
    child = page.frames[1]
    assert "Studies" not in (child.content() if child.url.startswith("http://localhost") else "")
    # A non-MTurk origin may not frame the crowd pages either.
    settings.EVALAPP_CROWD_FRAME_ANCESTORS = ["https://www.mturk.com"]
    frame = framed(page, mturk_parent, f"{live_server.url}/s/{study.slug}/start/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
    page.wait_for_timeout(1000)
    assert frame.locator("text=Accept the HIT to begin").count() == 0



@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_no_work_screen_after_one_judgement_of_ten_shows_no_code_and_says_what_to_do(browser, live_server, size):
    """Issue 36, 8: the worker judged 1 of the 10 the study asks, and others hold every open
    comparison: "No work for you right now" without a completion code, saying that the judgement
    is saved, that the page checks again, and how to return the study on Prolific."""
    from annotation.services import hits
    from tests.builders.annotating import workers_of

    study = crowd_study(session_hits_min=10, session_hits_max=0)
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=one-of-ten&STUDY_ID=s&SESSION_ID=t")
    for annotator in workers_of([f"holder{n}" for n in range(40)]).values():
        if hits.hit_next_for_annotator(study=study, annotator=annotator) is None:
            break
    page.click("#hit .answers button[value=left]")
    page.wait_for_selector("[data-end=nowork]")
    assert Judgement.objects.filter(annotator__external_id="one-of-ten").count() == 1
    text = " ".join(page.locator("[data-end]").inner_text().split())
    assert page.locator(".completion-code").count() == 0 and CODE not in page.content()
    assert "You judged 1 comparison in this study (10 needed for the completion code); your judgements are saved" in text
    assert "checks again every 5 seconds" in text and "return the study on Prolific" in text
    assert page.locator("a[href^='https://app.prolific.com/submissions/complete']").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SCREENSHOTS / f"annotate-nowork-{width}x{height}.png"))
    context.close()


def overlap(a, b) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


@pytest.mark.parametrize("bundle", ["crowd", "summeval_rubric"])
@pytest.mark.parametrize("size", [(1366, 768), (390, 844)])
def test_the_saved_notice_covers_neither_the_title_nor_the_progress(browser, live_server, bundle, size):
    """Issue 36, 6: "Saved ✓" (fixed at the top of the screen) covered the study's title on a
    phone and "Comparison N" on the desktop rubric. It now sits in the HIT's head, beside them."""
    study = crowd_study() if bundle == "crowd" else study_import(source=BUNDLES / "summeval_rubric.jsonl.gz",
                                                                 slug="summeval-rubric")
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=notice&STUDY_ID=s&SESSION_ID=t")
    page.goto(f"{live_server.url}/s/{study.slug}/annotate/?notice=saved")
    notice = box(page, ".notice")
    assert page.locator(".notice").inner_text() == "Saved ✓" and notice["width"] > 0
    assert 0 <= notice["y"] and notice["y"] + notice["height"] <= height and notice["x"] + notice["width"] <= width
    for selector in ("#hit h1", "[data-progress]", "header.top"):
        assert not overlap(notice, box(page, selector)), (selector, notice, box(page, selector))
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()


def one_slot_each() -> Study:
    """One item, three systems: three comparisons, one per pair, each pair's round asks for one."""
    return study_import(source=bundle_bytes(crowd_rows(items=1, batch=1, budget=3)))


def _one_free_comparison_for(browser, live_server, study, pid):
    """A worker's page on the start link, holding the one comparison that other workers (through
    the services) leave free: (context, page, their HIT)."""
    from annotation.services import hits
    from tests.builders.annotating import workers_of

    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=t")
    page.wait_for_selector("form[data-hit-form]")
    for annotator in workers_of([f"holder{n}" for n in range(40)]).values():
        if hits.hit_next_for_annotator(study=study, annotator=annotator) is None:
            break
    mine = Assignment.objects.get(annotator__external_id=pid, state=Assignment.State.LEASED)
    return context, page, mine


def test_a_closed_tab_gives_its_comparison_to_the_next_worker_at_once(browser, live_server):
    """Issue 36, 10: the lease of a closed tab held its comparison for lease_timeout_seconds
    (900 s): with every other comparison held, the study served nothing meanwhile. The page
    now sends its release when it goes (pagehide, a beacon), and a worker waiting on "No work
    for you right now" gets that comparison at the page's next check, without a reload."""
    import time

    study = one_slot_each()
    context, page, mine = _one_free_comparison_for(browser, live_server, study, "closer")
    waiting = browser.new_context(viewport={"width": 390, "height": 844})
    other = waiting.new_page()
    other.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=waiter&STUDY_ID=s&SESSION_ID=t")
    assert other.locator("#hit[data-screen='nowork']").count() == 1
    other.evaluate("window.sameDocument = true")
    page.close()
    closed = time.monotonic()
    while Assignment.objects.get(pk=mine.pk).state == Assignment.State.LEASED and time.monotonic() - closed < 5:
        time.sleep(0.1)
    assert Assignment.objects.get(pk=mine.pk).state == Assignment.State.EXPIRED  # released, not skipped
    other.wait_for_selector("form[data-hit-form]", timeout=8000)  # the no-work screen checks every 5 s
    theirs = Assignment.objects.get(annotator__external_id="waiter", state=Assignment.State.LEASED)
    assert theirs.comparison_id == mine.comparison_id
    assert other.evaluate("window.sameDocument === true")
    waiting.close()
    context.close()


def test_a_reload_keeps_the_workers_hit(browser, live_server):
    """A reload fires pagehide too, and the old page's release arrives after the new page was
    read: the new page holds the lease anew (taking it back), so the worker keeps their HIT and
    nobody else is served it; the answer is saved."""
    from annotation.services import hits
    from tests.builders.annotating import workers_of

    study = one_slot_each()
    context, page, mine = _one_free_comparison_for(browser, live_server, study, "reloader")
    for _ in range(2):
        page.reload()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        assert f"/hits/{mine.pk}/" in page.locator("form[data-hit-form]").get_attribute("action")
        assert Assignment.objects.get(pk=mine.pk).state == Assignment.State.LEASED
        assert hits.hit_next_for_annotator(study=study, annotator=workers_of(["late"])["late"]) is None
    page.wait_for_timeout(300)
    page.click("#hit .answers button[value=left]")
    page.wait_for_selector(".notice:has-text('Saved')")
    assert Judgement.objects.get(annotator__external_id="reloader").assignment_id == mine.pk
    context.close()


def test_a_late_answer_to_keep_does_not_reload_a_page_that_moved_on(page, live_server):
    """The page's keep (on pageshow) may come back after the worker answered that HIT: the
    server then says the HIT is gone (409), which must not reload the page the worker is now
    working on (it did, under PostgreSQL's timing, in the full suite)."""
    study = crowd_study()
    held = []
    page.route("**/keep/", lambda route: held.append(route))
    page.goto(f"{live_server.url}/s/{study.slug}/start/?PROLIFIC_PID=late-keep&STUDY_ID=s&SESSION_ID=t")
    page.wait_for_timeout(300)
    page.evaluate("window.sameDocument = true")
    click_answer(page)
    assert held, "the page asked to keep its HIT"
    held[0].continue_()
    page.wait_for_timeout(1000)
    assert page.evaluate("window.sameDocument === true"), "the page reloaded"
    assert progress_text(page).startswith("Comparison 2") and Judgement.objects.count() == 1
