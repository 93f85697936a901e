"""Annotator screens: the crowd start link, the HIT page and its submit (htmx or plain form)."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from . import selectors, services
from .access import access_study_running, access_study_worker, session_annotator_key
from .models import Annotator, Assignment, Study
from .services import hits as serving
from .services.transactions import retry_transient

ANSWERS = {"left": 1, "tie": 0, "right": -1}


def _annotator(request: HttpRequest, study: Study) -> Annotator:
    """The request's annotator for ``study`` (access.py decides; a member's is made on first use)."""
    worker = access_study_worker(request, study)
    return worker.annotator or serving.annotator_for_user(user=worker.user)
MTURK_NO_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


@retry_transient
def study_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Entry link for crowd workers: ?PROLIFIC_PID=...&SESSION_ID=... (Prolific) or
    ?workerId=...&assignmentId=... (MTurk). The worker id is bound to the platform session id
    on first entry (services.crowd_session_enter); GET because the platforms send a GET link.
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
    try:
        annotator = services.crowd_session_enter(study=study, platform=platform, worker_id=worker_id,
                                                 platform_session_id=session_id)
    except services.CrowdSessionTaken:
        return render(request, "annotation/start_taken.html", {"study": study, "platform": platform}, status=403)
    except services.CrowdEntryRefused as exc:
        return render(request, "annotation/start_preview.html", {"study": study, "error": str(exc)}, status=400)
    if platform == Annotator.Platform.MTURK:
        request.session[f"evalapp:mturk:{study.pk}"] = {
            "assignmentId": session_id, "turkSubmitTo": request.GET.get("turkSubmitTo", "")}
    request.session[session_annotator_key(study)] = annotator.pk
    return redirect("annotate", slug=slug)


def _hit_context(request: HttpRequest, study: Study, annotator: Annotator, error: str = "") -> dict:
    hit = serving.hit_next_for_annotator(study=study, annotator=annotator)
    context = {"study": study, "annotator": annotator, "error": error, "key": serving.new_idempotency_key()}
    if hit is None:
        context["done"] = selectors.annotator_judgement_count(study=study, annotator=annotator)
        context["mturk"] = request.session.get(f"evalapp:mturk:{study.pk}")
        return context
    context.update(selectors.hit_display(assignment=hit, study=study))
    return context


@retry_transient
def annotate(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_running(study)
    annotator = _annotator(request, study)
    context = _hit_context(request, study, annotator)
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_hit.html", context)
    return render(request, "annotation/annotate.html", context)


@require_POST
@retry_transient
def hit_submit(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_running(study)
    annotator = _annotator(request, study)
    assignment = get_object_or_404(Assignment.objects.select_related("comparison__study", "comparison__item"),
                                   pk=assignment_id, comparison__study=study)
    error = ""
    try:
        seconds = float(request.POST["seconds"]) if request.POST.get("seconds") else None
        if seconds is not None and not (0 <= seconds < 86400):
            seconds = None
        serving.judgement_submit(
            assignment=assignment,
            annotator=annotator,
            shown_value=ANSWERS.get(request.POST.get("answer", ""), 99),
            idempotency_key=request.POST.get("key", ""),
            seconds_on_task=seconds,
        )
    except (serving.HitError, ValueError) as exc:
        error = str(exc)
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_hit.html", _hit_context(request, study, annotator, error))
    if error:
        context = _hit_context(request, study, annotator, error)
        return render(request, "annotation/annotate.html", context, status=409)
    return redirect(reverse("annotate", kwargs={"slug": slug}))
