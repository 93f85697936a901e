"""An import's outputs and metric scores, written by the store (annotation/serving/store.py:
``outputs_insert``, ``metric_scores_insert``; COPY FROM STDIN in the binary format on
PostgreSQL, executemany on SQLite), hold exactly what the ORM would have written, texts with
tabs, newlines, backslashes and COPY's text-format markers included; a failing import leaves
nothing. Run on SQLite and on PostgreSQL (DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME)."""
import struct

import pytest
from django.db import IntegrityError, connection, transaction

from annotation import models
from annotation.serving import store
from annotation.services import runtime
from annotation.services.studies import study_import
from tests.builders.bundles import bundle_bytes

pytestmark = pytest.mark.django_db

# What COPY's text format would have to escape (tab, newline, carriage return, backslash, its
# NULL marker \N), unicode beyond the BMP, right-to-left, combining marks, and the empty text.
TEXTS = ["plain", "tab\there", "two\nlines", "cr\r\nlf", "back\\slash", "\\N", "\\.", "ends with \\",
         "é ü ß 中文 𝔘𝔫𝔦 🙂", "שלום", "e\u0301", "", "quote ' \" `code`", "a\x01b\x7f", "  spaces  "]
# Floats whose every bit counts: the smallest subnormal, the largest double, a negative zero.
SCORES = [0.1, 1 / 3, -2.5e-7, 5e-324, 1.7976931348623157e308, -0.0, 0.0, 42.0, -1e100, 2.0 ** 53 + 1]


def stored(table: str, ids) -> list[tuple]:
    """The rows as the database holds them (jsonb as its text, a float as its 8 bytes)."""
    if table == "output":
        messages = '"messages"::text' if connection.vendor == "postgresql" else '"messages"'
        sql = f'SELECT "text", {messages}, "html" FROM "annotation_output" WHERE "id" = %s'
    else:
        sql = 'SELECT "value" FROM "annotation_metricscore" WHERE "id" = %s'
    with connection.cursor() as cursor:
        rows = []
        for pk in ids:
            cursor.execute(sql, [pk])
            row = cursor.fetchone()
            rows.append(tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in row))
        return rows


def copied_by_the_orm(study: models.Study, outputs: list[models.Output]) -> tuple[list[int], list[int]]:
    """The same outputs (and their scores) under new systems (one per system) and a new metric,
    written by the ORM; their ids in the order of ``outputs``."""
    systems = {pk: models.System.objects.create(study=study, name=f"copy of {pk} by the ORM")
               for pk in sorted({o.system_id for o in outputs})}
    metric = models.Metric.objects.create(study=study, name="copy by the ORM", kind=models.Metric.Kind.SCORE)
    copies = models.Output.objects.bulk_create(
        models.Output(item_id=o.item_id, system=systems[o.system_id], sample=o.sample, text=o.text,
                      messages=o.messages, html=o.html) for o in outputs)
    scores = models.MetricScore.objects.bulk_create(
        models.MetricScore(metric=metric, output=copy, value=o.metric_scores.get().value)
        for o, copy in zip(outputs, copies))
    return [c.pk for c in copies], [s.pk for s in scores]


def nasty_rows(markdown: bool) -> list[dict]:
    rows = [{"kind": "study", "name": "Nasty texts", "metric": "m", "text_format": "markdown" if markdown else "plain"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"input {n}"} for n in range(len(TEXTS))]
    for n, text in enumerate(TEXTS):
        rows.append({"kind": "output", "item": f"i{n}", "system": "A", "text": text})
        # a conversation's turns: a jsonb value on PostgreSQL, its texts the same as the plain ones
        rows.append({"kind": "output", "item": f"i{n}", "system": "B",
                     "text": [{"role": "assistant", "content": text or "-"}, {"role": "user", "content": "\t\\\n"}]})
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m",
              "score": SCORES[(n + j) % len(SCORES)]} for n in range(len(TEXTS)) for j, s in enumerate("AB")]
    return rows


@pytest.mark.parametrize("markdown", [False, True], ids=["plain", "markdown"])
def test_an_imports_outputs_and_scores_are_the_rows_the_orm_writes(markdown):
    study = study_import(source=bundle_bytes(nasty_rows(markdown)), slug="nasty")
    outputs = list(models.Output.objects.filter(item__study=study).order_by("id"))
    assert len(outputs) == 2 * len(TEXTS)
    assert {o.text for o in outputs if o.messages is None} == set(TEXTS)
    assert all(o.html for o in outputs) == markdown
    scores = [o.metric_scores.get().pk for o in outputs]
    copies, copied_scores = copied_by_the_orm(study, outputs)
    assert stored("output", [o.pk for o in outputs]) == stored("output", copies)
    assert stored("score", scores) == stored("score", copied_scores)
    # the bundle's values (SQLite keeps no negative zero: 0.0 == -0.0; PostgreSQL keeps it, as the ORM's copy)
    assert sorted(models.MetricScore.objects.filter(pk__in=scores).values_list("value", flat=True)) == sorted(
        SCORES[(n + j) % len(SCORES)] for n in range(len(TEXTS)) for j in range(2))


def test_on_postgresql_an_import_copies_its_outputs_and_scores():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite inserts them (executemany)")
    statements = []

    def capture(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        study_import(source=bundle_bytes(nasty_rows(False)), slug="nasty")
    assert statements and not [s for s in statements if s.startswith(
        ('INSERT INTO "annotation_output"', 'INSERT INTO "annotation_metricscore"'))]
    assert models.Output.objects.count() == 2 * len(TEXTS) and models.MetricScore.objects.count() == 2 * len(TEXTS)


IMPORTED = [models.Study, models.System, models.Item, models.Output, models.Metric, models.MetricScore,
            models.PairState, models.Comparison, models.Judgement]


@pytest.mark.django_db(transaction=True)
def test_an_import_failing_after_its_rows_were_copied_leaves_nothing(monkeypatch):
    def fails(*, study):
        assert models.Output.objects.filter(item__study=study).count() == 2 * len(TEXTS)
        raise RuntimeError("the protocol's start failed")

    monkeypatch.setattr(runtime, "protocol_start", fails)
    with pytest.raises(RuntimeError, match="protocol's start failed"):
        study_import(source=bundle_bytes(nasty_rows(True)), slug="nasty")
    assert {m.__name__: m.objects.count() for m in IMPORTED} == {m.__name__: 0 for m in IMPORTED}
    monkeypatch.undo()
    study_import(source=bundle_bytes(nasty_rows(True)), slug="nasty")  # the connection is fine
    assert models.Output.objects.count() == 2 * len(TEXTS)


@pytest.mark.django_db(transaction=True)
def test_rows_the_database_refuses_raise_djangos_integrity_error_and_are_rolled_back():
    study = models.Study.objects.create(slug="s", name="S")
    item = models.Item.objects.create(study=study, external_id="i", input="x", position=0)
    system = models.System.objects.create(study=study, name="A")
    row = (item.pk, system.pk, 0, "a\tb", [{"role": "assistant", "content": "\\"}], "")
    with pytest.raises(IntegrityError), transaction.atomic():  # a unique constraint: refused in the statement
        store.outputs_insert([row, row])
    with pytest.raises(IntegrityError), transaction.atomic():  # a foreign key: refused at the commit (deferred)
        store.outputs_insert([(item.pk + 1000, system.pk, 0, "t", None, "")])
    assert not models.Output.objects.exists()
    store.outputs_insert([row])
    assert models.Output.objects.get().messages == [{"role": "assistant", "content": "\\"}]
