"""Every permission check lives here, one helper per question (Zulip's access_* style)."""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from django.core.exceptions import PermissionDenied

RESEARCHER_GROUP = "researchers"


def user_can_create_studies(user) -> bool:
    """Staff and members of the ``researchers`` group may create (upload) studies."""
    if not user.is_authenticated:
        return False
    return user.is_staff or user.groups.filter(name=RESEARCHER_GROUP).exists()


def access_study_creation(user) -> None:
    """Raise PermissionDenied unless ``user`` may create studies."""
    if not user_can_create_studies(user):
        raise PermissionDenied("Only researchers can create studies.")


class StudyRole(NamedTuple):
    annotate: bool   # may open the study's annotate page with their account
    research: bool   # may see its dashboard and settings (and its draft)


def study_roles_for_user(user) -> Callable[[object], StudyRole]:
    """What ``user`` may do in each study, for lists: one query, then ``roles(study)``."""
    from .models import StudyMembership

    if not user.is_authenticated:
        return lambda study: StudyRole(False, False)
    if user.is_staff:
        return lambda study: StudyRole(True, True)
    memberships = dict(StudyMembership.objects.filter(user=user).values_list("study_id", "role"))

    def roles(study) -> StudyRole:
        role = memberships.get(study.pk)
        return StudyRole(role is not None, role == StudyMembership.Role.RESEARCHER)
    return roles


def session_annotator_key(study) -> str:
    return f"evalapp:annotator:{study.pk}"


def access_annotator_for_study(request, study):
    """The Annotator who may work on ``study`` in this request, or PermissionDenied.

    A crowd worker who arrived through the study's start link is remembered in the session;
    a logged-in user needs a membership of the study (annotator or researcher) or staff.
    """
    from .models import Annotator, StudyMembership
    from .services.hits import annotator_for_user

    annotator_id = request.session.get(session_annotator_key(study))
    if annotator_id is not None:
        annotator = Annotator.objects.filter(pk=annotator_id).first()
        if annotator is not None:
            return annotator
    user = request.user
    if user.is_authenticated and (
        user.is_staff or StudyMembership.objects.filter(study=study, user=user).exists()
    ):
        return annotator_for_user(user=user)
    raise PermissionDenied("Open this study through its link, or log in with an account that belongs to it.")


def access_study_running(study) -> None:
    from django.http import Http404

    from .models import Study

    if study.status == Study.Status.DRAFT:
        raise Http404("This study is not open.")


def access_study_as_researcher(user, study) -> None:
    """PermissionDenied unless ``user`` is staff or a researcher of ``study``."""
    from .models import StudyMembership

    if not user.is_authenticated:
        raise PermissionDenied("Log in as a researcher of this study.")
    if user.is_staff:
        return
    if not StudyMembership.objects.filter(study=study, user=user, role=StudyMembership.Role.RESEARCHER).exists():
        raise PermissionDenied("Only the study's researchers can see its dashboard.")
