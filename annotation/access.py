"""Every permission check lives here, one helper per question (Zulip's access_* style)."""
from __future__ import annotations

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
