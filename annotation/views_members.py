"""A study's members page: list, add, invite, change role, remove (researchers and staff)."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.http import require_http_methods

from . import selectors, services
from .access import access_study_members, may_manage_study_members
from .forms import MemberAddForm, MemberChangeForm, MemberInviteForm
from .models import Study


def password_set_url(request: HttpRequest, user) -> str:
    """A one-time link at which ``user`` chooses a password (Django's password-reset confirm
    view; the token stops working once a password is set, or after PASSWORD_RESET_TIMEOUT)."""
    path = reverse("password_reset_confirm", kwargs={
        "uidb64": urlsafe_base64_encode(force_bytes(user.pk)), "token": default_token_generator.make_token(user)})
    return request.build_absolute_uri(path)


def _errors(exc: Exception) -> list[str]:
    return exc.messages if isinstance(exc, ValidationError) else [str(exc)]


@login_required
@require_http_methods(["GET", "POST"])
def study_members(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    access_study_members(request.user, study)
    add, invite, errors, invited = MemberAddForm(), MemberInviteForm(), [], None
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "add":
                add = MemberAddForm(request.POST)
                if add.is_valid():
                    membership = services.members.study_member_add(study=study, **add.cleaned_data)
                    messages.success(request, f"Added {membership.user.username} as {membership.role}.")
                    return redirect("study_members", slug=slug)
            elif action == "invite":
                invite = MemberInviteForm(request.POST)
                if invite.is_valid():
                    user = services.members.study_member_invite(study=study, **invite.cleaned_data)
                    invited = {"user": user, "role": invite.cleaned_data["role"],
                               "link": password_set_url(request, user)}
                    invite = MemberInviteForm()
            elif action in ("role", "remove"):
                change = MemberChangeForm(request.POST)
                if not change.is_valid() or (action == "role" and not change.cleaned_data["role"]):
                    errors.append("Name the member and, to change a role, the new role.")
                else:
                    user = get_object_or_404(get_user_model(), pk=change.cleaned_data["user"],
                                             study_memberships__study=study)
                    if action == "role":
                        services.members.study_membership_set(study=study, user=user, role=change.cleaned_data["role"])
                        messages.success(request, f"{user.username} is now {change.cleaned_data['role']}.")
                    else:
                        services.members.study_membership_remove(study=study, user=user)
                        messages.success(request, f"Removed {user.username} from the study.")
                    if not may_manage_study_members(request.user, study):  # they removed or demoted themselves
                        return redirect("home")
                    return redirect("study_members", slug=slug)
            else:
                errors.append("Choose add, invite, role or remove.")
        except (ValueError, ValidationError) as exc:
            errors.extend(_errors(exc))
    status = 400 if errors or add.errors or invite.errors else 200
    return render(request, "annotation/study_members.html", {
        "study": study, "members": selectors.studies.study_members(study=study), "add": add, "invite": invite,
        "errors": errors, "invited": invited, "reset_days": settings.PASSWORD_RESET_TIMEOUT // 86400, "roles": MemberAddForm.base_fields["role"].choices}, status=status)

