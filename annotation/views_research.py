"""Researcher screens: the live dashboard of a study, a page per pair, the help page and the exports."""
from __future__ import annotations

import csv
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from protocol.active_ranking import ActiveSettings
from protocol.study_settings import KINDS_CLOSE_BAR_FACTOR, ORDER_BAR_FACTOR

from . import figures, guarantees, reports, selectors, services
from .errors import QualityError
from .access import access_study_as_researcher
from .http import bad_request, login_or_api_token_required, quoted
from .forms import HUMAN_ONLY, METRIC_PREFIX, StudyDraftForm, running_settings_forms
from .models import Annotator, Study
from .rubrics import is_rubric, study_rubric


def _dashboard_context(study: Study, data: dict, matrix_page: str | None) -> dict:
    """The dashboard's context from its ``data`` (reports.study_dashboard_ready); ``matrix_page``
    (the ``matrix`` parameter, 1-based) picks the heatmap's page of ranks. ValueError naming the
    parameter for a page that does not exist."""
    leaderboard = [dict(r) for r in data["leaderboard"]]
    if leaderboard:
        figures.leaderboard_bars(leaderboard)
    pages = data["matrix_charts"] or []
    page = 1
    if matrix_page is not None:
        page = int(matrix_page) if matrix_page.isdigit() else 0
        if not 1 <= page <= max(len(pages), 1):
            raise ValueError(f"matrix={matrix_page!r}: the pair matrix has pages 1 to {max(len(pages), 1)}")
    return {"study": study, "data": data, "charts": data["charts"], "leaderboard": leaderboard,
            "style": selectors.style.style_leaderboard_bars(data.get("style_leaderboard")),
            "matrix_chart": pages[page - 1] if pages else None, "matrix_pages": pages if len(pages) > 1 else [],
            "matrix_page": page, "refresh_seconds": settings.DASHBOARD_REFRESH_SECONDS}


@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    if study.status == Study.Status.DRAFT and not study.protocol_started:
        return redirect("study_settings", slug=slug)  # nothing to show before the launch
    data = reports.study_dashboard_ready(study=study)
    if data is None:  # never computed: a job computes it now (import_study leaves it to the job)
        template = "_dashboard_computing.html" if request.headers.get("HX-Request") else "dashboard_computing.html"
        return render(request, f"annotation/{template}", {"study": study})
    try:
        context = _dashboard_context(study, data, request.GET.get("matrix"))
    except ValueError as exc:
        return bad_request(request, str(exc))
    if request.headers.get("HX-Request"):
        return render(request, "annotation/_dashboard_body.html", context)
    try:
        context.update(_quality_context(request, study))
    except ValueError as exc:
        return bad_request(request, str(exc))
    return render(request, "annotation/dashboard.html", context)


# (key, header, what it is) of the quality panel's sortable columns.
QUALITY_HEADERS = (
    ("annotator", "Worker", "platform worker id"),
    ("excluded", "Status", "excluded workers' judgements are not counted; exclude or re-include here"),
    ("judgements", "Judgements", "every answer, checks and repeats included"),
    ("median_seconds", "Median s", "median seconds from render to answer (server-measured)"),
    ("tie_rate", "Ties", "share of tie answers"),
    ("left_share", "Left", "left / (left + right) answers as shown; 0.5 = no position bias"),
    ("agreement", "Agreement", "leave-one-out agreement with the other annotators of the same comparisons"),
    ("gold_accuracy", "Gold", "share of gold checks answered as expected"),
    ("repeat_consistency", "Repeat", "share of repeated comparisons answered the same way"),
    ("flag_count", "Flags", "too fast, straight-lining, failed checks, low agreement, inconsistent"),
)


def _quality_sort(request: HttpRequest, prefix: str = "q") -> tuple[str, bool]:
    sort = request.GET.get(f"{prefix}sort", "flag_count")
    order = request.GET.get(f"{prefix}order", "desc" if sort == "flag_count" else "asc")
    if order not in ("asc", "desc"):
        raise ValueError(f"unknown order {quoted(order)}; asc or desc")
    if sort not in selectors.quality.QUALITY_SORTS:
        raise ValueError(f"unknown sort {quoted(sort)}; one of {', '.join(sorted(selectors.quality.QUALITY_SORTS))}")
    return sort, order == "desc"


def _quality_context(request: HttpRequest, study: Study) -> dict:
    """The annotator quality panel: the table sorted by ?qsort=&qorder=, and column links."""
    sort, descending = _quality_sort(request)
    rows = selectors.quality.study_annotator_quality(study=study, sort=sort, descending=descending)
    headers = [{"key": key, "label": label, "title": title, "active": key == sort,
                "order": "asc" if key == sort and descending or key != sort and key not in (
                    "flag_count", "judgements") else "desc"}
               for key, label, title in QUALITY_HEADERS]
    return {"quality": rows, "quality_headers": headers, "quality_sort": sort, "quality_descending": descending,
            "exclusion_log": selectors.quality.study_exclusion_log(study=study)[:20],
            "annotator_agreement": selectors.quality.judgement_agreement(study=study)}


@login_or_api_token_required
def quality_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The annotator quality table (``?sort=&order=`` as on the dashboard) as CSV."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    try:
        sort, descending = _quality_sort(request, prefix="")
    except ValueError as exc:
        return bad_request(request, str(exc))
    rows = selectors.quality.study_annotator_quality(study=study, sort=sort, descending=descending)
    response = HttpResponse(content_type=CSV_CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-quality.csv"'
    writer = csv.writer(response)
    writer.writerow(selectors.quality.QUALITY_COLUMNS)
    for r in rows:
        writer.writerow([spreadsheet_safe(" ".join(r[c]) if c == "flags" else
                                          int(r[c]) if c == "excluded" else "" if r[c] is None else r[c])
                         for c in selectors.quality.QUALITY_COLUMNS])
    return response


@login_required
@require_POST
def annotator_exclusion(request: HttpRequest, slug: str, annotator_id: int) -> HttpResponse:
    """Exclude (``action=exclude``) or re-include (``action=include``) a worker; the affected
    pairs are re-decided off the request path. Back to the dashboard's quality panel."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    annotator = get_object_or_404(Annotator, pk=annotator_id)
    action = request.POST.get("action")
    if action not in ("exclude", "include"):
        return bad_request(request, "action must be exclude or include")
    change = services.quality.annotator_exclude if action == "exclude" else services.quality.annotator_include
    try:
        changed = change(study=study, annotator=annotator, user=request.user,
                         reason=request.POST.get("reason", "")[:500])
    except QualityError as exc:
        return bad_request(request, str(exc))
    if changed:
        messages.success(request, f"{annotator.external_id} {'excluded' if action == 'exclude' else 're-included'}: "
                                  "the affected pairs are being re-decided.")
    else:
        messages.info(request, f"{annotator.external_id} was already {action}d.")
    return redirect(reverse("dashboard", kwargs={"slug": slug}) + "#quality")


PAIR_ITEMS_PER_PAGE = 100


@login_required
def pair_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """One pair (``?first=A&second=B``): θ by round, its items' judgements, metric labels and
    separability, PAIR_ITEMS_PER_PAGE items a page (``&page=N``)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    first, second = request.GET.get("first"), request.GET.get("second")
    if not first or not second:
        return bad_request(request, "name the pair: ?first=SYSTEM&second=SYSTEM")
    data = selectors.dashboard.pair_detail_data(study=study, first=first, second=second)
    if data is None and selectors.dashboard.pair_detail_data(study=study, first=second, second=first) is not None:
        return redirect(f"{reverse('pair_detail', kwargs={'slug': slug})}?{urlencode({'first': second, 'second': first})}")
    if data is None:
        raise Http404(f"no pair {first} vs {second} in this study")
    charts = []
    if data["rounds"]:
        charts.append({"name": "pair-theta", "title": "θ and the share preferring the first system, by round",
                       "help": "theta", "figure": figures.pair_theta_figure(data["rounds"], study.gamma), "note": "",
                       "fallback": {"head": ("round", "judgements", "θ", "share (95 % interval)"),
                                    "rows": [(r["round"], r["judgements"], f"{r['theta']:.3f}",
                                              f"{r['share']:.2f} ({r['share_low']:.2f}–{r['share_high']:.2f})")
                                             for r in data["rounds"]], "empty": ""}})
    if data["separability"]:
        charts.append({"name": "pair-separability", "title": "Separability of this pair's items",
                       "help": "separability", "figure": figures.separability_figure(data["separability"]), "note": "",
                       "fallback": {"head": ("separability δ", "items"), "rows": figures.histogram_rows(data["separability"]),
                                    "empty": ""}})
    for chart in charts:
        chart["figure_id"] = f"figure-{chart['name']}"
    query = urlencode({"first": first, "second": second})
    # A pair of an arena has thousands of items: a page of them (judged first) renders in
    # milliseconds, where the whole table took 300 KB and most of the request (issue 22).
    items = Paginator(data["items"], PAIR_ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "annotation/pair_detail.html", {
        "study": study, "pair": data, "charts": charts, "band": (study.gamma / 2, 1 - study.gamma / 2),
        "items_page": items, "pair_query": query,
        "judgements_url": f"{reverse('judgements_csv', kwargs={'slug': slug})}?{query}"})


@login_required
def metrics_table(request: HttpRequest, slug: str) -> HttpResponse:
    """Every imported metric against the humans; computed by a worker, cached until the
    judgements change. While it is computed the page says so and reloads itself."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    sort = request.GET.get("sort", "spa_common")
    if sort not in reports.SORT_KEYS:
        return bad_request(request, f"unknown sort {quoted(sort)}; one of {', '.join(reports.SORT_KEYS)}")
    table = reports.study_metrics_table(study=study)
    if table is None:
        reports.study_metrics_table_request(study=study)
        table = reports.study_metrics_table(study=study)  # ready at once where jobs run inline
    rows = None if table is None else reports.sorted_rows(table["rows"], sort)
    return render(request, "annotation/metrics_table.html", {
        "study": study, "table": table, "rows": rows, "sort": sort,
        "columns": [(key, label) for key, (label, _) in reports.SORT_KEYS.items()]})


def help_page(request: HttpRequest) -> HttpResponse:
    """What every measure, status and chart on the researcher screens means."""
    return render(request, "annotation/help.html", {
        "anytime": guarantees.ANYTIME, "per_look": guarantees.PER_LOOK, "planned": guarantees.PLANNED_LOOKS,
        "paper_warning": guarantees.PAPER_POLICY_WARNING,
        # the active design's bar of an ordered claim, as its settings declare it (at a study's defaults)
        "order_bar_factor": ORDER_BAR_FACTOR, "kinds_close_bar_factor": KINDS_CLOSE_BAR_FACTOR,
        "active_defaults": ActiveSettings()})


# Every CSV export is UTF-8 and says so (a spreadsheet otherwise guesses, often cp1252).
CSV_CONTENT_TYPE = "text/csv; charset=utf-8"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@login_or_api_token_required
def crowd_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Every crowd worker's entry with their judgements and own completion code
    (selectors.serving.study_crowd_sessions), to match with the platform's submission list."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    response = HttpResponse(content_type=CSV_CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-crowd.csv"'
    writer = csv.writer(response)
    writer.writerow(selectors.serving.CROWD_SESSION_COLUMNS)
    for row in selectors.serving.study_crowd_sessions(study=study):
        writer.writerow([spreadsheet_safe(int(row[c]) if c == "minimum_met" else row[c])
                         for c in selectors.serving.CROWD_SESSION_COLUMNS])
    return response


def spreadsheet_safe(value):
    """A CSV cell a spreadsheet will not run: text starting like a formula gets a leading '.

    Numbers stay numbers (a -1 preference is data); only text (names, ids) can carry a formula.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class _Echo:
    def write(self, value):
        return value


@login_or_api_token_required
def judgements_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    """Every judgement of the study, canonical order (+1 = first better), as CSV;
    ``?first=A&second=B`` keeps one pair (either order)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    rows = selectors.studies.study_judgements(study=study)
    first, second = request.GET.get("first"), request.GET.get("second")
    if bool(first) != bool(second):
        return bad_request(request, "give both first and second to filter by pair")
    if first:
        rows = rows.filter(Q(comparison__first__name=first, comparison__second__name=second)
                           | Q(comparison__first__name=second, comparison__second__name=first))
    writer = csv.writer(_Echo())
    # a rubric's criteria: value, strength and reason of each, in canonical order like "value"
    criteria = [c.name for c in study_rubric(study)] if is_rubric(study) else []

    def lines():
        # kind and excluded mark the rows the protocol does not count (checks, repeats,
        # excluded workers); "counted" says it in one column.
        yield writer.writerow(["item", "first", "second", "value", "annotator", "platform", "source",
                               "shown_swapped", "seconds_on_task", "server_seconds", "kind", "excluded", "counted",
                               "created_at", "read_seconds",
                               *(f"{name}{part}" for name in criteria for part in ("", "_strength", "_reason"))])
        # Tuples, not model instances: a row costs a fifth (an export of 66,000 judgements at 50 systems).
        for (item, first_name, second_name, value, annotator, platform, source, swapped, seconds_on_task,
             server_seconds, kind, excluded, created_at, read_seconds, answers) in rows.values_list(
                "comparison__item__external_id", "comparison__first__name", "comparison__second__name", "value",
                "annotator__external_id", "annotator__platform", "source", "assignment__shown_swapped",
                "seconds_on_task", "server_seconds", "kind", "excluded", "created_at", "read_seconds",
                "answers").iterator():
            answers = answers or {}
            yield writer.writerow([spreadsheet_safe(v) for v in (
                item, first_name, second_name, value, annotator, platform, source,
                "" if swapped is None else int(swapped),
                "" if seconds_on_task is None else seconds_on_task,
                "" if server_seconds is None else round(server_seconds, 3), kind, int(excluded),
                int(kind == "real" and not excluded), created_at.isoformat(),
                "" if read_seconds is None else round(read_seconds, 3),
                *(answers.get(name, {}).get(part, "") for name in criteria for part in ("value", "strength", "reason")))])

    response = StreamingHttpResponse(lines(), content_type=CSV_CONTENT_TYPE)
    suffix = f"-{first}-{second}" if first else ""
    response["Content-Disposition"] = f'attachment; filename="{study.slug}{suffix}-judgements.csv"'
    return response


@login_or_api_token_required
def decisions_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The protocol state of every pair (decision, θ, judgements, status) as CSV."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    data = reports.study_dashboard(study=study)
    response = HttpResponse(content_type=CSV_CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-decisions.csv"'
    writer = csv.writer(response)
    fields = ["first", "second", "status", "decision", "theta", "round", "judgements", "capacity", "favi", "agreement",
              "fragility", "fragility_share", "fragile", *selectors.fragility.NO_CLAIM]
    # the active design's neighbour claims on the rows of their pairs (selectors/fragility.py)
    claims = selectors.fragility.pair_order_claims(data["ranking"])
    # Every row names the rule its decision was made with and what that guarantees (and the
    # paper policy's measured false-decision rate when it is in use), so a decision read on
    # its own in a spreadsheet still carries its meaning.
    terms = [study.protocol_rule, study.guarantee, study.policy_warning]
    writer.writerow(fields + ["rule", "guarantee", "warning"])
    for p in data["pairs"]:
        p = {**p, **claims.get((p["first"], p["second"]), selectors.fragility.NO_CLAIM)}
        writer.writerow([spreadsheet_safe("" if p[f] is None else p[f]) for f in fields] + terms)
    return response


STYLE_CSV_FIELDS = ("kind", "name", "estimate", "low", "high", "unit", "plain_position", "votes", "chance",
                    "chance_low", "chance_high", "meaning")


@login_or_api_token_required
def style_leaderboard_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The style-controlled leaderboard (selectors/style.py) as CSV: a row per system (its
    Arena-scale rating and interval, its place on the plain leaderboard) and a row per
    covariate (its effect on the log-odds per unit, the chance of winning between equally
    strong systems, the sentence the dashboard shows)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    board = reports.study_dashboard(study=study).get("style_leaderboard")
    response = HttpResponse(content_type=CSV_CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-style-leaderboard.csv"'
    writer = csv.writer(response)
    writer.writerow(STYLE_CSV_FIELDS)
    if not board or not board["available"]:
        return response
    interval = f"{board['level']:.0%} sandwich interval clustered by prompt"
    for r in board["rows"]:
        writer.writerow([spreadsheet_safe(v) for v in (
            "system", r["system"], round(r["rating"], 2), round(r["low"], 2), round(r["high"], 2),
            "arena rating points (1000 = the average system)",
            "" if r["plain_position"] is None else r["plain_position"], r["votes"], "", "", "",
            f"place {r['position']} once style is accounted for; {interval}")])
    for e in board["effects"]:
        writer.writerow([spreadsheet_safe(v) for v in (
            "covariate", e["feature"], round(e["log_odds"], 6), round(e["low"], 6), round(e["high"], 6),
            f"log-odds per {e['unit']}", "", "", round(e["chance"], 4), round(e["chance_low"], 4),
            round(e["chance_high"], 4), e["sentence"])])
    return response


def _draft_settings(request: HttpRequest, study: Study) -> HttpResponse:
    """A draft's settings: its protocol parameters (editable until the launch) and Launch."""
    metrics = list(study.metrics.values_list("name", flat=True))
    action = request.POST.get("action") if request.method == "POST" else None
    form = StudyDraftForm(metrics=metrics, study=study, initial={
        "metric": METRIC_PREFIX + study.metric.name if study.metric_id else HUMAN_ONLY})
    if action == "launch":
        try:
            services.studies.study_launch(study=study)
        except (ValueError, ValidationError) as exc:
            form.add_error(None, exc.messages if isinstance(exc, ValidationError) else str(exc))
        else:
            messages.success(request, "Launched: the protocol has started and the study is served.")
            return redirect("dashboard", slug=study.slug)
    elif action == "draft":
        form = StudyDraftForm(request.POST, metrics=metrics)
        if form.is_valid():
            name = form.chosen_metric()
            try:
                services.studies.study_draft_update(study=study, metric=study.metrics.get(name=name) if name else None,
                                                    changes=form.changes())
            except ValidationError as exc:
                form.add_error(None, exc.messages)
            else:
                messages.success(request, "Draft saved.")
                return redirect("study_settings", slug=study.slug)
    elif action is not None:
        form.add_error(None, "Choose save or launch.")
    return render(request, "annotation/study_settings.html", {
        "study": study, "draft_form": form,
        # Counted from the outputs: a comparison is stored only once it is used (docs/architecture.md).
        "comparisons": sum(selectors.studies.study_pair_item_counts(study=study).values())},
        status=400 if form.errors else 200)


@login_required
def study_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """A study's settings page: a draft's protocol parameters, or what may change while it runs
    (the forms of forms.running_settings_forms, saved together by services.studies.study_settings_update)."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    if study.status == Study.Status.DRAFT and not study.protocol_started:
        return _draft_settings(request, study)
    if request.method == "POST" and request.POST.get("action") in ("draft", "launch"):
        return render(request, "annotation/study_settings.html", {
            "study": study, **running_settings_forms(study),
            "refused": "The study has been launched: its protocol parameters are fixed."}, status=400)
    forms = running_settings_forms(study, request.POST if request.method == "POST" else None)
    if request.method == "POST" and all(form.is_valid() for form in forms.values()):
        try:
            services.studies.study_settings_update(study=study, changes={
                name: value for form in forms.values() for name, value in form.changes().items()})
        except (ValueError, ValidationError) as exc:
            forms["form"].add_error(None, exc.messages if isinstance(exc, ValidationError) else str(exc))
        else:
            messages.success(request, "Settings saved.")
            return redirect("dashboard", slug=slug)
    return render(request, "annotation/study_settings.html", {"study": study, **forms},
                  status=400 if any(form.errors for form in forms.values()) else 200)
