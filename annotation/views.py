"""Thin views: parse the request, call a selector or service, render."""
import io
import logging
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from protocol import tables
from protocol.bundle import BundleError, read_bundle

from . import selectors, services
from .access import access_study_creation
from .forms import (METRIC_PREFIX, MailingPasswordResetForm, MailNotSent, StudyColumnsForm, StudyMetricChoiceForm,
                    StudyUploadForm)


def home(request: HttpRequest) -> HttpResponse:
    studies = list(selectors.studies.study_list_for_home(user=request.user))
    context = {"studies": studies, "polling": any(s.separability_status in ("pending", "running") for s in studies)}
    if request.GET.get("partial") == "study-table":
        return render(request, "annotation/_study_table.html", context)
    return render(request, "annotation/home.html", context)


@login_required
def study_upload(request: HttpRequest) -> HttpResponse:
    """Upload a study in two posts (docs/studies.md): the file is validated and staged, then
    the researcher picks the protocol's metric from the bundle's own metrics (or, explicitly,
    none) and the study is imported; they land on its dashboard. Files that are no bundle
    (tables, tools' outputs: protocol/tables.py) first go through a column step that shows the
    detected roles and the first rows."""
    access_study_creation(request.user)
    if request.method != "POST":
        return render(request, "annotation/study_upload.html", {"form": StudyUploadForm()})
    if "staged" in request.POST:
        return _upload_choose_metric(request)
    if "staged_files" in request.POST:
        return _upload_map_columns(request)
    form = StudyUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "annotation/study_upload.html", {"form": form}, status=400)
    uploads_given = form.cleaned_data["bundle"]  # on disk past 2.5 MB (Django's upload handlers)
    if len(uploads_given) > 1 or not tables.is_bundle(uploads_given[0]):
        return _upload_files(request, form, uploads_given)
    upload = uploads_given[0]
    try:
        bundle = read_bundle(upload, limits=services.studies.bundle_limits())
    except BundleError as exc:
        return _upload_refused(request, {"form": form}, exc)
    return _upload_staged(request, bundle, upload, upload.name, form.cleaned_data["slug"])


def _upload_refused(request: HttpRequest, context: dict, exc: BundleError) -> HttpResponse:
    return render(request, "annotation/study_upload.html", {
        **context, "problems": [str(p) for p in exc.problems], "problem_total": exc.total}, status=400)


def _upload_staged(request: HttpRequest, bundle, source, file_name: str, slug: str | None,
                   context: dict | None = None) -> HttpResponse:
    """Stage a valid bundle and show the metric step."""
    try:
        slug = services.studies.study_slug_for(name=bundle.study["name"], slug=slug or None)
    except BundleError as exc:
        return _upload_refused(request, context or {"form": StudyUploadForm()}, exc)
    summary = services.uploads.bundle_summary(bundle)
    token = services.uploads.staged_upload_create(source=source, summary=summary, user=request.user)
    bundle_metric = summary["bundle_metric"]
    choice = StudyMetricChoiceForm(metrics=summary["metrics"], initial={
        "staged": token, "slug": slug, "metric": METRIC_PREFIX + bundle_metric if bundle_metric else ""})
    return render(request, "annotation/study_upload.html", {"choice": choice, "summary": summary,
                                                            "file_name": file_name})


def _columns_context(files: list, token: str, form_data=None, slug: str = "") -> dict:
    """The column step's page: what the files are, their columns' detected roles, first rows."""
    records = tables.read_files(files)
    sniffed = tables.sniff(records)
    detected = dict(sniffed.columns)
    name = Path(files[0][0]).name.split(".")[0] or "Imported study"
    form = StudyColumnsForm(form_data, columns=[c for c, _ in sniffed.columns], detected=detected,
                            table=sniffed.kind == tables.TABLE,
                            initial={"staged_files": token, "name": name, "compute": []})
    return {"columns_form": form, "sniffed": sniffed, "file_names": [n for n, _ in files], "slug": slug}


def _upload_files(request: HttpRequest, form: StudyUploadForm, given: list) -> HttpResponse:
    """Files that are no bundle: read them (every problem named), stage them, show the column step."""
    files = [(upload.name, upload) for upload in given]
    try:
        context = _columns_context(files, "")
    except BundleError as exc:
        return _upload_refused(request, {"form": form}, exc)
    token = services.uploads.staged_files_create(files=files, user=request.user)
    context["columns_form"].initial["staged_files"] = token
    context["slug"] = form.cleaned_data["slug"] or ""
    return render(request, "annotation/study_upload.html", context)


def _upload_map_columns(request: HttpRequest) -> HttpResponse:
    """The column step's post: the files read with the mapping (and metrics computed) into a
    bundle, validated, staged; then the metric step."""
    token = request.POST.get("staged_files", "")
    files = services.uploads.staged_files_get(token=token, user=request.user)
    if files is None:
        return _upload_gone(request, "These files expired or were imported already: choose them again.")
    slug = request.POST.get("slug", "")
    context = _columns_context(files, token, request.POST, slug)
    form = context["columns_form"]
    if not form.is_valid():
        return render(request, "annotation/study_upload.html", context, status=400)
    try:
        source = tables.import_source(files, columns=form.mapping() or None, name=form.cleaned_data["name"],
                                      text_format=form.cleaned_data["text_format"] or None,
                                      compute=form.cleaned_data["compute"])
        bundle = read_bundle(source, limits=services.studies.bundle_limits())
    except BundleError as exc:
        return _upload_refused(request, context, exc)
    response = _upload_staged(request, bundle, io.BytesIO(source), ", ".join(n for n, _ in files), slug, context)
    if response.status_code == 200:
        services.uploads.staged_files_discard(token=token, user=request.user)
    return response


def _upload_gone(request: HttpRequest, problem: str) -> HttpResponse:
    """A later step's post whose staged files are gone: the first step again, saying so."""
    return render(request, "annotation/study_upload.html", {
        "form": StudyUploadForm(), "problem_total": 1, "problems": [problem]}, status=400)


def _upload_choose_metric(request: HttpRequest) -> HttpResponse:
    token = request.POST.get("staged", "")
    staged = services.uploads.staged_upload_get(token=token, user=request.user)
    if staged is None:
        return _upload_gone(request, "This upload expired or was imported already: choose the file again.")
    path, summary = staged
    choice = StudyMetricChoiceForm(request.POST, metrics=summary["metrics"])
    context = {"choice": choice, "summary": summary}
    if not choice.is_valid():
        return render(request, "annotation/study_upload.html", context, status=400)
    as_draft = request.POST.get("start") == "draft"
    try:
        study = services.studies.study_import(source=path, slug=choice.cleaned_data["slug"] or None,
                                              metric=choice.chosen_metric(), created_by=request.user,
                                              start=not as_draft)
    except BundleError as exc:
        return _upload_refused(request, context, exc)
    services.uploads.staged_upload_discard(token=token, user=request.user)
    metric = f"metric {study.metric.name}" if study.metric_id else "no metric (human-only)"
    imported = f"Imported study {study.name}: {summary['items']} items, {summary['comparisons']} comparisons, {metric}."
    if as_draft:
        messages.success(request, f"{imported} Saved as a draft: set its protocol parameters, then launch it.")
        return redirect("study_settings", slug=study.slug)
    messages.success(request, f"{imported} The protocol has started.")
    return redirect("dashboard", slug=study.slug)


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request: HttpRequest) -> HttpResponse:
    """Create (replacing the old one) or revoke the caller's API token; the key is shown once."""
    new_key = None
    if request.method == "POST":
        if request.POST.get("action") == "create":
            new_key = services.studies.api_token_create(user=request.user).key
        elif request.POST.get("action") == "revoke":
            services.studies.api_token_revoke(user=request.user)
            messages.success(request, "API token revoked: requests with it are refused from now on.")
            return redirect("api_token")
        else:
            return render(request, "annotation/api_token.html", {"error": "Choose create or revoke."}, status=400)
    token = Token.objects.filter(user=request.user).first()
    return render(request, "annotation/api_token.html", {"token": token, "new_key": new_key})


logger = logging.getLogger(__name__)


class _PasswordResetView(auth_views.PasswordResetView):
    form_class = MailingPasswordResetForm

    def form_valid(self, form):
        try:
            return super().form_valid(form)
        except MailNotSent as exc:
            logger.error("password reset mail not sent: %s", exc)
            return render(self.request, "registration/password_reset_unavailable.html", {"failed": True},
                          status=503)


def password_reset(request: HttpRequest) -> HttpResponse:
    """Django's password reset, when there is a mail server (settings.EVALAPP_PASSWORD_RESET_BY_MAIL)
    and the mail goes out; otherwise a page that says so and names the other way in."""
    if not settings.EVALAPP_PASSWORD_RESET_BY_MAIL:
        return render(request, "registration/password_reset_unavailable.html", {"failed": False}, status=503)
    return _PasswordResetView.as_view()(request)
