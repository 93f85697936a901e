"""Every URL pattern x every kind of caller answers the expected status.

A new URL pattern fails this test until its row is added to EXPECTED, so no view can ship
without someone deciding who may use it. Django admin views are covered by two rows (index
and a changelist): every admin view is wrapped by AdminSite.admin_view, which refuses
anyone but active staff the same way.
"""
import ast
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import URLResolver, get_resolver

from annotation.access import RESEARCHER_GROUP
from annotation.services.members import study_membership_set
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ("anonymous", "crowd_a", "annotator_a", "researcher_a", "researcher_b", "staff")


def row(anonymous, crowd_a, annotator_a, researcher_a, researcher_b, staff):
    return dict(zip(ROLES, (anonymous, crowd_a, annotator_a, researcher_a, researcher_b, staff)))


PUBLIC = row(200, 200, 200, 200, 200, 200)
LOGGED_IN = row(302, 302, 200, 200, 200, 200)
RESEARCHER_PAGE = row(302, 302, 403, 200, 404, 200)
RESEARCHER_API = row(401, 401, 403, 200, 404, 200)
STAFF_ONLY = row(302, 302, 302, 302, 302, 200)

# route pattern -> [(method, path format, data, {role: status})]; {slug}, {hit}, {username} are filled in.
EXPECTED = {
    "admin/login/": [("GET", "/admin/login/", None, row(200, 200, 200, 200, 200, 302))],
    "admin/": [("GET", "/admin/", None, STAFF_ONLY),
               ("GET", "/admin/annotation/study/", None, STAFF_ONLY)],
    "accounts/login/": [("GET", "/accounts/login/", None, PUBLIC)],
    "accounts/logout/": [("GET", "/accounts/logout/", None, row(405, 405, 405, 405, 405, 405))],
    "accounts/password_change/": [("GET", "/accounts/password_change/", None, LOGGED_IN)],
    "accounts/password_change/done/": [("GET", "/accounts/password_change/done/", None, LOGGED_IN)],
    # No mail server in the test settings: the reset page says so to everyone (503).
    "accounts/password_reset/": [("GET", "/accounts/password_reset/", None, row(503, 503, 503, 503, 503, 503))],
    "accounts/password_reset/done/": [("GET", "/accounts/password_reset/done/", None, PUBLIC)],
    "accounts/reset/<uidb64>/<token>/": [("GET", "/accounts/reset/MQ/bad-token/", None, PUBLIC)],
    "accounts/reset/done/": [("GET", "/accounts/reset/done/", None, PUBLIC)],
    "api/schema/": [("GET", "/api/schema/", None, PUBLIC)],
    "api/docs/": [("GET", "/api/docs/", None, PUBLIC)],
    "api/studies/": [("GET", "/api/studies/", None, row(401, 401, 200, 200, 200, 200)),
                     ("POST", "/api/studies/", {}, row(401, 401, 403, 422, 422, 422))],
    "api/studies/<slug:slug>/": [("GET", "/api/studies/{slug}/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/settings/": [("GET", "/api/studies/{slug}/settings/", None, RESEARCHER_API),
                                          ("PATCH", "/api/studies/{slug}/settings/", {}, RESEARCHER_API)],
    "api/studies/<slug:slug>/pairs/": [("GET", "/api/studies/{slug}/pairs/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/decisions/": [("GET", "/api/studies/{slug}/decisions/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/leaderboard/": [("GET", "/api/studies/{slug}/leaderboard/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/leaderboard/style/": [("GET", "/api/studies/{slug}/leaderboard/style/", None,
                                                    RESEARCHER_API)],
    "api/studies/<slug:slug>/judgements/": [("GET", "/api/studies/{slug}/judgements/", None, RESEARCHER_API)],
    # No human labels yet: who may ask gets 409 (nothing to compare), the others as always.
    "api/studies/<slug:slug>/report/": [("GET", "/api/studies/{slug}/report/", None,
                                         row(401, 401, 403, 409, 404, 409))],
    "api/studies/<slug:slug>/export/": [("GET", "/api/studies/{slug}/export/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/judges/": [("GET", "/api/studies/{slug}/judges/", None, RESEARCHER_API)],
    "api/studies/<slug:slug>/members/": [("GET", "/api/studies/{slug}/members/", None, RESEARCHER_API),
                                         ("POST", "/api/studies/{slug}/members/", {},
                                          row(401, 401, 403, 400, 404, 400))],
    # Removing the study's only researcher is refused (409) for those who may remove members.
    "api/studies/<slug:slug>/members/<str:username>/": [
        ("DELETE", "/api/studies/{slug}/members/{username}/", None, row(401, 401, 403, 409, 404, 409))],
    "api/studies/<slug:slug>/hits/next/": [("POST", "/api/studies/{slug}/hits/next/", None,
                                            row(401, 401, 200, 200, 404, 200))],
    # Without an Idempotency-Key: a malformed request for every caller (400), whether the HIT is
    # theirs or not; with one, to anyone but its owner the HIT does not exist.
    "api/hits/<int:hit_id>/submit/": [("POST", "/api/hits/{hit}/submit/", {"answer": "left"},
                                       row(401, 401, 400, 400, 400, 400))],
    "api/^": [("GET", "/api/", None, row(404, 404, 404, 404, 404, 404)),
             ("POST", "/api/hits/x/submit/", {}, row(404, 404, 404, 404, 404, 404))],
    "": [("GET", "/", None, PUBLIC)],
    # Browsers ask pages that link no icon (the admin's) for it: sent to static/favicon.svg.
    "favicon.ico": [("GET", "/favicon.ico", None, row(302, 302, 302, 302, 302, 302))],
    "account/api-token/": [("GET", "/account/api-token/", None, LOGGED_IN)],
    "studies/upload/": [("GET", "/studies/upload/", None, row(302, 302, 403, 200, 200, 200)),
                        # The metric step with an unknown staged upload: refused, nothing imported.
                        ("POST", "/studies/upload/", {"staged": "x" * 43, "metric": "none"},
                         row(302, 302, 403, 400, 400, 400))],
    "s/<slug:slug>/start/": [("GET", "/s/{slug}/start/", None, row(302, 302, 302, 302, 302, 302))],
    # Anonymous visitors without a crowd session are sent to log in first.
    "s/<slug:slug>/annotate/": [("GET", "/s/{slug}/annotate/", None, row(302, 200, 200, 200, 404, 200))],
    # An invalid answer: nothing is stored, whoever may post gets the HIT page back with the error.
    "s/<slug:slug>/hits/<int:assignment_id>/": [("POST", "/s/{slug}/hits/{hit}/", {"answer": "maybe", "key": "k1"},
                                                 row(403, 409, 409, 409, 404, 409))],
    # The page that showed a HIT holds its lease anew (keep) or gives it back (release, with a
    # token that is not the lease's: nothing changes): the HIT's owner only, to anyone else it
    # does not exist.
    "s/<slug:slug>/hits/<int:assignment_id>/keep/": [("POST", "/s/{slug}/hits/{hit}/keep/", {},
                                                      row(403, 404, 200, 404, 404, 404))],
    "s/<slug:slug>/hits/<int:assignment_id>/release/": [("POST", "/s/{slug}/hits/{hit}/release/", {"lease": "x"},
                                                         row(403, 404, 204, 404, 404, 404))],
    # Asking for the next comparison: crowd workers and members get it (or the page), others not.
    "s/<slug:slug>/next/": [("POST", "/s/{slug}/next/", {}, row(403, 302, 302, 302, 404, 302))],
    # The word differences of a HIT: its owner only (to anyone else the HIT does not exist).
    "s/<slug:slug>/hits/<int:assignment_id>/diff/": [("GET", "/s/{slug}/hits/{hit}/diff/", None,
                                                      row(403, 404, 200, 404, 404, 404))],
    "s/<slug:slug>/hits/<int:assignment_id>/skip/": [("POST", "/s/{slug}/hits/{hit}/skip/", {},
                                                      row(403, 404, 302, 404, 404, 404))],
    # An unknown reason: the HIT's owner is told (400), to anyone else the HIT does not exist.
    "s/<slug:slug>/hits/<int:assignment_id>/flag/": [("POST", "/s/{slug}/hits/{hit}/flag/", {"reason": "nonsense"},
                                                      row(403, 404, 400, 404, 404, 404))],
    "s/<slug:slug>/dashboard/": [("GET", "/s/{slug}/dashboard/", None, RESEARCHER_PAGE)],
    # The pair page names its pair in the query string; the metrics table is computed on demand.
    "s/<slug:slug>/pair/": [("GET", "/s/{slug}/pair/?first=A&second=B", None, RESEARCHER_PAGE)],
    # The item reader names its item (any characters) in the query string; i01 is in crowd_rows.
    "s/<slug:slug>/item/": [("GET", "/s/{slug}/item/?item=i01&first=A&second=B", None, RESEARCHER_PAGE)],
    "s/<slug:slug>/items/": [("GET", "/s/{slug}/items/?q=input", None, RESEARCHER_PAGE)],
    "s/<slug:slug>/metrics/": [("GET", "/s/{slug}/metrics/", None, RESEARCHER_PAGE)],
    # The planner: an empty plan request is invalid (400) for who may plan; no job 999999 exists.
    "s/<slug:slug>/plan/": [("GET", "/s/{slug}/plan/", None, RESEARCHER_PAGE),
                            ("POST", "/s/{slug}/plan/", {}, row(302, 302, 403, 400, 404, 400))],
    "s/<slug:slug>/plan/<int:job_id>/": [("GET", "/s/{slug}/plan/999999/", None, row(302, 302, 403, 404, 404, 404))],
    # Judges: an empty run request is invalid (400) for who may run one; no run 999999 exists.
    "s/<slug:slug>/judges/": [("GET", "/s/{slug}/judges/", None, RESEARCHER_PAGE),
                              ("POST", "/s/{slug}/judges/", {}, row(302, 302, 403, 400, 404, 400))],
    "s/<slug:slug>/judges/<int:run_id>/": [
        ("GET", "/s/{slug}/judges/999999/", None, row(302, 302, 403, 404, 404, 404)),
        ("POST", "/s/{slug}/judges/999999/", {}, row(302, 302, 403, 404, 404, 404))],
    "help/": [("GET", "/help/", None, PUBLIC)],
    "s/<slug:slug>/settings/": [("GET", "/s/{slug}/settings/", None, RESEARCHER_PAGE)],
    # Members: researchers of the study and staff; a POST naming no action is refused (400) to them.
    "s/<slug:slug>/members/": [("GET", "/s/{slug}/members/", None, RESEARCHER_PAGE),
                               ("POST", "/s/{slug}/members/", {}, row(302, 302, 403, 400, 404, 400))],
    "s/<slug:slug>/export/judgements.csv": [("GET", "/s/{slug}/export/judgements.csv", None, RESEARCHER_PAGE)],
    "s/<slug:slug>/export/decisions.csv": [("GET", "/s/{slug}/export/decisions.csv", None, RESEARCHER_PAGE)],
    "s/<slug:slug>/export/style-leaderboard.csv": [("GET", "/s/{slug}/export/style-leaderboard.csv", None,
                                                    RESEARCHER_PAGE)],
    "s/<slug:slug>/export/quality.csv": [("GET", "/s/{slug}/export/quality.csv", None, RESEARCHER_PAGE)],
    "s/<slug:slug>/export/crowd.csv": [("GET", "/s/{slug}/export/crowd.csv", None, RESEARCHER_PAGE)],
    # An unknown action: who may exclude workers is told (400), nothing changes.
    "s/<slug:slug>/annotators/<int:annotator_id>/exclusion/": [
        ("POST", "/s/{slug}/annotators/{annotator}/exclusion/", {"action": "nonsense"},
         row(302, 302, 403, 400, 404, 400))],
    "api/studies/<slug:slug>/annotators/": [("GET", "/api/studies/{slug}/annotators/", None, RESEARCHER_API)],
    # Without "excluded": who may exclude gets 400, nothing changes.
    "api/studies/<slug:slug>/annotators/<int:annotator_id>/exclusion/": [
        ("POST", "/api/studies/{slug}/annotators/{annotator}/exclusion/", {}, row(401, 401, 403, 400, 404, 400))],
}


def url_routes():
    """Every route of the URLconf, admin's as its one prefix."""
    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace == "admin":
                    yield prefix + str(p.pattern)
                else:
                    yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern)
    return set(walk(get_resolver().url_patterns, ""))


def test_every_url_pattern_has_expected_statuses():
    missing = url_routes() - set(EXPECTED)
    assert not missing, f"add these routes to EXPECTED (who may use them?): {sorted(missing)}"


@pytest.fixture
def callers():
    researchers = Group.objects.get_or_create(name=RESEARCHER_GROUP)[0]
    users = {}
    for name in ("annotator_a", "researcher_a", "researcher_b", "staff"):
        users[name] = User.objects.create_user(name, password="pw-12345678", is_staff=name == "staff",
                                              is_superuser=name == "staff")
        if name.startswith("researcher"):
            users[name].groups.add(researchers)
    study_a = study_import(source=bundle_bytes(crowd_rows()), slug="study-a", created_by=users["researcher_a"])
    study_import(source=bundle_bytes(crowd_rows()), slug="study-b", created_by=users["researcher_b"])
    study_membership_set(study=study_a, user=users["annotator_a"], role="annotator")
    clients = {role: Client() for role in ROLES}
    for name, user in users.items():
        clients[name].force_login(user)
    assert clients["crowd_a"].get("/s/study-a/start/?PROLIFIC_PID=w1&SESSION_ID=s1").status_code == 302
    assert clients["annotator_a"].post("/s/study-a/next/").status_code == 302  # a member's first HIT
    hit = clients["annotator_a"].get("/s/study-a/annotate/").context["assignment"]
    return clients, {"slug": study_a.slug, "hit": hit.pk, "username": "researcher_a", "annotator": hit.annotator_id}


def test_permission_matrix(callers):
    clients, values = callers
    failures = []
    for route, requests in EXPECTED.items():
        for method, path, data, expected in requests:
            url = path.format(**values)
            for role in ROLES:
                client = clients[role]
                if data is not None and method in ("POST", "PATCH"):
                    response = getattr(client, method.lower())(url, data, content_type="application/json") \
                        if url.startswith("/api/") and url != "/api/studies/" else client.post(url, data)
                else:
                    response = getattr(client, method.lower())(url)
                if response.status_code != expected[role]:
                    failures.append(f"{method} {url} as {role}: {response.status_code}, expected {expected[role]}")
    assert not failures, "\n".join(failures)


def test_access_module_imports_no_write_module():
    """access.py answers questions; writing is the services' job."""
    tree = ast.parse(Path(__file__).resolve().parents[2].joinpath("annotation", "access.py").read_text())
    writes = {"services", "serving", "tasks"}
    offenders = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and child.module and child.module.split(".")[-1] in writes:
                offenders.append(child.module)
            if isinstance(child, ast.Import) and any(a.name.split(".")[-1] in writes for a in child.names):
                offenders.append(child.names[0].name)
    assert offenders == []
