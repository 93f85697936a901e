"""Researcher screens: the live dashboard of a study and its exports."""
from __future__ import annotations

import csv

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from . import figures, selectors, serving
from .access import access_study_as_researcher
from .forms import StudySettingsForm
from .models import Judgement, Study


def _dashboard_context(study: Study) -> dict:
    serving.study_protocol_ensure_started(study=study)
    data = selectors.study_dashboard_data(study=study)
    charts = []
    for name, title, layout in (
        ("protocol", "Protocol decisions", data["dags"].get("protocol")),
        ("human", "Humans only (sign test)", data["dags"].get("human")),
        ("metric", f"Metric only: {data['metric'] or 'none'} (sign test)", data["dags"].get("metric")),
    ):
        if layout and (name != "metric" or data["metric"]):
            charts.append({"name": f"dag-{name}", "title": title, "figure": figures.dag_figure(layout)})
    if data["per_system_favi"]:
        charts.append({"name": "favi", "title": "Favi-Score per system (> 0: favoured)",
                       "figure": figures.favi_box_figure(data["per_system_favi"])})
    if data["timeline"]:
        charts.append({"name": "timeline", "title": "θ = P(first better) after each round",
                       "figure": figures.timeline_figure(data["timeline"], study.gamma)})
    if data["separability"]:
        charts.append({"name": "separability", "title": "Separability of the comparisons",
                       "figure": figures.separability_figure(data["separability"])})
    for chart in charts:
        chart["figure_id"] = f"figure-{chart['name']}"
    budget = data["budget"]
    used = budget["spent"] + budget["reserved"]
    return {"study": study, "data": data, "charts": charts,
            "spent_percent": round(100 * budget["spent"] / budget["total"], 1) if budget["total"] else 0,
            "reserved_percent": round(100 * budget["reserved"] / budget["total"], 1) if budget["total"] else 0,
            "used": used, "refresh_seconds": settings.DASHBOARD_REFRESH_SECONDS}


@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    context = _dashboard_context(study)
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_dashboard_body.html", context)
    return render(request, "annotation/dashboard.html", context)


class _Echo:
    def write(self, value):
        return value


@login_required
def judgements_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    """Every judgement of the study, canonical order (+1 = first better), as CSV."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    rows = Judgement.objects.filter(comparison__study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator", "assignment").order_by("id")
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(["item", "first", "second", "value", "annotator", "platform", "source",
                               "shown_swapped", "seconds_on_task", "created_at"])
        for j in rows.iterator():
            yield writer.writerow([j.comparison.item.external_id, j.comparison.first.name, j.comparison.second.name,
                                   j.value, j.annotator.external_id, j.annotator.platform, j.source,
                                   "" if j.assignment is None else int(j.assignment.shown_swapped),
                                   "" if j.seconds_on_task is None else j.seconds_on_task, j.created_at.isoformat()])

    response = StreamingHttpResponse(lines(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-judgements.csv"'
    return response


@login_required
def decisions_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The protocol state of every pair (decision, θ, judgements, status) as CSV."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    data = selectors.study_dashboard_data(study=study)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-decisions.csv"'
    writer = csv.writer(response)
    fields = ["first", "second", "status", "decision", "theta", "round", "judgements", "capacity", "favi", "agreement"]
    writer.writerow(fields)
    for p in data["pairs"]:
        writer.writerow(["" if p[f] is None else p[f] for f in fields])
    return response


SETTINGS_FIELDS = ("status", "budget", "lease_timeout_seconds", "completion_code", "instructions", "item_choice",
                   "item_choice_temperature")


@login_required
def study_settings(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    if request.method == "POST":
        form = StudySettingsForm(request.POST)
        if form.is_valid():
            try:
                serving.study_settings_update(study=study, **form.cleaned_data)
            except (ValueError, ValidationError) as exc:
                form.add_error(None, exc.messages if isinstance(exc, ValidationError) else str(exc))
            else:
                messages.success(request, "Settings saved.")
                return redirect("dashboard", slug=slug)
    else:
        form = StudySettingsForm(initial={f: getattr(study, f) for f in SETTINGS_FIELDS})
    return render(request, "annotation/study_settings.html", {"study": study, "form": form},
                  status=400 if form.errors else 200)
