"""Crowd workers' identity: a platform worker id bound to the platform session of its first entry."""
from __future__ import annotations

from django.db import transaction

from ..errors import CrowdEntryRefused, CrowdSessionTaken, HitError
from ..models import Annotator, CrowdSession, Study
from .hits import annotator_for_worker


def crowd_session_enter(*, study: Study, platform: str, worker_id: str, platform_session_id: str) -> Annotator:
    """The Annotator of a crowd worker entering ``study``, bound to ``platform_session_id``.

    The first entry of a worker id binds it to the platform's session id; later entries must
    carry the same one (a reload, another browser of the same session), else CrowdSessionTaken.
    CrowdEntryRefused (a ValueError) for a missing worker or session id.
    """
    platform_session_id = (platform_session_id or "").strip()
    if not platform_session_id or len(platform_session_id) > 200:
        name = "assignmentId" if platform == Annotator.Platform.MTURK else "SESSION_ID"
        raise CrowdEntryRefused(f"the study link lacks the platform's session id ({name})")
    with transaction.atomic():
        try:
            annotator = annotator_for_worker(platform=platform, worker_id=worker_id)
        except HitError as exc:
            raise CrowdEntryRefused(str(exc)) from exc
        session, _ = CrowdSession.objects.get_or_create(study=study, annotator=annotator,
                                                        defaults={"platform_session_id": platform_session_id})
    if session.platform_session_id != platform_session_id:
        raise CrowdSessionTaken("this worker id already started this study in another session")
    return annotator
