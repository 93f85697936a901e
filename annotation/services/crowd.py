"""Crowd workers' identity: one platform session of a worker id (models.Annotator)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ..errors import CrowdEntryRefused, HitError
from ..models import Annotator, Study
from ..serving import store
from .hits import annotator_for_worker


def crowd_session_enter(*, study: Study, platform: str, worker_id: str, platform_session_id: str,
                        entered: Annotator | None, platform_study_id: str = "") -> Annotator:
    """The Annotator of a crowd worker entering ``study`` from the platform session
    ``platform_session_id``, bound to the study.

    The same worker id and session continue the same work (a reload, another browser); the
    same worker id from another session is another Annotator, so whoever typed a worker's id
    first holds neither the genuine worker's place nor their code. ``platform_study_id``
    (Prolific's STUDY_ID) must be the study's ``prolific_study_id`` when one is set, and a
    study that sets one takes Prolific entries only (the MTurk form of the link is refused).
    CrowdEntryRefused (a ValueError) for a missing worker or session id or another study's link.

    ``entered``: the worker's Annotator if they entered from this session before
    (``selectors.serving.crowd_entry_of``, which the caller reads for its limit on new workers).
    The read need not be in the writes' transaction: each write is an upsert, so two entries of
    one worker at once store one Annotator and one binding (serving/store.py).
    """
    platform_session_id = (platform_session_id or "").strip()
    if not platform_session_id or len(platform_session_id) > 200:
        name = "assignmentId" if platform == Annotator.Platform.MTURK else "SESSION_ID"
        raise CrowdEntryRefused(f"the study link lacks the platform's session id ({name})")
    if study.prolific_study_id and platform != Annotator.Platform.PROLIFIC:
        # Another platform's form of the link would skip the STUDY_ID check below.
        raise CrowdEntryRefused("this study runs on Prolific: please open it from Prolific "
                                "(links of other platforms are refused)")
    if (platform == Annotator.Platform.PROLIFIC and study.prolific_study_id
            and (platform_study_id or "").strip() != study.prolific_study_id):
        raise CrowdEntryRefused("this link's STUDY_ID is not this study's Prolific study: "
                                "please open the study from Prolific")
    if entered is not None:
        return entered
    with transaction.atomic():
        try:
            annotator = annotator_for_worker(platform=platform, worker_id=worker_id,
                                             session_id=platform_session_id)
        except HitError as exc:
            raise CrowdEntryRefused(str(exc)) from exc
        store.crowd_session_bind(study.pk, annotator.pk, platform_session_id, timezone.now())
    return annotator
