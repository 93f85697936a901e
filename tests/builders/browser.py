"""Pages in a real browser (Playwright): logging in, the upload and worker pages, layout checks."""
from __future__ import annotations

from django.contrib.auth.models import Group, User

from annotation.access import RESEARCHER_GROUP
from annotation.services.members import study_membership_set


def browser_login(page, live_server, study, username="res2"):
    """Log a new researcher of ``study`` in through the login form; lands on the dashboard."""
    user = User.objects.create_user(username, password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/dashboard/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "res-pass-123")
    page.click("button[type=submit]")


def record_progress(page, bar: str) -> None:
    """Record ``bar``'s (value, max) in ``window.__progress`` now and after every htmx settle."""
    page.evaluate("""(bar) => {
      window.__progress = [];
      const note = () => { const shown = document.querySelector(bar);
        if (shown) window.__progress.push([Number(shown.value), Number(shown.max)]); };
      note();
      document.body.addEventListener('htmx:afterSettle', note);
    }""", bar)


def fits_the_viewport(page, width: int) -> bool:
    """No sideways scrolling at the requested width (a phone would widen its layout viewport)."""
    return page.evaluate("() => document.documentElement.scrollWidth") <= width


def assert_no_horizontal_scroll(page):
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className)""")
    assert not wide, f"the page scrolls sideways: {wide[:5]}"


def researcher_upload_page(browser, live_server, size: tuple[int, int], username: str = "rita"):
    """A browser context of ``size`` on the upload page, a new researcher ``username`` logged in:
    (context, page); the caller closes the context."""
    user = User.objects.create_user(username, email=f"{username}@example.org", password=f"{username}-pass-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-pass-123")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/studies/upload/")
    return context, page


def worker_page(browser, live_server, slug: str, size: tuple[int, int], pid: str = "w1"):
    """A fresh browser context of ``size`` on a Prolific worker's start link of ``slug``:
    (context, page); the caller closes the context."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=t")
    return context, page
