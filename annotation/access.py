"""Every permission question, one helper per question (Zulip's access_* style), for pages and
API alike. Reads only: this module imports no write module (services, serving, tasks).

Who may know that a study exists: staff, its members (researchers and annotators) and the
crowd workers who entered it through its link. Everyone else gets 404 for it, never 403, so
slugs cannot be probed. A caller who may know the study but not do the thing gets 403.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from collections.abc import Callable
from typing import NamedTuple

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from .serving.process_cache import ProcessCache
from .serving.store import crowd_annotator
from .models import Annotator, Assignment, Study, StudyMembership

RESEARCHER_GROUP = "researchers"
NOT_FOUND = "No study with this address."


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
    if not user.is_authenticated:
        return lambda study: StudyRole(False, False)
    if user.is_staff:
        return lambda study: StudyRole(True, True)
    memberships = dict(StudyMembership.objects.filter(user=user).values_list("study_id", "role"))

    def roles(study) -> StudyRole:
        role = memberships.get(study.pk)
        return StudyRole(role is not None, role == StudyMembership.Role.RESEARCHER)
    return roles


SESSION_ANNOTATOR_PREFIX = "evalapp:annotator:"


def session_annotator_key(study) -> str:
    """The session entry holding the Annotator id of a crowd worker who entered ``study``."""
    return f"{SESSION_ANNOTATOR_PREFIX}{study.pk}"


def session_names_a_worker(session) -> bool:
    """Whether a session holds any crowd worker's entry (of any study): whether its requests
    can be counted per annotator (annotation/throttles.py)."""
    return any(key.startswith(SESSION_ANNOTATOR_PREFIX) for key in session.keys())


def _role(user, study) -> str | None:
    if not user.is_authenticated:
        return None
    return StudyMembership.objects.filter(study=study, user=user).values_list("role", flat=True).first()


def study_is_visible(user, study) -> bool:
    """May ``user`` know that ``study`` exists (staff or a member)?"""
    return bool(user.is_authenticated and (user.is_staff or _role(user, study) is not None))


def access_study_visible(user, study) -> None:
    """Http404 unless ``user`` may know that ``study`` exists."""
    if not study_is_visible(user, study):
        raise Http404(NOT_FOUND)


def access_study_as_researcher(user, study) -> None:
    """Staff or a researcher of ``study``; 404 for who may not know it, 403 for its annotators."""
    if not user.is_authenticated:
        raise PermissionDenied("Log in as a researcher of this study.")
    if user.is_staff:
        return
    role = _role(user, study)
    if role is None:
        raise Http404(NOT_FOUND)
    if role != StudyMembership.Role.RESEARCHER:
        raise PermissionDenied("Only the study's researchers can do this.")


def access_study_members(user, study) -> None:
    """Who may see and change ``study``'s members: its researchers and staff (the researcher rule)."""
    access_study_as_researcher(user, study)


def may_manage_study_members(user, study) -> bool:
    """The boolean form of access_study_members (e.g. after a researcher removed themselves)."""
    return bool(user.is_authenticated and (user.is_staff or _role(user, study) == StudyMembership.Role.RESEARCHER))


def studies_for_researcher(user) -> QuerySet[Study]:
    """The studies ``user`` may see as a researcher (all of them for staff)."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    return Study.objects.filter(memberships__user=user, memberships__role=StudyMembership.Role.RESEARCHER)


def studies_visible_to(user) -> QuerySet[Study]:
    """The studies ``user`` may know exist: all for staff, their memberships' otherwise, none anonymous."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    return Study.objects.filter(memberships__user=user)


def access_study_running(study) -> None:
    """A draft study is not open to annotators yet (404: it does not exist for them)."""
    if study.status == Study.Status.DRAFT:
        raise Http404("This study is not open.")


def study_accepts_work(study) -> bool:
    """Is ``study`` leasing new HITs (running, not paused, finished or a draft)?"""
    return study.status == Study.Status.RUNNING


@dataclass(frozen=True)
class StudyWorker:
    """Who annotates in this request: a crowd worker's Annotator, or a logged-in user.

    ``annotator`` is None for a user who has no Annotator row yet; the view then asks the
    write layer for one (serving.annotator_for_user).
    """

    annotator: Annotator | None
    user: object | None

    @property
    def is_crowd(self) -> bool:
        return self.user is None


def access_study_worker(request, study) -> StudyWorker:
    """Who may annotate ``study`` in this request, or an error.

    A crowd worker who entered through the study's start link (bound to their platform
    session, see services.crowd.crowd_session_enter) is remembered in the Django session; a
    logged-in user needs a membership of the study (annotator or researcher) or staff.
    A logged-in user who may not know the study gets 404; an anonymous visitor 403 with
    the way in (the study's link is public to its crowd).
    """
    annotator_id = request.session.get(session_annotator_key(study))
    if annotator_id is not None:
        annotator = _crowd_annotator(annotator_id, study)
        if annotator is not None:
            return StudyWorker(annotator=annotator, user=None)
    user = request.user
    if user.is_authenticated:
        access_study_visible(user, study)
        return StudyWorker(annotator=Annotator.objects.filter(user=user).first(), user=user)
    raise PermissionDenied("Open this study through its link, or log in with an account that belongs to it.")


# A crowd worker of a study, as every request of theirs asks: read once per process (a round
# trip of every serving request on PostgreSQL, docs/serving.md, "Round trips"). What it caches
# never changes: an Annotator row is never updated, and a worker's crowd session in a study
# goes only with the study (the study's created_at in the key: a rolled-back import's ids can
# come back with another study). Only a worker found is kept; each request gets a copy of it.
_crowd_annotators: ProcessCache[Annotator] = ProcessCache(entries_max=4096)


def _crowd_annotator(annotator_id: int, study) -> Annotator | None:
    """The annotator ``annotator_id`` if they entered ``study`` as a crowd worker (cached)."""
    found = _crowd_annotators.get((annotator_id, study.pk, study.created_at),
                                  lambda: crowd_annotator(annotator_id, study.pk))
    return copy.copy(found) if found is not None else None


def crowd_worker_entered(study, annotator: Annotator) -> None:
    """Remember that ``annotator`` entered ``study`` (their crowd session is committed): the
    start link's redirect to the annotate page then reads nothing to know them."""
    _crowd_annotators.get((annotator.pk, study.pk, study.created_at), lambda: copy.copy(annotator))


def access_api_worker(user, study) -> StudyWorker:
    """The API's annotator: a member of ``study`` or staff (404 for anyone else)."""
    access_study_visible(user, study)
    return StudyWorker(annotator=Annotator.objects.filter(user=user).first(), user=user)


def access_hit_of_user(user, assignment: Assignment) -> None:
    """Http404 unless ``assignment`` was leased to ``user`` (another's HIT does not exist for them)."""
    if not user.is_authenticated or assignment.annotator.user_id != user.pk:
        raise Http404("No HIT with this id.")
