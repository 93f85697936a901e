"""The planner screens: a plan request form per study and a page per plan job (researchers only).

The job runs in the background (services.planner); its page shows a progress bar that htmx
refreshes every second and, without JavaScript, reloads itself (meta refresh) until the
results table appears. GET never writes.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from protocol.plan import DEFAULT_ASSUMPTIONS

from . import selectors, services
from .access import access_study_as_researcher
from .forms import PlanForm
from .models import PlanJob, Study

POLL_SECONDS = 1


def _initial(study: Study) -> dict:
    defaults = DEFAULT_ASSUMPTIONS
    if study.design.plan_per_comparison:
        budgets = str(study.ranking_max_labels) if study.ranking_max_labels else "all"
    else:
        budgets = str(study.budget) if study.budget else "all"
    initial = {"batches": str(study.batch_size), "gammas": f"{study.gamma:g}", "policy": study.allocation_policy,
               "budgets": budgets, "futilities": f"{study.futility:g}",
               # the study's own kinds of prompt, when its items carry them
               "kinds": selectors.studies.study_prompt_kind_count(study=study)}
    for name in PlanForm.ASSUMPTION_ROWS:
        low, high = getattr(defaults, f"{name}_range")
        initial.update({name: getattr(defaults, name), f"{name}_low": low, f"{name}_high": high})
    return initial


@login_required
def planner(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the plan request form and the latest plans; POST: start a plan (then its page)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    status = 200
    if request.method == "POST":
        form = PlanForm(request.POST, design=study.design)
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = services.planner.plan_job_create(
                    study=study, user=request.user, use_human=data["use_human"], assumptions=form.assumptions(),
                    budgets=data["budgets"], batches=data["batches"], gammas=data["gammas"], reps=data["reps"],
                    policy=data["policy"], throughput=data["throughput"], futilities=data.get("futilities"))
            except ValueError as error:
                form.add_error(None, str(error))
            else:
                return redirect("plan_job", slug=slug, job_id=job.pk)
        status = 400
    else:
        form = PlanForm(initial=_initial(study), design=study.design)
    return render(request, "annotation/planner.html", {
        "study": study, "form": form, "jobs": selectors.studies.study_plan_jobs(study=study),
        "human_labels": selectors.studies.study_human_label_count(study=study), "defaults": DEFAULT_ASSUMPTIONS,
    }, status=status)


@login_required
def plan_job(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    """One plan: progress while it runs, then the expected outcome of every grid point."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    job = get_object_or_404(PlanJob, pk=job_id, study=study)
    context = {"study": study, "job": job, "rows": selectors.studies.plan_job_rows(job=job),
               "running": job.status in (PlanJob.Status.QUEUED, PlanJob.Status.RUNNING),
               "poll_seconds": POLL_SECONDS}
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_plan_job.html", context)
    return render(request, "annotation/plan_job.html", context)
