"""The planner screens: a plan request runs as a job (inline in the tests) and its page shows
the progress, then the expected outcome of every grid point."""
import random
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import PlanJob
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from annotation.services.planner import plan_job_create
from protocol.bundle import read_bundle
from protocol.plan import DEFAULT_ASSUMPTIONS, Assumptions, GridPoint, grid_of, hours_to_finish, plan
from protocol.preferences import human_labels, metric_labels
from tests.builders.bundles import QUALITY, bundle_bytes, crowd_rows
from tests.builders.clients import planner_form_data

pytestmark = pytest.mark.django_db(transaction=True)
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


@pytest.fixture
def researcher(client):
    rows = crowd_rows(items=20)
    study = study_import(source=bundle_bytes(rows), slug="plan-me")
    user = User.objects.create_user("planner-researcher", password="pw-planner-1234")
    study_membership_set(study=study, user=user, role="researcher")
    client.force_login(user)
    return client, study, rows


def test_a_plan_runs_as_a_job_and_its_page_shows_the_protocol_replayed_on_the_study(researcher):
    client, study, rows = researcher
    response = client.post(f"/s/{study.slug}/plan/", planner_form_data())
    job = PlanJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/s/{study.slug}/plan/{job.pk}/"
    assert job.status == PlanJob.Status.DONE and job.done == job.total == 7  # 1 + 2 x 3 scenarios, 1 rep
    # The same plan computed directly from the study's bundle: the job passed the study's data on.
    bundle = read_bundle(bundle_bytes(rows))
    stated = {"metric_error": 0.3, "tie_rate": 0.2, "spread": 0.8, "metric_error_range": [0.2, 0.4],
              "tie_rate_range": [0.1, 0.3], "spread_range": [0.5, 1.2]}
    direct = plan(metric_labels(bundle, "m"), human_labels(bundle), grid=[GridPoint(None, 5, 0.05)], reps=1,
                  assumptions=Assumptions.from_dict(stated), seed=study.protocol_seed,
                  policy="paper", rule=study.protocol_rule)
    (row,) = job.result["plans"]
    assert row["expected_annotations"] == direct.plans[0].expected_annotations
    assert row["interval"] == list(direct.plans[0].interval)
    assert job.result["assumptions"]["source"] == "edited"
    page = client.get(f"/s/{study.slug}/plan/{job.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="plan-results"' in html and "hx-trigger" not in html and "refresh" not in html
    assert f"{row['expected_annotations']:.0f} <span class=\"muted\">of {len(QUALITY) * (len(QUALITY) - 1) // 2 * 20}" in html
    hours = hours_to_finish(row["expected_annotations"], 30)
    assert f"{hours:.1f} h" in html
    # the planner page lists the job
    assert f"/s/{study.slug}/plan/{job.pk}/" in client.get(f"/s/{study.slug}/plan/").content.decode()


def test_without_human_labels_using_them_falls_back_to_the_stated_assumptions(researcher):
    client, study, _ = researcher
    client.post(f"/s/{study.slug}/plan/", planner_form_data(use_human="on"))
    job = PlanJob.objects.get()
    assert job.params["use_human"] is True
    assert job.result["assumptions"]["source"] == "edited" and job.result["assumptions"]["spread"] == 0.8


def test_with_human_labels_the_assumptions_are_fitted_from_them(client):
    rows = crowd_rows(items=20)
    rng = random.Random(2)
    names = sorted(QUALITY)
    rows += [{"kind": "human_preference", "item": f"i{n:02d}", "first": a, "second": b, "annotator": "w1",
              "preference": rng.choice([1, 1, 0, -1]) if QUALITY[a] > QUALITY[b] else rng.choice([-1, -1, 0, 1])}
             for n in range(10) for i, a in enumerate(names) for b in names[i + 1:]]
    study = study_import(source=bundle_bytes(rows), slug="with-humans")
    job = plan_job_create(study=study, user=None, use_human=True, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                          budgets=[None], batches=[5], gammas=[0.05], reps=1, policy="paper", throughput=60)
    job.refresh_from_db()
    assert job.status == PlanJob.Status.DONE
    assert job.result["assumptions"]["source"] == "human labels"
    assert job.result["pairs_with_human_labels"] == 0  # half the items judged: simulated for all pairs
    # the same study planned as before a launch: every annotator simulated from the stated values
    job = plan_job_create(study=study, user=None, use_human=False, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                          budgets=[None], batches=[5], gammas=[0.05], reps=1, policy="paper", throughput=60)
    job.refresh_from_db()
    assert job.result["assumptions"] == {**DEFAULT_ASSUMPTIONS.to_dict(), "source": "edited"}


def test_a_running_job_shows_its_progress_and_polls_with_and_without_javascript(researcher):
    client, study, _ = researcher
    job = PlanJob.objects.create(study=study, params={"budgets": [None], "batches": [5], "gammas": [0.05], "reps": 1,
                                                      "policy": "paper", "throughput": 10, "use_human": True,
                                                      "assumptions": DEFAULT_ASSUMPTIONS.to_dict()},
                                 status=PlanJob.Status.RUNNING, done=3, total=7)
    html = client.get(f"/s/{study.slug}/plan/{job.pk}/").content.decode()
    assert '<progress id="plan-progress" max="7" value="3">' in html
    assert "3 of 7 replays (42 %)" in html
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html
    assert f'hx-get="/s/{study.slug}/plan/{job.pk}/" hx-trigger="every 1s"' in html
    partial = client.get(f"/s/{study.slug}/plan/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="plan-job"') and "<html" not in partial
    PlanJob.objects.filter(pk=job.pk).update(status=PlanJob.Status.FAILED, error="the study has no metric")
    html = client.get(f"/s/{study.slug}/plan/{job.pk}/").content.decode()
    assert "the study has no metric" in html and "hx-trigger" not in html


def test_reading_the_planner_pages_writes_nothing(researcher):
    client, study, _ = researcher
    client.post(f"/s/{study.slug}/plan/", planner_form_data())
    job = PlanJob.objects.get()
    for url in (f"/s/{study.slug}/plan/", f"/s/{study.slug}/plan/{job.pk}/"):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        assert [q["sql"] for q in captured.captured_queries if WRITE.match(q["sql"])] == [], url


@pytest.mark.parametrize("changes, message", [
    ({"batches": "5, x"}, "batch size: &#x27;x&#x27; is not a number"),
    ({"gammas": "1.5"}, "γ must lie strictly between 0 and 1"),
    ({"spread": "2.0"}, "must lie between its low (0.5) and high (1.2)"),
    ({"budgets": "100, 200, 300, all", "batches": "5, 10", "gammas": "0.05, 0.1"}, "16 grid points; at most 12"),
    ({"throughput": "0"}, "Ensure this value is greater than or equal to 0.001"),
])
def test_a_bad_plan_request_is_refused_with_its_reason(researcher, changes, message):
    client, study, _ = researcher
    response = client.post(f"/s/{study.slug}/plan/", planner_form_data(**changes))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not PlanJob.objects.exists()


def test_a_study_without_a_metric_cannot_be_planned(client):
    rows = crowd_rows(items=5)
    rows[0] = {k: v for k, v in rows[0].items() if k != "metric"}
    study = study_import(source=bundle_bytes(rows), slug="no-metric")
    assert study.metric is None
    with pytest.raises(ValueError, match="no metric"):
        plan_job_create(study=study, user=None, use_human=True, assumptions=DEFAULT_ASSUMPTIONS.to_dict(),
                        budgets=[None], batches=[5], gammas=[0.05], reps=1, policy="paper", throughput=60)


def test_the_dashboard_links_to_the_planner(researcher):
    client, study, _ = researcher
    assert f'href="/s/{study.slug}/plan/"' in client.get(f"/s/{study.slug}/dashboard/").content.decode()


def test_the_sweep_resumes_a_plan_whose_process_ended_and_gives_up_after_three_runs(researcher):
    """A job left "running" by a process that died (no heartbeat for 5 minutes) is run again by
    the periodic sweep; one that keeps dying is marked failed with the reason."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.services import runtime
    from annotation.services.planner import PLAN_MAX_ATTEMPTS

    client, study, _ = researcher
    client.post(f"/s/{study.slug}/plan/", planner_form_data())
    finished = PlanJob.objects.get()
    params = finished.params
    long_ago = timezone.now() - timedelta(minutes=6)
    lost = PlanJob.objects.create(study=study, params=params, status=PlanJob.Status.RUNNING, done=2, total=7,
                                  attempts=1, heartbeat_at=long_ago)
    recent = PlanJob.objects.create(study=study, params=params, status=PlanJob.Status.RUNNING, done=2, total=7,
                                    attempts=1, heartbeat_at=timezone.now())
    dying = PlanJob.objects.create(study=study, params=params, status=PlanJob.Status.RUNNING, done=2, total=7,
                                   attempts=PLAN_MAX_ATTEMPTS, heartbeat_at=long_ago)
    assert runtime.protocol_sweep()["plans_resumed"] == 1
    lost.refresh_from_db(), recent.refresh_from_db(), dying.refresh_from_db()
    assert lost.status == PlanJob.Status.DONE and lost.result == finished.result and lost.attempts == 2
    assert recent.status == PlanJob.Status.RUNNING  # still alive: left alone
    assert dying.status == PlanJob.Status.FAILED and "stopped 3 times" in dying.error


def test_a_plan_replays_the_studys_futility_levels_and_combined_metrics(client):
    """Issue 38: the study's futility level and combined metrics are protocol settings, so its
    plan replays them: by default at the study's level, or at several levels side by side (labels
    against correctness), with the further metric combined with the study's through the
    cross-fitted calibration; each row is the protocol.plan replay with those settings, and the
    page shows the level of each row and what was combined."""
    rows = crowd_rows(items=20)
    rng = random.Random(5)
    rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "m2",
              "score": QUALITY[s] + rng.gauss(0, 0.3)} for n in range(20) for s in QUALITY]
    rows[0].update(futility=0.15, combined_metrics="m2", futility_prior=False)
    study = study_import(source=bundle_bytes(rows), slug="plan-futility")
    user = User.objects.create_user("planner-futility", password="pw-planner-1234")
    study_membership_set(study=study, user=user, role="researcher")
    client.force_login(user)
    assert 'name="futilities" value="0.15"' in client.get(f"/s/{study.slug}/plan/").content.decode()
    assert client.post(f"/s/{study.slug}/plan/", planner_form_data(futilities="0.05, 0.7")).status_code == 400
    client.post(f"/s/{study.slug}/plan/", planner_form_data(policy="adaptive", futilities="0.05, 0.15"))
    job = PlanJob.objects.get()
    assert job.status == PlanJob.Status.DONE, job.error
    assert (job.params["futilities"], job.params["combined"]) == ([0.05, 0.15], ["m2"])
    # and whether the study gives near-ties up by the metric's level (here not: the plan neither)
    assert job.params["futility_prior"] is False
    bundle = read_bundle(bundle_bytes(rows))
    stated = Assumptions.from_dict({"metric_error": 0.3, "tie_rate": 0.2, "spread": 0.8,
                                    "metric_error_range": [0.2, 0.4], "tie_rate_range": [0.1, 0.3],
                                    "spread_range": [0.5, 1.2]})
    direct = plan(metric_labels(bundle, "m"), {}, grid=grid_of([None], [5], [0.05], [0.05, 0.15]), reps=1,
                  assumptions=stated, seed=study.protocol_seed, policy="adaptive", rule=study.protocol_rule,
                  extra_metrics=[metric_labels(bundle, "m2")], futility_prior=False)
    assert [(r["futility"], r["expected_annotations"], r["expected_correct"]) for r in job.result["plans"]] == [
        (p.futility, p.expected_annotations, p.expected_correct) for p in direct.plans]
    html = client.get(f"/s/{study.slug}/plan/{job.pk}/").content.decode()
    assert "<th>futility</th>" in html and "combined with m2" in html
    # without levels asked for: the study's own
    job = plan_job_create(study=study, user=None, use_human=False, assumptions=stated.to_dict(), budgets=[None],
                          batches=[5], gammas=[0.05], reps=1, policy="adaptive", throughput=60)
    job.refresh_from_db()
    assert job.params["futilities"] == [0.15] and job.result["plans"][0]["futility"] == 0.15
