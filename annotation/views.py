"""Thin views: parse the request, call a selector or service, render."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from protocol.bundle import BundleError

from . import selectors, services
from .access import access_study_creation
from .forms import StudyUploadForm


def home(request: HttpRequest) -> HttpResponse:
    studies = list(selectors.study_list_for_home(user=request.user))
    context = {"studies": studies, "polling": any(s.separability_status in ("pending", "running") for s in studies)}
    if request.GET.get("partial") == "study-table":
        return render(request, "annotation/_study_table.html", context)
    return render(request, "annotation/home.html", context)


@login_required
def study_upload(request: HttpRequest) -> HttpResponse:
    access_study_creation(request.user)
    context: dict = {}
    if request.method == "POST":
        form = StudyUploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                study = services.study_import(
                    source=form.cleaned_data["bundle"].file,
                    slug=form.cleaned_data["slug"] or None,
                    metric=form.cleaned_data["metric"] or None,
                    created_by=request.user,
                )
            except BundleError as exc:
                context = {"problems": [str(p) for p in exc.problems], "problem_total": exc.total}
            else:
                messages.success(request, f"Imported study {study.name} ({study.items.count()} items).")
                return redirect("home")
    else:
        form = StudyUploadForm()
    status = 400 if context.get("problems") else 200
    return render(request, "annotation/study_upload.html", {"form": form, **context}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request: HttpRequest) -> HttpResponse:
    """Create (replacing the old one) or revoke the caller's API token; the key is shown once."""
    new_key = None
    if request.method == "POST":
        if request.POST.get("action") == "create":
            new_key = services.api_token_create(user=request.user).key
        elif request.POST.get("action") == "revoke":
            services.api_token_revoke(user=request.user)
            messages.success(request, "API token revoked: requests with it are refused from now on.")
            return redirect("api_token")
        else:
            return render(request, "annotation/api_token.html", {"error": "Choose create or revoke."}, status=400)
    token = Token.objects.filter(user=request.user).first()
    return render(request, "annotation/api_token.html", {"token": token, "new_key": new_key})
