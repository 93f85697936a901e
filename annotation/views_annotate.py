"""Annotator screens: the crowd start link, the HIT page and its submit (htmx or plain form).

GET never writes, with one exception: the crowd start link, which Prolific and MTurk send as a
GET, binds the worker to their platform session and leases their first HIT. The annotate page
shows the annotator's live lease, or an end screen, or — when they hold no lease and work may be
left — a button that POSTs for the next comparison (htmx presses it on load). Every POST that
ends a HIT (submit, skip, report) leases the next one before it answers.
"""
from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.views import redirect_to_login
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from . import selectors, services
from .access import access_study_running, access_study_worker, crowd_worker_entered, session_annotator_key
from .errors import CrowdEntryRefused, HitError
from .framing import crowd_frameable, mturk_submit_url
from .models import Annotator, Assignment, ItemFlag, Study
from .rubrics import answers_from_post, hit_answer_from_post
from .throttles import CrowdNewWorkerThrottle, throttle_worker, too_many_requests


MTURK_NO_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Short confirmations after a POST (a redirect carries only the name, so a GET never writes).
NOTICES = {"saved": "Saved ✓",
           "skipped": "Skipped. You will not see that comparison again.",
           "flagged": "Thank you — the problem was reported to the researchers."}


@services.transactions.retry_transient
def study_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Entry link for crowd workers: ?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=... (Prolific) or
    ?workerId=...&assignmentId=... (MTurk). A worker is one platform session of a worker id
    (services.crowd.crowd_session_enter); a new one counts against the client's ``crowd_new`` rate.
    GET because the platforms send a GET link.
    """
    study = get_object_or_404(Study, slug=slug)
    access_study_running(study)
    if request.GET.get("assignmentId") == MTURK_NO_ASSIGNMENT:
        return render(request, "annotation/start_preview.html", {"study": study})
    if "PROLIFIC_PID" in request.GET:
        platform, worker_id = Annotator.Platform.PROLIFIC, request.GET["PROLIFIC_PID"]
        session_id = request.GET.get("SESSION_ID", "")
    elif "workerId" in request.GET:
        platform, worker_id = Annotator.Platform.MTURK, request.GET["workerId"]
        session_id = request.GET.get("assignmentId", "")
    else:
        return redirect("annotate", slug=slug)
    entered = selectors.serving.crowd_entry_of(study=study, platform=platform, worker_id=worker_id,
                                               platform_session_id=session_id)
    if entered is None:
        # Each new worker (id and session) is a place in the study: a client may make only so many.
        throttle = CrowdNewWorkerThrottle()
        if not throttle.allow_request(request, None):
            return too_many_requests(request, throttle.wait())
    try:
        annotator = services.crowd.crowd_session_enter(study=study, platform=platform, worker_id=worker_id,
                                                       platform_session_id=session_id, entered=entered,
                                                       platform_study_id=request.GET.get("STUDY_ID", ""))
    except CrowdEntryRefused as exc:
        return render(request, "annotation/start_preview.html", {"study": study, "error": str(exc)}, status=400)
    if platform == Annotator.Platform.MTURK:
        request.session[f"evalapp:mturk:{study.pk}"] = {
            "assignmentId": session_id, "turkSubmitTo": request.GET.get("turkSubmitTo", "")}
    request.session[session_annotator_key(study)] = annotator.pk
    crowd_worker_entered(study, annotator)
    services.hits.hit_next_for_annotator(study=study, annotator=annotator)  # the first HIT, ready on arrival
    return redirect("annotate", slug=slug)


# A worker told there is no work for them right now (others hold the last leases of the open
# rounds, e.g. while a ranking design waits for its step's last round) is asked again after
# this many seconds, so the next rounds reach them without a reload (htmx; a meta refresh
# without JavaScript).
NOWORK_RECHECK_SECONDS = 5


def _screen_context(request: HttpRequest, study: Study, annotator: Annotator, *, lease: bool, error: str = "",
                    notice: str = "", finishing: bool = False, refused: tuple[int, Mapping[str, str]] | None = None) -> dict:
    """The annotator's HIT, or the screen that says why there is none (and whether the code is due).

    ``lease``: lease the next HIT when the annotator holds none (POST only); without it the
    screen is ``ready`` (a button for the next comparison) when there is work for them.
    ``screen``: hit, ready, paused, screened (failed the onboarding checks, or excluded: a
    polite end without a code, and the platform's return path), finished, share (the worker's maximum is reached), time
    (their session time is up), nowork (nothing for them right now), skipped (what is left for
    them they skipped) or stopped (they chose to stop after meeting the minimum). The completion-code rule is CrowdSession.code_due.
    ``refused``: (the HIT, its form) of a submit the server refused: shown again, that HIT's
    rubric keeps the answers and reasons given.
    """
    context = {"study": study, "annotator": annotator, "error": error, "notice": notice,
               "key": services.hits.new_idempotency_key()}
    current, done = selectors.serving.hit_current_and_done(study=study, annotator=annotator)
    session = selectors.serving.crowd_session(study=study, annotator=annotator, done=done)
    finishing = finishing and session.minimum_met
    if finishing:
        hit = None
    elif lease:
        hit = services.hits.hit_next_for_annotator(study=study, annotator=annotator, current=current)
    else:
        hit = current
    context["session"] = session
    if hit is not None:
        context.update(selectors.serving.hit_display(assignment=hit, study=study, done=session.done), screen="hit",
                       flag_reasons=ItemFlag.Reason.choices, lease=services.hits.lease_token(hit.expires_at))
        if refused is not None and refused[0] == hit.pk and context["criteria"]:
            given = answers_from_post(study, refused[1])
            for criterion in context["criteria"]:
                criterion.update(chosen=given[criterion["name"]]["value"], given_reason=given[criterion["name"]]["reason"])
        return context
    if finishing:
        screen = "stopped"
    elif study.status == Study.Status.PAUSED:
        screen = "paused"
    elif services.checks.worker_screened_out(study=study, annotator=annotator):
        screen = "screened"
    elif study.status == Study.Status.FINISHED or not selectors.serving.study_work_left(study=study):
        screen = "finished"
    elif session.share_done:
        screen = "share"
    elif session.time_up:
        screen = "time"
    elif not lease and selectors.serving.annotator_has_work(study=study, annotator=annotator):
        screen = "ready"
    elif selectors.serving.annotator_has_work(study=study, annotator=annotator, skipped_too=True):
        screen = "skipped"  # their own skips emptied their queue: not the study's end, no code for it
    else:
        screen = "nowork"
    code_due = screen != "screened" and session.code_due
    mturk = request.session.get(f"evalapp:mturk:{study.pk}") or {}
    code = selectors.serving.crowd_completion_code(study=study, annotator=annotator) if code_due else ""
    context.update(screen=screen, done=session.done, code_due=code_due, recheck_seconds=NOWORK_RECHECK_SECONDS,
                   completion_code=code,
                   mturk_submit=mturk_submit_url(mturk.get("turkSubmitTo", "")) if code_due else None,
                   mturk=mturk)
    return context


def _screen_template(request: HttpRequest) -> str:
    """The HIT as a fragment for htmx to swap in, or the whole page."""
    return "annotation/_hit.html" if request.headers.get("HX-Request") else "annotation/annotate.html"


def _render_screen(request: HttpRequest, study: Study, annotator: Annotator, *, status: int = 200,
                   **screen) -> HttpResponse:
    """Render the annotator's screen (``screen``: the arguments of ``_screen_context``)."""
    template = _screen_template(request)
    return render(request, template, _screen_context(request, study, annotator, **screen), status=status)


def _study_or_404(slug: str) -> Study:
    study = selectors.serving.study_of_slug(slug=slug)
    if study is None:
        raise Http404("No study with this link.")
    return study


def _crowd_request(request: HttpRequest, slug: str) -> tuple[Study, Annotator]:
    """The study and the request's annotator, the request counted against their rate
    (throttles.throttle_worker: the scope its URL's throttle_page names)."""
    study = _study_or_404(slug)
    access_study_running(study)
    worker = access_study_worker(request, study)
    throttle_worker(request, worker)
    return study, worker.annotator or services.hits.annotator_for_user(user=worker.user)


@crowd_frameable
@services.transactions.retry_transient
def annotate(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study_or_404(slug)
    access_study_running(study)
    if not request.user.is_authenticated and request.session.get(session_annotator_key(study)) is None:
        # Not a crowd worker of this study and not logged in: log in first, then come back.
        return redirect_to_login(request.get_full_path())
    worker = access_study_worker(request, study)
    throttle_worker(request, worker)
    if worker.annotator is None:  # a member who never annotated: nothing of theirs to show yet
        return render(request, _screen_template(request), {
            "study": study, "screen": "ready", "done": 0, "annotator": Annotator(platform=Annotator.Platform.LOCAL)})
    return _render_screen(request, study, worker.annotator, lease=False, finishing=request.GET.get("finish") == "1",
                          notice=NOTICES.get(request.GET.get("notice", ""), ""))


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_next(request: HttpRequest, slug: str) -> HttpResponse:
    """Lease the next comparison (the annotate page's button; htmx presses it on load)."""
    study, annotator = _crowd_request(request, slug)
    return _after_post(request, study, annotator)


def _after_post(request: HttpRequest, study: Study, annotator: Annotator, *, notice: str = "",
                error: str = "", status: int = 200, refused: tuple[int, Mapping[str, str]] | None = None) -> HttpResponse:
    """Answer a POST: lease the next HIT, then show it (htmx) or redirect to the page that
    shows it (post/redirect/get; an error is shown at once, with ``status``, and ``refused``:
    the refused HIT's answers)."""
    if error or request.headers.get("HX-Request"):
        return _render_screen(request, study, annotator, status=status, lease=True, error=error,
                              notice=NOTICES.get(notice, ""), refused=refused)
    services.hits.hit_next_for_annotator(study=study, annotator=annotator)
    suffix = f"?notice={notice}" if notice else ""
    return redirect(reverse("annotate", kwargs={"slug": study.slug}) + suffix)


def _of_study(study: Study) -> Q:
    """A HIT of ``study``: a comparison's, or a check's (services/checks.py)."""
    return Q(comparison__study=study) | Q(check_item__study=study)


def _own_assignment(study: Study, annotator: Annotator, assignment_id: int) -> Assignment:
    return get_object_or_404(Assignment.objects.select_related("comparison__study", "comparison__item"),
                             _of_study(study), pk=assignment_id, annotator=annotator)


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_submit(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    study, annotator = _crowd_request(request, slug)
    assignment = selectors.serving.hit_of_study(study=study, assignment_id=assignment_id)
    if assignment is None:
        raise Http404("No HIT with this id.")
    plain = not request.headers.get("HX-Request")  # htmx swaps a 200 only: it shows the error
    try:
        answer = hit_answer_from_post(study, request.POST)
    except ValueError as exc:  # a field no form of ours sends (a NUL character): the request is bad
        return _after_post(request, study, annotator, error=str(exc), status=400 if plain else 200)
    error = ""
    try:
        services.hits.judgement_submit(assignment=assignment, annotator=annotator, **answer)
    except (HitError, ValueError) as exc:
        error = str(exc)
    status = 409 if error and plain else 200
    return _after_post(request, study, annotator, error=error, notice="" if error else "saved", status=status,
                       refused=(assignment.pk, request.POST) if error else None)


@crowd_frameable
def hit_diff(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """The word differences of the worker's own HIT, computed when asked for: htmx loads them
    into the HIT's closed box when it is opened; without JavaScript they are a page with a way
    back to the comparison."""
    study = _study_or_404(slug)
    access_study_running(study)
    annotator = access_study_worker(request, study).annotator
    if annotator is None:
        raise Http404("No HIT with this id.")
    diff = selectors.serving.hit_word_diff(assignment=_own_assignment(study, annotator, assignment_id), study=study)
    template = "annotation/_word_diff.html" if request.headers.get("HX-Request") else "annotation/word_diff.html"
    return render(request, template, {"study": study, "diff": diff})


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_skip(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Give the HIT back to the pool; this worker is not served its comparison again."""
    study, annotator = _crowd_request(request, slug)
    services.hits.hit_release(assignment=_own_assignment(study, annotator, assignment_id), skipped=True)
    return _after_post(request, study, annotator, notice="skipped")


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_release(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """The page that showed this HIT is gone (annotate.js sends this on ``pagehide``): give its
    lease back at once, unless the lease changed since the page was rendered (``lease``: its
    token) or it was answered; not a skip. Always 204: a beacon reads no answer."""
    study, annotator = _crowd_request(request, slug)
    services.hits.hit_leave(assignment=_own_assignment(study, annotator, assignment_id), annotator=annotator,
                            lease=request.POST.get("lease", ""))
    return HttpResponse(status=204)


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_keep(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """The page shows this HIT (again): hold its lease anew, taking it back if the page before
    released it and nobody took it meanwhile. ``{"lease": token}``, or 409 ``{"lease": null}``
    when the HIT is gone (annotate.js then asks for the next one)."""
    study, annotator = _crowd_request(request, slug)
    lease = services.hits.hit_keep(study=study, assignment=_own_assignment(study, annotator, assignment_id),
                                   annotator=annotator)
    return JsonResponse({"lease": lease}, status=200 if lease else 409)


@crowd_frameable
@require_POST
@services.transactions.retry_transient
def hit_flag(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Report a problem with the HIT's item (for the researchers) and skip it."""
    study, annotator = _crowd_request(request, slug)
    assignment = _own_assignment(study, annotator, assignment_id)
    try:
        services.hits.hit_flag(assignment=assignment, annotator=annotator, reason=request.POST.get("reason", ""),
                               note=request.POST.get("note", "")[:500])
    except HitError as exc:
        return _after_post(request, study, annotator, error=str(exc), status=400)
    return _after_post(request, study, annotator, notice="flagged")
