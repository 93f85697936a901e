"""The stored study as bundle rows (the export format is the import format, docs/bundle-format.md):
``study_export_rows`` and ``study_export`` for the export command, ``study_bundle`` for the planner
and the metric report."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator

from protocol.bundle import STUDY_SETTINGS, parse_bundle_lines, write_bundle_rows

from ..models import Annotator, CheckItem, HumanScore, MetricPreference, MetricScore, Output, Study
from .quality import counted_judgements


def study_export_rows(*, study: Study) -> Iterator[dict]:
    """The study as bundle rows; judgements (imported and live) become human_preference rows."""
    head = {"kind": "study", "name": study.name}
    if study.criterion:
        head["criterion"] = study.criterion
    if study.criteria:
        head["criteria"] = study.criteria
    # Every setting a bundle may carry whose value is not its default (a default is what the
    # study line says by leaving the setting out), the metric by name.
    values = study.setting_values()
    head.update({name: values[name] for name, setting in STUDY_SETTINGS.items()
                 if values[name] not in ("", None, setting.default)})
    yield head
    for item in study.items.order_by("position").iterator():
        row = {"kind": "item", "id": item.external_id,
               "input": item.input if item.input_messages is None else item.input_messages}
        if item.reference:
            row["reference"] = item.reference
        yield row
    outputs = Output.objects.filter(item__study=study).select_related("item", "system").order_by(
        "item__position", "system__name", "sample")
    for o in outputs.iterator():
        yield {"kind": "output", "item": o.item.external_id, "system": o.system.name,
               "text": o.text if o.messages is None else o.messages, "sample": o.sample}
    scores = MetricScore.objects.filter(metric__study=study).select_related(
        "metric", "output__item", "output__system").order_by("metric__name", "output__item__position",
                                                             "output__system__name")
    for s in scores.iterator():
        yield {"kind": "metric_score", "item": s.output.item.external_id, "system": s.output.system.name,
               "metric": s.metric.name, "score": s.value}
    prefs = MetricPreference.objects.filter(metric__study=study).select_related(
        "metric", "item", "first", "second").order_by("metric__name", "item__position", "first__name", "second__name",
                                                      "order")
    for p in prefs.iterator():
        row = {"kind": "metric_preference", "item": p.item.external_id, "first": p.first.name,
               "second": p.second.name, "metric": p.metric.name, "preference": p.value}
        row.update({k: v for k, v in (("judge", p.judge), ("prompt", p.prompt), ("order", p.order)) if v})
        yield row
    humans = HumanScore.objects.filter(output__item__study=study).select_related(
        "output__item", "output__system").order_by("output__item__position", "output__system__name", "id")
    for h in humans.iterator():
        row = {"kind": "human_score", "item": h.output.item.external_id, "system": h.output.system.name,
               "score": h.value}
        if h.annotator_label:
            row["annotator"] = h.annotator_label
        yield row
    # Counted judgements only: checks, repeats and the judgements of excluded workers are not
    # preferences of the study (the judgements CSV lists them, marked).
    judgements = counted_judgements(study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator").order_by("id")
    for j in judgements.iterator():
        a = j.annotator
        # A crowd worker is one platform session of a worker id: both name them (models.Annotator).
        label = a.external_id if a.platform == Annotator.Platform.IMPORT else ":".join(
            filter(None, (a.platform, a.external_id, a.session_id)))
        row = {"kind": "human_preference", "item": j.comparison.item.external_id,
               "first": j.comparison.first.name, "second": j.comparison.second.name,
               "preference": j.value, "annotator": label}
        if j.answers is None:
            yield row
            continue
        # a rubric judgement: one line per criterion, with its strength and reason
        for criterion, answer in j.answers.items():
            yield {**row, "criterion": criterion, "preference": answer["value"],
                   **{k: answer[k] for k in ("strength", "reason") if answer.get(k)}}
    yield from _check_rows(study)


def _check_rows(study: Study) -> Iterator[dict]:
    for c in CheckItem.objects.filter(study=study).order_by("position"):
        row = {"kind": "check", "id": c.external_id, "input": c.input, "first": c.first, "second": c.second,
               "expected": c.expected}
        if c.reference:
            row["reference"] = c.reference
        yield row


def study_export(*, study: Study, path: str | os.PathLike) -> int:
    """Write the study as a bundle (gzipped when the name ends in .gz); returns lines written."""
    return write_bundle_rows(study_export_rows(study=study), path)


def study_bundle(*, study: Study):
    """The study's current data (live judgements as human_preference rows) as a protocol Bundle."""

    return parse_bundle_lines((n, json.dumps(row)) for n, row in enumerate(study_export_rows(study=study), 1))
