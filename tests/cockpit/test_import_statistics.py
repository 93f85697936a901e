"""An import leaves PostgreSQL's planner statistics up to date (services.studies)."""
import pytest
from django.db import connection

from annotation.models import Comparison, Item, Output, PairState
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes, crowd_rows

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's planner statistics"),
]


def _estimated_rows(model) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
        return cursor.fetchone()[0]


def test_the_tables_an_import_filled_are_analysed_when_it_commits():
    study_import(source=bundle_bytes(crowd_rows(items=37)))
    for model in (Item, Output, PairState, Comparison):
        # ANALYZE reads a small table whole: its estimate is the exact count (-1 or a stale
        # count before: autovacuum has not come by within the test)
        assert _estimated_rows(model) == model.objects.count(), model.__name__
