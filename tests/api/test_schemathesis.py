"""Property-based API tests from the live OpenAPI schema (schemathesis): no operation answers 5xx.

Every operation of /api/schema/ is called with generated inputs (bounded examples), as a
researcher and as an annotator of a real study (path parameters point at it, so the
generated bodies and queries reach the real code, not only 404s); each answer must be no
server error and conform to the documented status codes, content types and schemas.
"""
import pytest
import schemathesis
from django.contrib.auth.models import Group, User
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from annotation.services import hits as serving
from annotation.access import RESEARCHER_GROUP
from annotation.services import study_import, study_membership_set
from evalapp.wsgi import application
from tests.factories import bundle_bytes, crowd_rows

pytestmark = pytest.mark.django_db(transaction=True)

# Not checked: negative_data_rejection / positive_data_acceptance. DRF parses leniently (an int
# is accepted as text, a bad page_size falls back to the default) and a schema-valid username
# may name no user: strictness, not faults. A missing Idempotency-Key answers 428 by design.
CONFIG = SchemathesisConfig.from_dict({"checks": {
    "negative_data_rejection": {"enabled": False},
    "positive_data_acceptance": {"enabled": False},
    "missing_required_header": {"expected-statuses": [428]},
}})
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG)


@pytest.fixture
def study_callers(settings):
    settings.EVALAPP_THROTTLE_RATES = {scope: "100000/minute" for scope in settings.EVALAPP_THROTTLE_RATES}
    researcher = User.objects.create_user("researcher")
    researcher.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    annotator = User.objects.create_user("annotator")
    rows = crowd_rows(items=10) + [{"kind": "human_preference", "item": "i00", "first": "A", "second": "B",
                                    "preference": 1, "annotator": "expert"}]
    study = study_import(source=bundle_bytes(rows), slug="fuzzed", created_by=researcher)
    study_membership_set(study=study, user=annotator, role="annotator")
    tokens = {name: Token.objects.create(user=user).key for name, user in
              (("researcher", researcher), ("annotator", annotator))}
    hit = serving.hit_next_for_annotator(study=study, annotator=serving.annotator_for_user(user=annotator))
    return study, tokens, hit.pk


@pytest.mark.parametrize("role", ["researcher", "annotator"])
@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_api_answers_no_server_error(case, role, study_callers):
    study, tokens, hit_id = study_callers
    if "slug" in (case.path_parameters or {}):
        case.path_parameters["slug"] = study.slug
    if "hit_id" in (case.path_parameters or {}) and role == "annotator":
        case.path_parameters["hit_id"] = hit_id  # the annotator's own leased HIT
    case.call_and_validate(headers={"Authorization": f"Token {tokens[role]}"})
