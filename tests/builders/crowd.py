"""The serving loop over HTTP: a crowd worker's start link, HITs served and answered through the pages."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from annotation.models import Assignment, Comparison
from annotation.services.studies import study_import
from tests.builders.bundles import QUALITY, bundle_bytes, crowd_rows


def start_worker(client, slug, pid):
    response = client.get(f"/s/{slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID=y")
    assert response.status_code == 302 and response["Location"] == f"/s/{slug}/annotate/"


def current_hit(client, slug):
    """The annotate page's HIT; on the "ready" screen, press its button first (htmx does on load)."""
    response = client.get(f"/s/{slug}/annotate/")
    assert response.status_code == 200
    if response.context.get("screen") == "ready":
        assert client.post(f"/s/{slug}/next/").status_code in (200, 302)
        response = client.get(f"/s/{slug}/annotate/")
    context = response.context
    return context.get("assignment"), context


def served_hits(client, slug, at_most):
    """The worker's HITs one after another, as ``current_hit`` gives them (the caller answers
    each), until none is left or ``at_most`` were served."""
    for _ in range(at_most):
        assignment, context = current_hit(client, slug)
        if assignment is None:
            return
        yield assignment, context


def answer_truthfully(client, slug, at_most) -> None:
    """Answer the worker's HITs as ``truthful_answer`` does, one after another (``served_hits``)."""
    for assignment, context in served_hits(client, slug, at_most):
        client.post(f"/s/{slug}/hits/{assignment.pk}/",
                    {"answer": truthful_answer(context["left"], context["right"]), "key": context["key"]})


def truthful_answer(page_left: str, page_right: str) -> str:
    """The answer QUALITY gives for the two texts a crowd_rows HIT shows."""
    left, right = page_left.split()[0], page_right.split()[0]
    diff = QUALITY[left] - QUALITY[right]
    return "tie" if abs(diff) < 0.5 else ("left" if diff > 0 else "right")


def expire(assignment) -> None:
    """Move a lease's expiry into the past (its assignment and its comparison's copy)."""
    past = timezone.now() - timedelta(seconds=1)
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=past)
    Comparison.objects.filter(pk=assignment.comparison_id).update(lease_expires_at=past)


def judged_crowd_study(client, budget=60):
    """The crowd study of test_serving after truthful annotators spent its budget (A > B ~ C)."""
    rows = crowd_rows(batch=5, budget=budget)
    rows[0].update(allocation_policy="paper", protocol_rule="bayes")  # every pair takes rounds of 5
    study = study_import(source=bundle_bytes(rows))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-judged")
    answer_truthfully(worker, study.slug, budget)
    return study
