"""The stored study as bundle rows (the export format is the import format, docs/bundle-format.md):
``study_export_rows`` and ``study_export`` for the export command, ``study_bundle`` for the planner
and the metric report; and its judgements as training-ready preference data
(``study_training_export``: TRL's formats with a dataset card)."""
from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

from django.db.models import Q, QuerySet

from protocol.bundle import STUDY_SETTINGS, parse_bundle_lines, write_bundle_rows
from protocol.preference_data import RULE, ComparisonVotes, preference_rows

from ..models import (Annotator, CheckItem, Comparison, HumanScore, Item, MetricPreference, MetricScore, Output,
                      Study)
from .quality import counted_judgements


def study_export_rows(*, study: Study, items: QuerySet[Item] | None = None) -> Iterator[dict]:
    """The study as bundle rows; judgements (imported and live) become human_preference rows.

    ``items``: only these of the study's items, with their outputs and their metric and human
    rows (the study line and the checks whatever they are).
    """
    def of_items(rows: QuerySet, path: str) -> QuerySet:
        return rows if items is None else rows.filter(**{f"{path}__in": items})

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
    for item in of_items(study.items, "pk").order_by("position").iterator():
        row = {"kind": "item", "id": item.external_id,
               "input": item.input if item.input_messages is None else item.input_messages}
        if item.reference:
            row["reference"] = item.reference
        if item.prompt_kind:
            row["prompt_kind"] = item.prompt_kind
        yield row
    # Read as tuples, not models: at 200 x 2,000 building 400,000 outputs with their items and
    # systems (and as many metric scores) took most of the export's time.
    outputs = of_items(Output.objects.filter(item__study=study), "item").order_by(
        "item__position", "system__name", "sample").values_list("item__external_id", "system__name", "text",
                                                                "messages", "sample")
    for item, system, text, messages, sample in outputs.iterator():
        yield {"kind": "output", "item": item, "system": system, "text": text if messages is None else messages,
               "sample": sample}
    scores = of_items(MetricScore.objects.filter(metric__study=study), "output__item").order_by(
        "metric__name", "output__item__position", "output__system__name").values_list(
        "output__item__external_id", "output__system__name", "metric__name", "value")
    for item, system, metric, value in scores.iterator():
        yield {"kind": "metric_score", "item": item, "system": system, "metric": metric, "score": value}
    prefs = of_items(MetricPreference.objects.filter(metric__study=study), "item").select_related(
        "metric", "item", "first", "second").order_by("metric__name", "item__position", "first__name", "second__name",
                                                      "order")
    for p in prefs.iterator():
        row = {"kind": "metric_preference", "item": p.item.external_id, "first": p.first.name,
               "second": p.second.name, "metric": p.metric.name, "preference": p.value}
        row.update({k: v for k, v in (("judge", p.judge), ("prompt", p.prompt), ("order", p.order)) if v})
        yield row
    humans = of_items(HumanScore.objects.filter(output__item__study=study), "output__item").select_related(
        "output__item", "output__system").order_by("output__item__position", "output__system__name", "id")
    for h in humans.iterator():
        row = {"kind": "human_score", "item": h.output.item.external_id, "system": h.output.system.name,
               "score": h.value}
        if h.annotator_label:
            row["annotator"] = h.annotator_label
        yield row
    # Counted judgements only: checks, repeats and the judgements of excluded workers are not
    # preferences of the study (the judgements CSV lists them, marked).
    judgements = of_items(counted_judgements(study=study), "comparison__item").select_related(
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


def study_bundle(*, study: Study, items: QuerySet[Item] | None = None):
    """The study's current data (live judgements as human_preference rows) as a protocol Bundle.

    ``items``: only these items (study_export_rows); the bundle's systems are still every
    system with an output in the study, as the whole study's bundle lists them.
    """

    bundle = parse_bundle_lines((n, json.dumps(row)) for n, row in enumerate(
        study_export_rows(study=study, items=items), 1))
    if items is None:
        return bundle
    systems = set(Output.objects.filter(item__study=study).values_list("system__name", flat=True).distinct())
    return bundle.with_systems(systems)


def human_labelled_items(*, study: Study) -> QuerySet[Item]:
    """The study's items with a human label: a human_score row of one of its outputs or a
    counted judgement of one of its comparisons (what protocol.preferences.human_labels reads)."""
    return study.items.filter(Q(pk__in=counted_judgements(study=study).values("comparison__item"))
                              | Q(pk__in=HumanScore.objects.filter(output__item__study=study).values("output__item")))


# --- Training-ready preference data (issue 37): TRL's formats, protocol/preference_data.py ----

def study_preference_comparisons(*, study: Study) -> Iterator[ComparisonVotes]:
    """Every comparison with counted judgements, as ``protocol.preference_data.ComparisonVotes``:
    the item's input (its conversation when it has one), the two systems' shown outputs and
    the counted votes in canonical order; a rubric study gives one per criterion."""
    votes: dict[int, list] = {}
    for comparison_id, value, answers in counted_judgements(study=study).values_list(
            "comparison_id", "value", "answers").order_by("id"):
        votes.setdefault(comparison_id, []).append(answers if answers is not None else value)
    if not votes:
        return
    criteria = [c["name"] for c in study.criteria] if study.criteria else [""]
    texts: dict[tuple[int, int], object] = {}
    comparisons = list(Comparison.objects.filter(pk__in=votes).select_related("item", "first", "second")
                       .order_by("item__position", "first__name", "second__name"))
    for o in Output.objects.filter(item_id__in={c.item_id for c in comparisons}).order_by("-sample"):
        if (o.item_id, o.system_id) not in texts or o.sample == study.shown_sample:
            texts[(o.item_id, o.system_id)] = o.messages if o.messages is not None else o.text
    for c in comparisons:
        prompt = c.item.input_messages if c.item.input_messages is not None else c.item.input
        first, second = texts.get((c.item_id, c.first_id), ""), texts.get((c.item_id, c.second_id), "")
        for criterion in criteria:
            values = tuple(v[criterion]["value"] if isinstance(v, dict) else v for v in votes[c.pk]
                           if not isinstance(v, dict) or criterion in v)
            yield ComparisonVotes(item=c.item.external_id, prompt=prompt, first_system=c.first.name,
                                  second_system=c.second.name, first_text=first, second_text=second, votes=values,
                                  criterion=criterion)


def study_preference_rows(*, study: Study, form: str = "trl", min_agreement: float = 0.0) -> tuple[list, dict]:
    """The study's preference data in ``form`` (protocol.preference_data.FORMATS) and its summary."""
    return preference_rows(study_preference_comparisons(study=study), form=form, min_agreement=min_agreement)


def study_dataset_card(*, study: Study, form: str, summary: dict, min_agreement: float = 0.0) -> str:
    """A Hugging Face dataset card (README.md) for the study's preference data: what the rows
    are and the methods paragraph (the decision rule, γ, the labels used, the decisions)."""
    pairs = list(study.pair_states.values_list("first__name", "second__name", "decision", "status"))
    decided = [(a, b, d) for a, b, d, _ in pairs if d]
    judged = counted_judgements(study=study).count()
    family = study.family_guarantee
    decisions = "; ".join(f"{a if d > 0 else b} over {b if d > 0 else a}" for a, b, d in decided) or "none yet"
    agreement = f" and at least {min_agreement:.0%} of its votes for the majority" if min_agreement else ""
    return "\n".join([
        "---",
        "tags: [preference, human-feedback, evalapp]",
        f"pretty_name: {json.dumps(study.name)}",
        "---",
        "",
        f"# {study.name}: human preferences ({form})",
        "",
        f"Pairwise human judgements collected with evalapp (study `{study.slug}`), in the TRL "
        f"library's `{form}` format: {summary['rows']} rows from {summary['comparisons']} judged comparisons "
        f"of {study.systems.count()} systems on {study.items.count()} items.",
        "",
        "## How the rows were made",
        "",
        f"{RULE} A comparison is kept when it has a preferred answer{agreement}: "
        f"{summary['with_a_winner']} kept, {summary['left_out_ties']} left out as ties or even splits, "
        f"{summary['left_out_below_agreement']} below the agreement asked for. Each row carries its votes "
        "(`votes_chosen`, `votes_rejected`, `votes_tie`), `agreement` (the majority's share of the votes), "
        "the two systems and the item" + (" and the criterion (a rubric study: one row per criterion)"
                                          if study.criteria else "") + ".",
        "",
        "## Methods",
        "",
        f"Annotators saw an input and two outputs in random order and said which was better"
        f"{' for ' + study.criterion if study.criterion else ''}. {judged} counted judgements (checks, "
        "repeats and excluded workers' judgements left out). The study decided each pair of systems with "
        f"the {study.get_protocol_rule_display()} rule at γ = {study.gamma}, {study.get_allocation_policy_display()} "
        f"policy, batch {study.batch_size}, metric {study.metric.name if study.metric_id else 'none (human only)'}: "
        f"{study.guarantee}{(' ' + family) if family else ''} Decided pairs ({len(decided)} of {len(pairs)}): "
        f"{decisions}.",
        "",
    ])


def preference_parquet(rows: list[dict]) -> bytes:
    """Rows as a Parquet file's bytes."""
    import pyarrow as pa  # noqa: PLC0415 — the table libraries load only for these exports
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


def preference_jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False, allow_nan=False).encode() + b"\n" for row in rows)


def study_training_export(*, study: Study, path: str | os.PathLike, form: str = "trl",
                          min_agreement: float = 0.0) -> dict:
    """Write the study's preference data to ``path``: JSON Lines (``.jsonl``, ``.jsonl.gz``),
    Parquet (``.parquet``) or, for a path without a suffix, a ``datasets`` directory
    (``save_to_disk``) with its dataset card; a file gets its card beside it
    (``<path>.README.md``). Returns the summary with ``path`` and ``card``."""
    rows, summary = study_preference_rows(study=study, form=form, min_agreement=min_agreement)
    card = study_dataset_card(study=study, form=form, summary=summary, min_agreement=min_agreement)
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".json")):
        write_bundle_rows(rows, path)
        card_path = path.with_name(path.name + ".README.md")
    elif name.endswith(".parquet"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(preference_parquet(rows))
        card_path = path.with_name(path.name + ".README.md")
    elif not path.suffix:
        import datasets  # noqa: PLC0415

        datasets.Dataset.from_list(rows).save_to_disk(str(path))
        card_path = path / "README.md"
    else:
        raise ValueError(f"{path.name}: write .jsonl, .jsonl.gz, .parquet, or a folder (no suffix) for a dataset")
    card_path.write_text(card)
    return {**summary, "path": str(path), "card": str(card_path)}
