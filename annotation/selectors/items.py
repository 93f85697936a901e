"""Reads of the item reader: one item as a researcher reads it (its input and reference, its
outputs, every judgement on it with what counted and why, the metrics' and judges' verdicts,
the workers' reports), and the study's items searched by text.

Answers are given in the researcher's terms: which system won ("bloom-7b better", "about the
same"), not the screen's A and B. What counts is ``quality.counted_judgements``' rule (real
comparisons of workers who are not excluded), applied row by row so that each judgement says
why it is left out.
"""
from __future__ import annotations

import re

from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from protocol.preferences import combine_verdicts, preferences_from_scores
from protocol.scales import PLAIN

from ..models import (Annotator, Item, ItemFlag, Judgement, JudgementKind, Metric, MetricPreference, MetricScore,
                      Output, Study)
from ..rubrics import criterion_metrics, is_rubric, study_rubric
from .quality import excluded_annotators

__all__ = ["ITEMS_PER_PAGE", "MAX_QUERY_CHARS", "OUTPUTS_PER_PAGE", "item_reader_data", "item_search", "item_search_rows",
           "item_system_names", "study_annotator_of_study", "study_item"]

ITEMS_PER_PAGE = 50
# Outputs a page of the item reader shows: at 200 systems every output made a 10,000-px page.
OUTPUTS_PER_PAGE = 20
MAX_QUERY_CHARS = 200
SNIPPET_CHARS = 90  # characters of context on each side of a match

def study_item(*, study: Study, external_id: str) -> Item | None:
    """The study's item with this external id (any characters), or None."""
    return Item.objects.filter(study=study, external_id=external_id).first()


def item_system_names(*, item: Item) -> list[str]:
    """The systems with an output on ``item``, by name."""
    return sorted(set(Output.objects.filter(item=item).values_list("system__name", flat=True)))


def study_annotator_of_study(*, study: Study, annotator_id: int) -> Annotator | None:
    """The worker ``annotator_id`` when they answered anything in ``study`` (a comparison or a
    check: the workers of its quality table), else None: a worker of another study is not
    named to this study's researchers."""
    answered = Judgement.objects.filter(Q(comparison__study=study) | Q(check_item__study=study),
                                        annotator_id=annotator_id)
    return Annotator.objects.filter(pk=annotator_id).filter(Exists(answered)).first()


# ---- the reader -----------------------------------------------------------------------------

def _shown_outputs(study: Study, item: Item, systems: set[str]) -> dict[str, dict]:
    """system name -> the output annotators are shown (the study's shown sample, else the
    lowest, as serving's hit_display), with how many samples the system has; for the
    ``systems`` named only (their texts are what the page shows)."""
    shown: dict[str, dict] = {}
    outputs = Output.objects.filter(item=item, system__name__in=systems)
    for output in outputs.select_related("system").order_by("system__name", "sample"):
        name = output.system.name
        row = shown.get(name)
        if row is None or output.sample == study.shown_sample:
            shown[name] = {"system": name, "system_id": output.system_id, "output_id": output.pk,
                           "text": output.text, "messages": output.messages, "html": output.html,
                           "sample": output.sample, "samples": (row["samples"] if row else 0) + 1, "scores": []}
        else:
            row["samples"] += 1
    return shown


def _metrics(study: Study) -> list[dict]:
    """The study's metrics, the protocol's first, each with the criteria it decides."""
    decides: dict[str, list[str]] = {}
    if is_rubric(study):
        labels = {c.name: c.label for c in study_rubric(study)}
        for criterion, name in criterion_metrics(study).items():
            if name:
                decides.setdefault(name, []).append(labels[criterion])
    rows = [{"id": m.pk, "name": m.name, "kind": m.kind, "tie_margin": m.tie_margin,
             "protocol": m.pk == study.metric_id, "criteria": decides.get(m.name, [])}
            for m in Metric.objects.filter(study=study).order_by("name")]
    rows.sort(key=lambda m: (not m["protocol"], not m["criteria"], m["name"]))
    return rows


def _judgement(j: Judgement, *, first: str, second: str, criteria, excluded: set[int], rubric: bool) -> dict:
    why = []
    if j.kind == JudgementKind.REPEAT:
        why.append("a repeat of the worker's earlier judgement (quality control)")
    elif j.kind == JudgementKind.CHECK:
        why.append("a check")
    if j.annotator_id in excluded:
        why.append("the worker is excluded")
    answers = []
    if rubric:
        given = j.answers or {}
        for c in criteria:
            answer = given.get(c.name)
            if answer is None:
                answers.append({"name": c.name, "label": c.label, "value": None, "verdict": "—", "reason": ""})
                continue
            strength = int(answer.get("strength", 0))
            answers.append({"name": c.name, "label": c.label, "value": answer["value"], "strength": strength,
                            "verdict": c.answer_scale.verdict(answer["value"], first, second, strength),
                            "reason": answer.get("reason", "")})
    assignment = j.assignment
    shown = None
    if assignment is not None:
        left, right = (second, first) if assignment.shown_swapped else (first, second)
        shown = {"left": left, "right": right}
    a = j.annotator
    return {"id": j.pk, "value": j.value, "verdict": PLAIN.verdict(j.value, first, second), "answers": answers,
            "annotator": {"id": a.pk, "label": f"{a.platform}:{a.external_id}", "session": a.session_id,
                          "excluded": j.annotator_id in excluded},
            "kind": j.kind, "source": j.source, "counted": not why, "not_counted": why, "shown": shown,
            "server_seconds": j.server_seconds, "read_seconds": j.read_seconds,
            "seconds_on_task": j.seconds_on_task, "created_at": j.created_at}


def _counts(judgements: list[dict], criteria, rubric: bool) -> list[dict]:
    """Counted judgements per criterion: first better, about the same, second better."""
    counted = [j for j in judgements if j["counted"]]
    if not rubric:
        values = [j["value"] for j in counted]
        return [{"label": "", "wins": values.count(1), "ties": values.count(0), "losses": values.count(-1)}]
    rows = []
    for k, c in enumerate(criteria):
        values = [j["answers"][k]["value"] for j in counted if j["answers"][k]["value"] is not None]
        rows.append({"label": c.label, "wins": values.count(1), "ties": values.count(0), "losses": values.count(-1)})
    return rows


def _pair_metrics(metrics: list[dict], outputs: dict[str, dict], verdicts: dict[int, list[dict]],
                  first: str, second: str) -> list[dict]:
    """Each metric's say on one pair of the item: a score metric's two scores and its label
    (sign of the difference, ties within its margin: protocol.preferences), a preference
    metric's verdict rows (judge, prompt, order) and their combined label
    (protocol.preferences.combine_verdicts: both orders must agree)."""
    rows = []
    for m in metrics:
        if m["kind"] == Metric.Kind.SCORE:
            scores = [next((s["value"] for s in outputs[name]["scores"] if s["metric_id"] == m["id"]), None)
                      for name in (first, second)]
            if None in scores:
                continue
            label = int(preferences_from_scores([scores[0]], [scores[1]], eps=m["tie_margin"])[0])
            rows.append({**m, "scores": scores, "label": label, "verdict": PLAIN.verdict(label, first, second),
                         "rows": []})
        else:
            found = verdicts.get(m["id"], [])
            if not found:
                continue
            label = combine_verdicts([v["value"] for v in found])
            rows.append({**m, "scores": None, "label": label, "verdict": PLAIN.verdict(label, first, second),
                         "rows": [{**v, "verdict": PLAIN.verdict(v["value"], first, second),
                                   "shown_first": {"AB": first, "BA": second}.get(v["order"], "")}
                                  for v in found]})
    return rows


def item_reader_data(*, study: Study, item: Item, pair: tuple[str, str] | None = None,
                     page: str | int | None = 1) -> dict:
    """One item as its reader shows it.

    ``pair`` (first, second), canonical order (first < second), both with an output on the
    item: that pair only; None: every pair judged on the item and the systems' outputs,
    OUTPUTS_PER_PAGE a page, by name (``page``, any value: Paginator.get_page's, so a page
    out of range is the last). Returns the item, ``outputs`` (the shown outputs with their
    metric scores: in pair mode the pair's two, in order, else the page's), ``outputs_page``
    (the Paginator page of system names; None in pair mode), ``pairs`` (each judged pair, or
    the one asked for: first, second, ``judgements`` oldest first, ``counts`` of the counted
    ones per criterion, ``metrics`` each metric's verdict with a judge's rows), the item's
    ``systems`` and ``flags`` (workers' reports, newest first).
    """
    systems = item_system_names(item=item)
    outputs_page = None if pair is not None else Paginator(systems, OUTPUTS_PER_PAGE).get_page(page)
    shown_names = list(pair) if pair is not None else list(outputs_page.object_list)
    metrics = _metrics(study)
    excluded = set(excluded_annotators(study=study).values_list("annotator_id", flat=True))
    criteria = study_rubric(study)
    rubric = is_rubric(study)
    rows = (Judgement.objects.filter(comparison__item=item)
            .select_related("comparison__first", "comparison__second", "annotator", "assignment").order_by("id"))
    preferences = MetricPreference.objects.filter(item=item).order_by("metric__name", "judge", "order", "id")
    if pair is not None:
        rows = rows.filter(comparison__first__name=pair[0], comparison__second__name=pair[1])
        preferences = preferences.filter(first__name=pair[0], second__name=pair[1])
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for j in rows:
        first, second = j.comparison.first.name, j.comparison.second.name
        by_pair.setdefault((first, second), []).append(
            _judgement(j, first=first, second=second, criteria=criteria, excluded=excluded, rubric=rubric))
    verdicts: dict[tuple[str, str], dict[int, list[dict]]] = {}
    for metric_id, first, second, value, judge, prompt, order in preferences.values_list(
            "metric_id", "first__name", "second__name", "value", "judge", "prompt", "order"):
        verdicts.setdefault((first, second), {}).setdefault(metric_id, []).append(
            {"value": value, "judge": judge, "prompt": prompt, "order": order})
    keys = [pair] if pair is not None else sorted(by_pair)
    # the outputs shown and those whose scores a judged pair's metric rows compare
    outputs = _shown_outputs(study, item, set(shown_names).union(*keys))
    by_output = {o["output_id"]: o for o in outputs.values()}
    for metric_id, output_id, value in MetricScore.objects.filter(output_id__in=list(by_output)).values_list(
            "metric_id", "output_id", "value"):
        by_output[output_id]["scores"].append({"metric_id": metric_id, "value": value})
    names = {m["id"]: m for m in metrics}
    for output in outputs.values():
        output["scores"].sort(key=lambda s: metrics.index(names[s["metric_id"]]))
        for s in output["scores"]:
            s["metric"], s["protocol"] = names[s["metric_id"]]["name"], names[s["metric_id"]]["protocol"]
    pairs = []
    for first, second in keys:
        judgements = by_pair.get((first, second), [])
        pairs.append({"first": first, "second": second, "judgements": judgements,
                      "counted": sum(j["counted"] for j in judgements),
                      "counts": _counts(judgements, criteria, rubric),
                      "metrics": _pair_metrics(metrics, outputs, verdicts.get((first, second), {}), first, second)})
    shown = [outputs[name] for name in shown_names]
    flags = [{"reason": f.get_reason_display(), "note": f.note, "created_at": f.created_at,
              "annotator": {"id": f.annotator_id, "label": f"{f.annotator.platform}:{f.annotator.external_id}"}}
             for f in ItemFlag.objects.filter(item=item).select_related("annotator").order_by("-created_at", "-id")]
    return {"item": item, "pair": pair, "outputs": shown, "outputs_page": outputs_page, "pairs": pairs,
            "criteria": criteria, "rubric": rubric, "metrics": metrics, "flags": flags, "systems": systems,
            "verdict_pairs": sorted(set(verdicts) - set(by_pair)) if pair is None else []}


# ---- the search -----------------------------------------------------------------------------

def item_search(*, study: Study, query: str = "", annotator: Annotator | None = None) -> QuerySet[Item]:
    """The study's items whose external id, input, reference or any output holds ``query``
    (case-insensitive: the database's ``icontains``, which on SQLite folds ASCII letters
    only), optionally only those ``annotator`` judged; items with judgements first, then in
    the bundle's order. An empty query keeps every item."""
    items = Item.objects.filter(study=study)
    query = query.strip()
    if query:
        items = items.filter(Q(external_id__icontains=query) | Q(input__icontains=query)
                             | Q(reference__icontains=query)
                             | Exists(Output.objects.filter(item=OuterRef("pk"), text__icontains=query)))
    if annotator is not None:
        items = items.filter(Exists(Judgement.objects.filter(comparison__item=OuterRef("pk"), annotator=annotator)))
    judged = Exists(Judgement.objects.filter(comparison__item=OuterRef("pk")))
    return items.annotate(judged=judged).order_by("-judged", "position", "pk")


def _snippet(text: str, query: str) -> dict | None:
    """The text around the first match of ``query`` (case-insensitive), or its start."""
    found = re.search(re.escape(query), text, re.IGNORECASE) if query else None
    if found is None:
        if query:
            return None
        head = text[:2 * SNIPPET_CHARS]
        return {"before": head, "match": "", "after": "", "more": len(text) > len(head), "start": False}
    start, end = found.span()
    lo, hi = max(0, start - SNIPPET_CHARS), min(len(text), end + SNIPPET_CHARS)
    return {"before": text[lo:start], "match": text[start:end], "after": text[end:hi], "start": lo > 0,
            "more": hi < len(text)}


def item_search_rows(*, study: Study, items: list[Item], query: str = "",
                     annotator: Annotator | None = None) -> list[dict]:
    """A page of ``item_search``'s items as the search shows them: each item with its
    judgements (all, and counted), where the query matched (``where``: "id", "input",
    "reference" or a system's output, with the text around the match) and, with
    ``annotator``, that worker's judgements of it (pair and verdict; in a rubric study the
    first criterion's, named)."""
    query = query.strip()
    ids = [i.pk for i in items]
    excluded = excluded_annotators(study=study)
    counts = {row["comparison__item_id"]: row for row in Judgement.objects.filter(comparison__item_id__in=ids)
              .values("comparison__item_id").order_by()
              .annotate(total=Count("id"), counted=Count("id", filter=Q(kind=JudgementKind.REAL)
                                                         & ~Q(annotator_id__in=excluded)))}
    in_outputs: dict[int, tuple[str, str]] = {}
    if query:
        for item_id, system, text in (Output.objects.filter(item_id__in=ids, text__icontains=query)
                                      .order_by("item_id", "system__name", "sample")
                                      .values_list("item_id", "system__name", "text")):
            in_outputs.setdefault(item_id, (system, text))
    theirs: dict[int, list[dict]] = {}
    # A rubric judgement's value is its first criterion's answer (Judgement.answers has the rest).
    criterion = f" ({study_rubric(study)[0].label})" if is_rubric(study) else ""
    if annotator is not None:
        for item_id, first, second, value, kind in (
                Judgement.objects.filter(comparison__item_id__in=ids, annotator=annotator).order_by("id")
                .values_list("comparison__item_id", "comparison__first__name", "comparison__second__name",
                             "value", "kind")):
            theirs.setdefault(item_id, []).append({"first": first, "second": second, "kind": kind,
                                                   "verdict": PLAIN.verdict(value, first, second) + criterion})
    rows = []
    for item in items:
        where, snippet = "input", _snippet(item.input, query)
        if query and snippet is None and item.reference:
            where, snippet = "reference", _snippet(item.reference, query)
        if query and snippet is None and item.pk in in_outputs:
            system, text = in_outputs[item.pk]
            where, snippet = f"output of {system}", _snippet(text, query)
        if query and snippet is None:
            where, snippet = "id", _snippet(item.input, "")
        found = counts.get(item.pk, {})
        rows.append({"item": item, "where": where, "snippet": snippet, "judgements": found.get("total", 0),
                     "counted": found.get("counted", 0), "theirs": theirs.get(item.pk, [])})
    return rows
