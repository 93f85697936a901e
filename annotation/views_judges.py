"""The judges screens (researchers only): a study's judges page — its judges calibrated on the
humans, its judge runs and the form that starts one — and a page per run with its progress,
which htmx refreshes every second and, without JavaScript, reloads itself (meta refresh)
while the run goes on. The run itself happens off the request (annotation/jobs.py). GET never
writes."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from . import selectors, services
from .access import access_study_as_researcher
from .forms_judges import JudgeRunForm, endpoint_choices
from .models import JudgeRun, Study

POLL_SECONDS = 1


def _protocol_note(study: Study) -> dict:
    return {"metric": study.metric.name if study.metric_id else None, "started": study.protocol_started,
            "draft": study.status == Study.Status.DRAFT}


@login_required
@require_http_methods(["GET", "POST"])
def judges(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the study's judges and runs, and the form; POST: start a run (then its page)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    status = 200
    if request.method == "POST":
        form = JudgeRunForm(request.POST, request.FILES, study=study)
        if form.is_valid():
            try:
                run = services.judges.judge_run_create(study=study, user=request.user, from_page=True, schedule=True,
                                                       **form.run_arguments())
            except ValueError as error:
                form.add_error(None, str(error))
            else:
                return redirect("judge_run", slug=slug, run_id=run.pk)
        status = 400
    else:
        form = JudgeRunForm(study=study)
    return render(request, "annotation/judges.html", {
        "study": study, "form": form, "runs": selectors.judges.study_judge_runs(study=study),
        "judges": selectors.studies.study_judges(study=study), "endpoints": endpoint_choices(),
        "protocol": _protocol_note(study),
    }, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def judge_run(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """GET: one run's progress and cost; POST: resume it (a failed or stalled run)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    run = get_object_or_404(JudgeRun, pk=run_id, study=study)
    if request.method == "POST":
        try:
            services.judges.judge_run_resume(run=run)
        except ValueError as error:
            messages.error(request, str(error))
        return redirect("judge_run", slug=slug, run_id=run.pk)
    summary = selectors.judges.judge_run_summary(run=run)
    context = {"study": study, "run": run, "summary": summary, "running": run.running,
               "resumable": not services.judges.judge_run_live(run) and run.status != JudgeRun.Status.DONE,
               "poll_seconds": POLL_SECONDS, "protocol": _protocol_note(study)}
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_judge_run.html", context)
    return render(request, "annotation/judge_run.html", context)
