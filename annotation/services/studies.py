"""Writes. Every function takes keyword-only typed arguments, validates, and runs in a
transaction, so a failure anywhere leaves the database as it was.
"""
from __future__ import annotations

import hashlib
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils.text import slugify
from rest_framework.authtoken.models import Token

from protocol import rubric, tables
from protocol.separability import compute_alignments

from protocol.bundle import (STUDY_SETTINGS, Bundle, BundleError, BundleLimits, BundleProblem, messages_rows,
                             read_bundle)
from protocol.designs import DESIGNS
from protocol.preferences import canonical_pair, shared_items
from protocol.study_settings import API, DRAFT, METRIC, RUNNING, SETTINGS, lease_timeout_for, metric_names

from ..models import (
    Annotator,
    CheckItem,
    Comparison,
    HumanScore,
    Item,
    Judgement,
    Metric,
    MetricPreference,
    MetricScore,
    Output,
    PairState,
    Study,
    StudyMembership,
    System,
)
from .. import jobs, rendering
from ..rubrics import answer_row
from ..selectors.studies import comparison_sample_texts
from ..serving import protocol_state, store
from . import runtime
from .common import model_update
from .members import study_membership_set
from .quality import checks_need_items

BATCH = 2000
Progress = Callable[[str, int, int], None]



def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def _bulk(model, objects: list, progress: Progress, stage: str) -> list:
    created = []
    total = len(objects)
    for start in range(0, total, BATCH):
        created.extend(model.objects.bulk_create(objects[start:start + BATCH]))
        progress(stage, min(start + BATCH, total), total)
    return created


def _insert_batches(insert: Callable[[list], None], rows: Iterable, total: int, progress: Progress,
                    stage: str) -> None:
    """``insert`` (a store function writing many rows) the ``rows`` (``total`` of them) BATCH
    at a time, reporting progress after each batch; keeps no row."""
    done = 0
    rows = iter(rows)
    while batch := list(itertools.islice(rows, BATCH)):
        insert(batch)
        done += len(batch)
        progress(stage, done, total)


def study_slug_for(*, name: str, slug: str | None) -> str:
    """The slug a new study would get; BundleError when it is invalid or taken."""
    candidate = slug or slugify(name)[:80]
    if not candidate or slugify(candidate) != candidate:
        raise BundleError([BundleProblem(0, f"invalid study slug {candidate!r} (use letters, digits, - and _)")])
    if Study.objects.filter(slug=candidate).exists():
        raise BundleError([BundleProblem(0, f"a study with slug {candidate!r} exists already; choose another slug")])
    return candidate


def bundle_limits() -> BundleLimits:
    """The limits every bundle read by the app is held to (settings.EVALAPP_BUNDLE_LIMITS)."""
    return BundleLimits(**settings.EVALAPP_BUNDLE_LIMITS)


def study_import(
    *,
    source: str | os.PathLike | bytes | BinaryIO,
    slug: str | None = None,
    metric: str | None = None,
    created_by=None,
    separability: str = "background",
    progress: Progress = _no_progress,
    start: bool = True,
    metric_required: bool = False,
    study_settings: dict | None = None,
) -> Study:
    """Validate a study bundle and store it as a new study, all or nothing.

    Raises BundleError (a ValueError) listing every problem, each with its line, before
    anything is written; a failure while writing rolls the whole import back.
    ``metric`` chooses the study's metric: None takes the bundle's ``metric`` setting, ``""``
    means none (a human-only study, whatever the bundle says). With ``metric_required`` a
    bundle that has metrics but names none for the protocol, imported with ``metric=None``,
    is refused (BundleError naming its metrics): a human-only study is then asked for with
    ``metric=""`` (the upload page, the API and ``import_study`` never make one silently).
    ``created_by`` becomes a researcher of the study.
    ``study_settings``: settings chosen at import (settings a bundle may carry), over the
    bundle's own; what neither sets takes the Study default (the error-controlled rule).
    ``start``: start the protocol now (the study runs), or store a draft — not served, its
    protocol parameters editable (``study_draft_update``) until ``study_launch``.
    ``separability``: when outputs have >= 2 samples, compute the comparisons' separability
    ``"inline"`` (before returning, reporting to ``progress``), in the ``"background"`` (a
    task queued when the import commits; eager without a broker), or ``"skip"`` it.
    """
    if separability not in ("inline", "background", "skip"):
        raise ValueError(f"separability must be inline, background or skip, got {separability!r}")
    try:
        bundle = read_bundle(source, limits=bundle_limits())
    except BundleError:
        # A table or a tool's output given as a bundle: say what it is and how to import it.
        looks = "" if tables.is_bundle(source) else tables.what_it_looks_like("the file", source)
        if looks:
            raise BundleError([BundleProblem(0, looks)]) from None
        raise
    progress("validated", bundle.line_count(), bundle.line_count())
    unknown = sorted(set(study_settings or {}) - set(STUDY_SETTINGS))
    if unknown:
        raise ValueError(f"unknown study settings {unknown}; known: {sorted(STUDY_SETTINGS)}")
    chosen = {**bundle.study, **{k: v for k, v in (study_settings or {}).items() if v is not None}}
    # A rubric's first criterion may name its metric: it is then the study's metric.
    named = bundle.study.get("metric") or next(iter(c.get("metric") for c in bundle.study.get("criteria", ())), None)
    chosen_metric = named if metric is None else (metric or None)
    if metric_required and metric is None and chosen_metric is None and bundle.metrics:
        known = ", ".join(sorted(bundle.metrics))
        raise BundleError([BundleProblem(0, f"the bundle names no metric for the protocol; choose one of its "
                                            f"metrics ({known}) or ask for a human-only study")])
    if chosen_metric is not None and chosen_metric not in bundle.metrics:
        known = ", ".join(bundle.metrics) or "none"
        raise BundleError([BundleProblem(0, f"unknown metric {chosen_metric!r}; the bundle has: {known}")])
    criteria = tuple(c["name"] for c in bundle.study.get("criteria", ()))
    unknown = [name for name in metric_names(chosen.get("combined_metrics", ""), criteria)
               if name not in bundle.metrics]
    if unknown:
        known = ", ".join(bundle.metrics) or "none"
        raise BundleError([BundleProblem(0, f"study setting 'combined_metrics': unknown metric {unknown[0]!r}; "
                                            f"the bundle has: {known}")])
    if (bundle.study.get("check_every") or bundle.study.get("onboarding_checks")) and not bundle.checks:
        raise BundleError([BundleProblem(0, "the study asks for checks (check_every or onboarding_checks) "
                                            "but the bundle has no check lines")])
    design = DESIGNS.get(chosen.get("pair_design"))  # None: the default, or a name the model refuses
    if design and not design.takes_imported_judgements and bundle.human_preferences:
        raise BundleError([BundleProblem(0, f"the {chosen['pair_design']} design starts with no human judgements "
                                            "(it spends only on the pairs it asks for); leave the human_preference "
                                            "lines out or use pair_design 'all_pairs'")])
    if "lease_timeout_seconds" not in chosen:
        chosen["lease_timeout_seconds"] = lease_timeout_for(_words_per_hit(bundle))
    texts_html = _texts_rendered(bundle, chosen.get("text_format", rendering.PLAIN), progress)
    with transaction.atomic():
        study = _store_bundle(bundle, study_slug_for(name=bundle.study["name"], slug=slug), progress,
                              settings_chosen=chosen, texts_html=texts_html)
        has_samples = any(r.sample > 0 for r in bundle.outputs)
        # The bundle is stored: its rows (most of the import's memory: 385 MB at 100 systems x
        # 10,000 items) go before the protocol's start, whose own peak came on top of them
        # (docs/benchmarks.md, "Import").
        del bundle, texts_html
        if chosen_metric is not None:
            study.metric = study.metrics.get(name=chosen_metric)
            study.save(update_fields=["metric"])
        if start:
            # The protocol starts with the study, so no page or API read ever has to start it.
            runtime.protocol_start(study=study)
            progress("protocol", 1, 1)
        else:
            study.status = Study.Status.DRAFT
            study.save(update_fields=["status"])
        if created_by is not None:
            study_membership_set(study=study, user=created_by, role=StudyMembership.Role.RESEARCHER)
        if has_samples and separability != "skip":
            study.separability_status = "pending"
            study.save(update_fields=["separability_status"])
            if separability == "background":
                transaction.on_commit(lambda: jobs.study_separability(study.id))
    _planner_statistics_refresh()
    if has_samples and separability == "inline":
        study_separability_compute(study_id=study.id, progress=progress)
        study.refresh_from_db()
    return study


# The tables an import fills: what the serving loop's plans read.
IMPORTED_TABLES = (System, Item, Output, Metric, MetricScore, MetricPreference, HumanScore, CheckItem, Annotator,
                   Comparison, Judgement, PairState)


def _planner_statistics_refresh() -> None:
    """PostgreSQL: ANALYZE the tables an import just filled (call after its commit).

    Until autovacuum gets to them, a bulk import leaves PostgreSQL planning the serving loop's
    statements on the empty tables' statistics, which slowed the first load after a large import
    (docs/benchmarks.md, "A leaderboard-sized study"). SQLite plans by its indexes alone
    (tests/serving/test_serving_plans.py checks them), so it is left alone.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(m._meta.db_table) for m in IMPORTED_TABLES))


def _words_per_hit(bundle: Bundle) -> float:
    """A typical HIT's words: the median input's and twice the median output's."""
    def median(values: list[int]) -> float:
        ordered = sorted(values)
        return float(ordered[len(ordered) // 2]) if ordered else 0.0

    return median([len(r.input.split()) for r in bundle.items]) + 2 * median([len(r.text.split()) for r in bundle.outputs])


@dataclass(frozen=True)
class TextsHtml:
    """A markdown study's texts rendered once at import (rendering.stored_html), in bundle
    order; empty tuples for a plain study (its texts are escaped when shown)."""

    items: tuple[tuple[str, str], ...] = ()          # (input, reference) per item
    outputs: tuple[str, ...] = ()
    checks: tuple[tuple[str, str, str, str], ...] = ()  # (input, reference, first, second) per check


def _texts_rendered(bundle: Bundle, text_format: str, progress: Progress) -> TextsHtml:
    """Render every text of a markdown study once (docs/benchmarks.md, "Import"), before
    anything is written; BundleError names the line of every text beyond the rendering limits
    (rendering.RENDER_LIMITS). A plain study renders nothing here."""
    if text_format != rendering.MARKDOWN:
        return TextsHtml()
    problems: list[BundleProblem] = []
    total, done = len(bundle.items) + len(bundle.outputs) + len(bundle.checks), 0

    def html(line: int, what: str, text: str, messages=None) -> str:
        nonlocal done
        done += 1
        if done % 500 == 0:
            progress("rendered", done, total)
        try:
            return rendering.stored_html(text, _message_rows(messages), text_format)
        except rendering.RenderLimitError as exc:
            problems.append(BundleProblem(line, f"{what} cannot be shown as markdown: {exc}"))
            return ""

    items = tuple((html(r.line, f"item {r.id!r}: input", r.input, r.messages),
                   html(r.line, f"item {r.id!r}: reference", r.reference) if r.reference else "")
                  for r in bundle.items)
    outputs = tuple(html(r.line, f"output of {r.system!r} on item {r.item!r}", r.text, r.messages)
                    for r in bundle.outputs)
    checks = tuple((html(r.line, f"check {r.id!r}: input", r.input),
                    html(r.line, f"check {r.id!r}: reference", r.reference) if r.reference else "",
                    html(r.line, f"check {r.id!r}: first", r.first), html(r.line, f"check {r.id!r}: second", r.second))
                   for r in bundle.checks)
    if problems:
        raise BundleError(problems)
    progress("rendered", total, total)
    return TextsHtml(items=items, outputs=outputs, checks=checks)


def _store_bundle(bundle: Bundle, slug: str, progress: Progress, *, settings_chosen: dict | None = None,
                  texts_html: TextsHtml = TextsHtml()) -> Study:
    """``settings_chosen``: the study settings to store (default: the bundle's study line);
    ``texts_html``: the texts rendered for a markdown study (_texts_rendered)."""
    settings_chosen = bundle.study if settings_chosen is None else settings_chosen
    study = Study(
        slug=slug,
        name=bundle.study["name"],
        criterion=bundle.study.get("criterion", ""),
        criteria=bundle.study.get("criteria", []),
        # every setting of the study line but its metric, which is stored once its rows are
        **{name: value for name, value in settings_chosen.items()
           if name in STUDY_SETTINGS and STUDY_SETTINGS[name].kind != METRIC},
    )
    # study_slug_for checked the slug, but another import may take it before this one writes.
    taken = BundleError([BundleProblem(0, f"a study with slug {slug!r} exists already; choose another slug")])
    try:
        study.full_clean()
    except ValidationError as exc:
        if "slug" in exc.message_dict and Study.objects.filter(slug=slug).exists():
            raise taken from None
        if set(exc.message_dict) <= set(STUDY_SETTINGS):  # a bad value of the study line: name it there
            raise BundleError([BundleProblem(0, f"study setting {name!r}: {message}")
                               for name, messages in exc.message_dict.items() for message in messages]) from None
        raise
    try:
        with transaction.atomic():
            study.save()
    except IntegrityError:
        if Study.objects.filter(slug=slug).exists():
            raise taken from None
        raise

    systems = {s.name: s for s in _bulk(System, [System(study=study, name=n) for n in bundle.systems],
                                        progress, "systems")}
    items = {
        i.external_id: i
        for i in _bulk(
            Item,
            [Item(study=study, external_id=r.id, input=r.input, input_messages=_message_rows(r.messages),
                  reference=r.reference, position=n, input_html=html[0], reference_html=html[1],
                  prompt_kind=r.prompt_kind)
             for n, (r, html) in enumerate(zip(bundle.items, texts_html.items or itertools.repeat(("", ""))))],
            progress,
            "items",
        )
    }
    # Outputs and metric scores through the store's executemany, a batch at a time (no model
    # instance per row: 400,000 of each at 200 systems x 2,000 items).
    _insert_batches(
        store.outputs_insert,
        ((items[r.item].pk, systems[r.system].pk, r.sample, r.text, _message_rows(r.messages), html)
         for r, html in zip(bundle.outputs, texts_html.outputs or itertools.repeat(""))),
        len(bundle.outputs),
        progress,
        "outputs",
    )
    # Ratings without a sample index belong to the output shown to annotators: the lowest sample.
    rated_output = _lowest_sample_outputs(study)
    metrics: dict[str, Metric] = {}
    for name in bundle.metrics:
        metrics[name] = Metric.objects.create(study=study, name=name, kind=bundle.metric_kind(name))
    _insert_batches(
        store.metric_scores_insert,
        zip((metrics[r.metric].pk for r in bundle.metric_scores),
            rated_output((items[r.item].pk, systems[r.system].pk) for r in bundle.metric_scores).tolist(),
            (float(r.score) for r in bundle.metric_scores)),
        len(bundle.metric_scores),
        progress,
        "metric scores",
    )
    preferences = []
    for r in bundle.metric_preferences:
        first, second, sign = canonical_pair(r.first, r.second)
        # The order names which output the judge saw first, so it flips with the pair.
        order = r.order if sign > 0 or not r.order else {"AB": "BA", "BA": "AB"}[r.order]
        preferences.append(MetricPreference(metric=metrics[r.metric], item=items[r.item], first=systems[first],
                                            second=systems[second], value=sign * r.preference,
                                            judge=r.judge, prompt=r.prompt, order=order))
    _bulk(MetricPreference, preferences, progress, "metric preferences")
    _bulk(
        HumanScore,
        [HumanScore(output_id=output_id, annotator_label=r.annotator, value=r.score)
         for r, output_id in zip(bundle.human_scores, rated_output(
             (items[r.item].pk, systems[r.system].pk) for r in bundle.human_scores).tolist())],
        progress,
        "human scores",
    )

    # (first, second) -> the items both have: from one presence matrix, never item by pair
    shared = shared_items((r.item for r in bundle.outputs), (r.system for r in bundle.outputs))
    pair_keys = sorted(shared)
    pairs = {
        (p.first.name, p.second.name): p
        for p in _bulk(PairState, [PairState(study=study, first=systems[a], second=systems[b]) for a, b in pair_keys],
                       progress, "pairs")
    }
    judged = set()
    for r in bundle.human_preferences:
        first, second, _ = canonical_pair(r.first, r.second)
        judged.add((r.item, first, second))
    by_key = _store_judged_comparisons(study, items, systems, pairs, judged, progress)
    _store_imported_judgements(bundle, by_key, progress)
    # Checks are no items: no comparison, no pair, so the protocol never sees them.
    _bulk(CheckItem, [CheckItem(study=study, external_id=r.id, input=r.input, reference=r.reference, first=r.first,
                                second=r.second, expected=r.expected, position=n, input_html=html[0],
                                reference_html=html[1], first_html=html[2], second_html=html[3])
                      for n, (r, html) in enumerate(zip(bundle.checks,
                                                        texts_html.checks or itertools.repeat(("",) * 4)))],
          progress, "checks")
    if not study.budget:  # what the design can spend: every item of every pair it runs, ratings_per_item times
        study.budget = study.design.most_judgements({key: n * study.ratings_per_item for key, n in shared.items()},
                                                    study.active_settings)
        study.save(update_fields=["budget"])
    return study


def _lowest_sample_outputs(study: Study) -> Callable[[Iterable[tuple[int, int]]], np.ndarray]:
    """A function of (item id, system id) pairs -> the id of each one's lowest sample's output
    (what a rating without a sample index rates: the output annotators are shown), over sorted
    arrays of the study's outputs rather than a dict keyed by (item, system) (400,000 keys at
    200 systems x 2,000 items: about 100 MB of the import's peak)."""
    rows = np.fromiter(itertools.chain.from_iterable(
        Output.objects.filter(item__study=study).values_list("item_id", "system_id", "sample", "pk").iterator(BATCH)),
        np.int64).reshape(-1, 4)
    width = int(rows[:, 1].max()) + 1 if len(rows) else 1
    keys = rows[:, 0] * width + rows[:, 1]
    order = np.lexsort((rows[:, 2], keys))  # by (item, system), the lowest sample first
    keys, ids = keys[order], rows[order, 3]
    first = np.ones(len(keys), bool)
    first[1:] = keys[1:] != keys[:-1]
    keys, ids = keys[first], ids[first]

    def output_ids(pairs: Iterable[tuple[int, int]]) -> np.ndarray:
        # every rated (item, system) has an output: the bundle's reader checked it
        wanted = np.fromiter(itertools.chain.from_iterable(pairs), np.int64).reshape(-1, 2)
        return ids[np.searchsorted(keys, wanted[:, 0] * width + wanted[:, 1])]

    return output_ids


def _store_judged_comparisons(study: Study, items: dict, systems: dict, pairs: dict, judged: set,
                              progress: Progress) -> dict:
    """The comparisons that imported judgements refer to, by (item external id, first, second).

    A pair's comparison of an item is stored when it is first used (judged here, leased by
    serving, scored for separability): storing one per item and pair made the import grow with
    items x pairs (2.45 M rows at 50 systems x 2,000 items)."""
    keys = sorted(judged)
    batch = [Comparison(study_id=study.pk, item_id=items[item].pk, first_id=systems[a].pk, second_id=systems[b].pk,
                        pair_id=pairs[(a, b)].pk) for item, a, b in keys]
    return dict(zip(keys, _bulk(Comparison, batch, progress, "comparisons")))


def _message_rows(messages) -> list[dict] | None:
    return None if messages is None else messages_rows(messages)


def _stored_order(item: str, first: str, second: str, annotator: str) -> bytes:
    """Where ``_store_imported_judgements`` stores a judgement: a hash of its item, pair (in
    canonical order) and annotator, as the bundle names them; uniform over an item's judgements."""
    return hashlib.blake2b("\x1f".join((item, first, second, annotator)).encode(), digest_size=8).digest()


def _store_imported_judgements(bundle: Bundle, comparisons: dict, progress: Progress) -> None:
    labels = sorted({r.annotator for r in bundle.human_preferences})
    annotators = {a.external_id: a for a in Annotator.objects.filter(platform=Annotator.Platform.IMPORT,
                                                                     external_id__in=labels)}
    missing = [Annotator(platform=Annotator.Platform.IMPORT, external_id=label or "anonymous")
               for label in labels if (label or "anonymous") not in annotators]
    for a in Annotator.objects.bulk_create(missing):
        annotators[a.external_id] = a
    judgements = []
    # A rubric study's lines are one per criterion: one judgement per (item, pair, annotator)
    # holds them all, its value the first criterion's (the bundle reader checked completeness).
    criteria = [c["name"] for c in bundle.study.get("criteria", ())]
    by_judgement: dict[tuple, Judgement] = {}
    places: list[bytes] = []   # where each judgement is stored (``_stored_order``)
    for r in bundle.human_preferences:
        first, second, sign = canonical_pair(r.first, r.second)
        if criteria:
            key = (r.item, first, second, r.annotator)
            judgement = by_judgement.get(key)
            if judgement is None:
                judgement = by_judgement[key] = Judgement(
                    comparison=comparisons[(r.item, first, second)], annotator=annotators[r.annotator],
                    value=0, answers={}, source=Judgement.Source.IMPORT)
                judgements.append(judgement)
                places.append(_stored_order(r.item, first, second, r.annotator))
            judgement.answers[r.criterion] = answer_row(value=sign * r.preference, strength=r.strength,
                                                        reason=r.reason)
            if r.criterion == criteria[0]:
                judgement.value = sign * r.preference
            continue
        judgements.append(Judgement(
            comparison=comparisons[(r.item, first, second)],
            annotator=annotators[r.annotator or "anonymous"],
            value=sign * r.preference,
            source=Judgement.Source.IMPORT,
        ))
        places.append(_stored_order(r.item, first, second, r.annotator or "anonymous"))
    # Stored (and so counted, oldest first) in an order that reads no value: an item's first
    # judgement is its e-process step, and a file sorted by preference would otherwise give every
    # item its least judgement as its step (docs/formulas.md, section 8). The order is a hash of
    # each judgement's identity (item, pair, annotator), not of the file's order, so an export
    # imported again is stored as the original was.
    judgements = [judgement for _, _, judgement in sorted(zip(places, itertools.count(), judgements))]
    _bulk(Judgement, judgements, progress, "judgements")
    counted = Counter(j.comparison for j in judgements)
    for comparison, count in counted.items():
        comparison.judgement_count = count
    Comparison.objects.bulk_update(list(counted), ["judgement_count"], batch_size=BATCH)


def study_separability_compute(*, study_id: int, progress: Progress = _no_progress) -> int:
    """Score and store the separability of every pair's item whose two outputs have >= 2 samples.

    Long-running: call outside any transaction. Progress is written to the Study row as it
    goes (so another process can show it); the comparisons are stored (or, leased or judged
    already, updated) in one transaction at the end, so a crash leaves the old values and
    status "failed". Returns the number of comparisons scored.
    """
    study = Study.objects.get(pk=study_id)
    keys, first_texts, second_texts = comparison_sample_texts(study=study)
    Study.objects.filter(pk=study_id).update(separability_status="running", separability_done=0,
                                             separability_error="")

    def report(done: int, total: int) -> None:
        Study.objects.filter(pk=study_id).update(separability_done=done, separability_total=total)
        progress("separability", done, total)

    try:
        raw = compute_alignments(first_texts, second_texts, study.separability_similarity, progress=report)
        normalised = raw.normalised()
        scored = ["self_first", "self_second", "cross", "separability"]
        rows = [Comparison(study_id=study_id, item_id=item_id, first_id=first_id, second_id=second_id, pair_id=pair_id,
                           self_first=float(normalised.self_first[n]), self_second=float(normalised.self_second[n]),
                           cross=float(normalised.cross[n]), separability=float(normalised.separability[n]))
                for n, (item_id, first_id, second_id, pair_id) in enumerate(keys)]
        with transaction.atomic():
            # A comparison leased or judged meanwhile keeps its counters; only its scores change.
            Comparison.objects.bulk_create(rows, batch_size=BATCH, update_conflicts=True,
                                           unique_fields=["item", "first", "second"], update_fields=scored)
            Study.objects.filter(pk=study_id).update(separability_status="done")
    except Exception as exc:
        Study.objects.filter(pk=study_id).update(separability_status="failed", separability_error=str(exc)[:2000])
        raise
    return len(keys)


# What may change while a study runs, and what a draft's page sets before its launch (the table
# of study settings, protocol/study_settings.py); the metric is chosen by name, apart.
RUNNING_SETTINGS = frozenset(name for name, setting in SETTINGS.items()
                             if not setting.fixed and {RUNNING, API} & setting.surfaces)
DRAFT_SETTINGS = frozenset(name for name, setting in SETTINGS.items()
                           if DRAFT in setting.surfaces and setting.kind != METRIC)


def _unknown(changes: Mapping[str, object], allowed: frozenset, what: str) -> None:
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not {what}; these are: {', '.join(sorted(allowed))}")


def study_settings_update(*, study: Study, changes: Mapping[str, object]) -> Study:
    """Change settings a researcher may change while a study runs (``changes``: setting name ->
    value, each one of RUNNING_SETTINGS; takes the study lock). All of them or none.

    ValueError when the study is a draft (its settings page launches it), when the budget would
    go below the judgements already spent plus those asked for in open rounds (naming both), or
    when checks are asked for without check items (QualityError); ValidationError names a value
    out of its bounds or settings that disagree. A larger budget opens new rounds at once; crowd
    and quality settings act on the next HIT served and the next sweep. The protocol's own
    parameters (Study.PROTOCOL_PARAMETERS) are fixed once it has started.
    """
    _unknown(changes, RUNNING_SETTINGS, "a setting that may change while a study runs")
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.DRAFT:
            raise ValueError("the study is a draft: set its protocol parameters and launch it on its settings page")
        if {"check_every", "onboarding_checks"} & set(changes):
            checks_need_items(study=study, check_every=changes.get("check_every", study.check_every),
                              onboarding_checks=changes.get("onboarding_checks", study.onboarding_checks))
        rows = list(PairState.objects.select_for_update().filter(study=study).order_by("id"))
        state = protocol_state.study_rubric_load(study, rows)
        imported = study.protocol_imported_judgements
        committed = state.spent + state.reserved - imported
        if "budget" in changes and changes["budget"] < committed:
            raise ValueError(f"the budget cannot be below {committed}: judgements already spent and "
                             f"asked for in open rounds ({state.spent - imported} + {state.reserved})")
        model_update(instance=study, data=dict(changes))
        resized = rubric.with_settings(state, protocol_state.protocol_settings(study))
        opened = rubric.open_rounds(runtime.metrics_combined(study=study, state=resized))
        protocol_state.study_state_save(study, rows, opened, before=state)
        return study


def study_draft_update(*, study: Study, metric: Metric | None, changes: Mapping[str, object]) -> Study:
    """Set the protocol parameters of a draft study before its launch (``changes``: setting name ->
    value, each one of DRAFT_SETTINGS; ``metric`` None: a human-only study).

    ValueError when the study is no longer a draft; ValidationError names a bad value (e.g. a
    metric of another study, γ outside its bounds).
    """
    _unknown(changes, DRAFT_SETTINGS, "a setting of a draft")
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status != Study.Status.DRAFT or study.protocol_started:
            raise ValueError("the study has been launched: its protocol parameters are fixed")
        return model_update(instance=study, data={"metric": metric, **changes})


def study_launch(*, study: Study) -> Study:
    """Start the protocol of a draft study (opening its first rounds) and serve it.

    ValueError when the study is not a draft (launched already).
    """
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status != Study.Status.DRAFT or study.protocol_started:
            raise ValueError("the study is not a draft: it has been launched already")
        study.full_clean()
        runtime.protocol_start(study=study)
        study.status = Study.Status.RUNNING
        study.save(update_fields=["status"])
        return study


def item_withdraw(*, item: Item) -> Item:
    """Withdraw an item (e.g. flagged as broken): serving never leases its comparisons again.

    Live leases of the item may still be answered; judgements already given stay.
    """
    Item.objects.filter(pk=item.pk).update(withdrawn=True)
    item.withdrawn = True
    return item


def api_token_create(*, user) -> Token:
    """A new API token for ``user``, replacing (revoking) any earlier one."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def api_token_revoke(*, user) -> bool:
    """Delete ``user``'s API token; False when there was none."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)



def demo_user_ensure(*, username: str, password: str, is_staff: bool = False):
    """Create or reset a demo account (used by the README's demo command)."""
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.is_staff = is_staff
    user.is_superuser = is_staff
    user.save()
    return user


__all__ = [
    "bundle_limits",
    "study_draft_update",
    "study_launch",
    "study_settings_update",
    "item_withdraw",
    "demo_user_ensure",
    "study_import",
    "api_token_create",
    "api_token_revoke",
    "study_separability_compute",
    "study_slug_for",
]
