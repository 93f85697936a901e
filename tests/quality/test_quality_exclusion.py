"""Issue 11: a spammer among honest annotators is flagged, excluded by a study rule, the
affected pairs are re-decided, and the decisions equal those of the same run without them."""
import random

import pytest

from annotation import selectors
from annotation.models import ExclusionEvent, PairState, Study
from annotation.services import hits
from annotation import jobs
from annotation.serving import protocol_state
from annotation.services import quality, runtime
from annotation.services.studies import study_import
from tests.builders.annotating import workers_of
from tests.builders.spam import HONEST, annotate_with_spammer, spam_bundle

pytestmark = pytest.mark.django_db(transaction=True)


def thetas(study: Study) -> dict:
    return dict(((a, b), round(t or 0.0, 6)) for a, b, t in PairState.objects.filter(study=study).values_list(
        "first__name", "second__name", "theta"))


def decisions(study: Study) -> dict:
    return {(r.first.name, r.second.name): (r.decision, r.status)
            for r in PairState.objects.filter(study=study).select_related("first", "second")}


def test_spammer_is_flagged_excluded_and_the_redecided_run_equals_the_run_without_them():
    # The same run without the spammer (same spam_bundle, same protocol seed).
    clean = study_import(source=spam_bundle("clean"))
    annotate_with_spammer(clean, workers_of(HONEST), random.Random(1), spammer=None)
    expected = decisions(clean)
    assert expected[("C", "D")][0] == 0 and all(d == 1 for k, (d, _) in expected.items() if k != ("C", "D"))

    study = study_import(source=spam_bundle("spammed"))
    workers = workers_of(HONEST + ["spammer"])
    annotate_with_spammer(study, workers, random.Random(1), spammer="spammer")
    spammer = workers["spammer"]
    spam_count = selectors.quality.counted_judgements(study=study).filter(annotator=spammer).count()
    assert spam_count >= 10  # the spammer's answers were counted before the exclusion
    # ... and moved the protocol: some pair's θ differs from the clean run's.
    assert thetas(study) != thetas(clean)

    table = {r["annotator"]: r for r in selectors.quality.study_annotator_quality(study=study)}
    assert "too_fast" in table["spammer"]["flags"]
    assert table["spammer"]["median_seconds"] < 1.0
    assert not any(table[h]["flags"] for h in HONEST), {h: table[h]["flags"] for h in HONEST}

    # The study rule excludes the flagged worker; the sweep runs it off the request path and the
    # re-decision follows.
    Study.objects.filter(pk=study.pk).update(exclude_too_fast=True)
    swept = runtime.protocol_sweep()
    assert swept["workers_excluded"] == 1
    study.refresh_from_db()
    assert study.exclusions_active == 1 and not runtime.redecide_pending(study)
    assert study.protocol_lost_judgements == spam_count
    assert selectors.quality.counted_judgements(study=study).filter(annotator=spammer).count() == 0
    assert selectors.studies.study_progress(study=study)["lost_judgements"] == spam_count
    event = ExclusionEvent.objects.get(study=study)
    assert (event.action, event.rule, event.user, event.judgements) == ("exclude", "too_fast", None, spam_count)
    assert hits.hit_next_for_annotator(study=study, annotator=spammer) is None
    audit = selectors.serving.study_serving_audit(study=study)
    assert audit["protocol_consistent"] and audit["counters_consistent"], audit["problems"]

    # Pairs no longer decided reopened; the honest workers finish the study.
    annotate_with_spammer(study, workers_of(HONEST), random.Random(2), spammer=None)
    assert {k: d for k, (d, _) in decisions(study).items()} == {k: d for k, (d, _) in expected.items()}
    audit = selectors.serving.study_serving_audit(study=study)
    assert audit["protocol_consistent"] and audit["counters_consistent"], audit["problems"]


def test_reinclusion_restores_the_judgements_and_is_audit_logged(django_user_model):
    study = study_import(source=spam_bundle("toggle", items=10))
    workers = workers_of(HONEST[:2] + ["spammer"])
    annotate_with_spammer(study, workers, random.Random(3), spammer="spammer")
    spammer = workers["spammer"]
    counted_before = selectors.quality.counted_judgements(study=study).count()
    spam_count = selectors.quality.counted_judgements(study=study).filter(annotator=spammer).count()
    researcher = django_user_model.objects.create_user("res", password="x")

    assert quality.annotator_exclude(study=study, annotator=spammer, user=researcher, reason="random answers")
    assert not quality.annotator_exclude(study=study, annotator=spammer, user=researcher)  # already excluded
    study.refresh_from_db()
    assert study.protocol_lost_judgements == spam_count
    assert selectors.quality.counted_judgements(study=study).count() == counted_before - spam_count
    pairs = {p.key: p for p in protocol_state.study_state_load(
        study, PairState.objects.filter(study=study)).pairs}
    assert sum(p.judgements for p in pairs.values()) == counted_before - spam_count

    assert quality.annotator_include(study=study, annotator=spammer, user=researcher, reason="checked by hand")
    study.refresh_from_db()
    assert (study.protocol_lost_judgements, study.exclusions_active) == (0, 0)
    assert selectors.quality.counted_judgements(study=study).count() == counted_before
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    assert state.spent == counted_before
    log = list(ExclusionEvent.objects.filter(study=study).order_by("id").values_list("action", "user__username",
                                                                                      "reason"))
    assert log == [("exclude", "res", "random answers"), ("include", "res", "checked by hand")]
    audit = selectors.serving.study_serving_audit(study=study)
    assert audit["protocol_consistent"] and audit["counters_consistent"], audit["problems"]
    # A re-included worker is left alone by the rules.
    Study.objects.filter(pk=study.pk).update(exclude_too_fast=True)
    study.refresh_from_db()
    assert quality.exclusion_rules_apply(study=study) == []


def test_the_sweep_finishes_a_lost_redecision_of_a_finished_study(django_user_model, settings):
    """Excluding a worker after the study finished still re-decides its pairs: if the scheduled
    re-decision is lost (here: coalesced into a task that never runs), the sweep does it."""
    from django.core.cache import cache

    study = study_import(source=spam_bundle("finished", items=10))
    workers = workers_of(HONEST[:2] + ["spammer"])
    annotate_with_spammer(study, workers, random.Random(5), spammer="spammer")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.FINISHED)
    study.refresh_from_db()
    researcher = django_user_model.objects.create_user("res-finished", password="x")
    settings.EVALAPP_BACKGROUND_WORK = "celery"
    cache.set(jobs.QUEUED_KEY.format(study.pk), 1, timeout=60)  # a close "already queued": nothing is sent
    assert quality.annotator_exclude(study=study, annotator=workers["spammer"], user=researcher, reason="spam")
    study.refresh_from_db()
    assert runtime.redecide_pending(study)
    settings.EVALAPP_BACKGROUND_WORK = "inline"
    runtime.protocol_sweep()
    study.refresh_from_db()
    assert not runtime.redecide_pending(study)
    state = protocol_state.study_state_load(study, PairState.objects.filter(study=study))
    assert sum(p.judgements for p in state.pairs) == selectors.quality.counted_judgements(study=study).count()
    cache.delete(jobs.QUEUED_KEY.format(study.pk))
