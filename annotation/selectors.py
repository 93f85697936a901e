"""Reads: querysets and plain data for views, the API and the protocol."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.crypto import salted_hmac

from protocol.preferences import preferences_from_scores

from . import sql
from .models import Annotator, Assignment, Comparison, Item, Judgement, PairState, Study
from .models import CrowdSession as CrowdEntry  # the name CrowdSession is the session dataclass below

# A pair with an open round (or a filled one about to be closed) is work still to serve.
ACTIVE_PAIR_STATUSES = ("open", "filled")


def study_list_for_home(*, user) -> list[Study]:
    """The studies ``user`` may know of (access.studies_visible_to; drafts only for their
    researchers), with the counts the front page shows.

    Each study carries ``can_annotate``, ``can_research`` (access.study_roles_for_user) and
    ``work_left`` (False once no pair has an open or filled round: nothing more to serve).
    """
    from .access import studies_visible_to, study_roles_for_user

    roles = study_roles_for_user(user)
    studies = Study.objects.filter(pk__in=studies_visible_to(user).values("pk")).annotate(
        system_count=Count("systems", distinct=True),
        item_count=Count("items", distinct=True),
        active_pairs=Count("pair_states", filter=Q(pair_states__status__in=ACTIVE_PAIR_STATUSES), distinct=True),
    ).order_by("name")
    visible = []
    for study in studies:
        role = roles(study)
        if study.status == Study.Status.DRAFT and not role.research:
            continue
        study.can_annotate, study.can_research = role.annotate, role.research
        study.work_left = study.active_pairs > 0
        visible.append(study)
    return visible


def excluded_annotators(*, study: Study) -> QuerySet:
    """Ids of the workers currently excluded from ``study`` (a subquery)."""
    from .models import AnnotatorExclusion

    return AnnotatorExclusion.objects.filter(study=study, excluded=True).values("annotator_id")


def counted_judgements(*, study: Study) -> QuerySet[Judgement]:
    """The judgements the protocol counts: real comparisons (no check, no repeat) by workers
    who are not excluded. The one definition for the protocol, decisions, reports, exports'
    counted rows and the budget; a judgement of an excluded worker counts again once they are
    re-included (services/quality.py re-decides)."""
    from .models import JudgementKind

    return (Judgement.objects.filter(comparison__study=study, kind=JudgementKind.REAL)
            .exclude(annotator_id__in=excluded_annotators(study=study)))


def judgement_agreement(*, study: Study, pair: PairState | None = None, bootstrap: int = 1000):
    """Agreement between the annotators of ``study`` (or of one ``pair``): protocol.agreement
    (Krippendorff's α nominal and ordinal with bootstrap intervals over comparisons, percent
    agreement) over the counted judgements of comparisons judged at least twice. A comparison
    is a unit and its annotators are the coders; values −1/0/+1 in the comparison's order."""
    from protocol.agreement import agreement

    rows = counted_judgements(study=study)
    if pair is not None:
        rows = rows.filter(comparison__pair=pair)
    comparisons, annotators, values = [], [], []
    for comparison, annotator, value in rows.values_list("comparison_id", "annotator_id", "value"):
        comparisons.append(comparison)
        annotators.append(annotator)
        values.append(value)
    return agreement(comparisons, annotators, values, bootstrap=bootstrap, seed=study.protocol_seed)


def study_progress(*, study: Study) -> dict:
    """Budget, judgements and decided pairs of one study (counted judgements only;
    ``lost_judgements``: judgements of excluded workers, spent but no longer counted)."""
    judgements = counted_judgements(study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    pairs = PairState.objects.filter(study=study).aggregate(total=Count("id"),
                                                            decided=Count("id", filter=Q(status="decided")))
    return {
        "budget": study.budget,
        "judgements": judgements.count(),
        "live_judgements": live,
        "budget_left": max(study.budget - live - study.protocol_lost_judgements, 0),
        "lost_judgements": study.protocol_lost_judgements,
        "pairs": pairs["total"],
        "pairs_decided": pairs["decided"],
    }


def comparison_sample_texts(*, study: Study) -> tuple[list[int], list[list[str]], list[list[str]]]:
    """Comparisons whose two outputs have >= 2 samples, with the sample texts in sample order.

    Returns (comparison ids (n,), first system's samples [n][k1], second's [n][k2]).
    """
    from .models import Comparison, Output

    texts: dict[tuple[int, int], list[str]] = {}
    rows = Output.objects.filter(item__study=study).order_by("item_id", "system_id", "sample")
    for item_id, system_id, text in rows.values_list("item_id", "system_id", "text").iterator():
        texts.setdefault((item_id, system_id), []).append(text)
    ids, first, second = [], [], []
    comparisons = Comparison.objects.filter(study=study).order_by("id")
    for pk, item_id, first_id, second_id in comparisons.values_list("id", "item_id", "first_id", "second_id"):
        a, b = texts.get((item_id, first_id), []), texts.get((item_id, second_id), [])
        if len(a) >= 2 and len(b) >= 2:
            ids.append(pk)
            first.append(a)
            second.append(b)
    return ids, first, second


def study_pair_ids(*, study: Study) -> dict[tuple[str, str], tuple[int, int]]:
    """(first name, second name) -> (first id, second id) for every pair with comparisons."""
    from .models import Comparison

    rows = (Comparison.objects.filter(study=study)
            .values_list("first__name", "second__name", "first_id", "second_id").distinct())
    return {(a, b): (i, j) for a, b, i, j in rows}


def study_pair_capacities(*, study: Study) -> dict[tuple[str, str], int]:
    """(first, second) -> human judgements the pair can receive (comparisons x ratings)."""
    from .models import Comparison

    rows = (Comparison.objects.filter(study=study).values("first__name", "second__name")
            .annotate(n=Count("id")).values_list("first__name", "second__name", "n"))
    return {(a, b): n * study.ratings_per_item for a, b, n in rows}


def study_metric_labels(*, study: Study, metric=None) -> dict[tuple[str, str], dict[str, int]]:
    """(first, second) -> {item external id: the metric's preference}; {} without a metric.

    ``metric`` defaults to the study's protocol metric. Scalar metrics give
    sign(s_first - s_second) with the metric's tie margin (SPEC §1).
    """
    from .models import Comparison, Metric, MetricPreference, MetricScore

    metric = study.metric if metric is None else metric
    if metric is None:
        return {}
    labels: dict[tuple[str, str], dict[str, int]] = {}
    if metric.kind == Metric.Kind.PREFERENCE:
        rows = MetricPreference.objects.filter(metric=metric).values_list(
            "first__name", "second__name", "item__external_id", "value")
        for a, b, item, value in rows.iterator():
            labels.setdefault((a, b), {})[item] = value
        return labels
    scores = dict(
        ((item, system), value)
        for item, system, value in MetricScore.objects.filter(metric=metric).values_list(
            "output__item__external_id", "output__system__name", "value").iterator()
    )
    comparisons = [
        (item, a, b)
        for item, a, b in Comparison.objects.filter(study=study).values_list(
            "item__external_id", "first__name", "second__name").iterator()
        if (item, a) in scores and (item, b) in scores
    ]
    values = preferences_from_scores([scores[(i, a)] for i, a, _ in comparisons],
                                     [scores[(i, b)] for i, _, b in comparisons], eps=metric.tie_margin)
    for (item, a, b), value in zip(comparisons, values.tolist()):
        labels.setdefault((a, b), {})[item] = value
    return labels


def study_judgement_labels(*, study: Study) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(first, second) -> [(item external id, value)] of every counted judgement, oldest first."""
    rows = counted_judgements(study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value")
    labels: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a, b, item, value in rows.iterator():
        labels.setdefault((a, b), []).append((item, value))
    return labels


def study_draw_chances(*, study: Study) -> dict[tuple[str, str], dict[str, float]]:
    """(first, second) -> {item external id: chance of its first counted judgement's draw}, for
    items drawn by separability-weighted or stratified choice (Assignment.draw_probability)."""
    rows = counted_judgements(study=study).filter(assignment__draw_probability__isnull=False).order_by("id") \
        .values_list("comparison__first__name", "comparison__second__name", "comparison__item__external_id",
                     "assignment__draw_probability")
    chances: dict[tuple[str, str], dict[str, float]] = {}
    for a, b, item, chance in rows.iterator():
        chances.setdefault((a, b), {}).setdefault(item, chance)
    return chances


def hit_display(*, assignment, study: Study | None = None, done: int | None = None) -> dict:
    """What the annotator sees for a HIT: input, and the two outputs in screen order.

    ``done``: the annotator's judgements in the study, when the caller has counted them already.
    """
    from .models import CheckItem

    if assignment.check_item_id is not None:
        # A check looks like any HIT (services/checks.py): its input and its two texts.
        check = CheckItem.objects.select_related("study").get(pk=assignment.check_item_id)
        left, right = (check.second, check.first) if assignment.shown_swapped else (check.first, check.second)
        if done is None:
            done = annotator_judgement_count(study=study or check.study, annotator=assignment.annotator_id)
        return {"assignment": assignment, "item": check, "left": left, "right": right, "done": done}
    # The comparison, its item and the outputs of its two systems in one statement (plain SQL,
    # annotation/sql.py: this read is on every HIT's path).
    found = sql.rows(
        'SELECT i."id", i."study_id", i."external_id", i."input", i."reference", c."first_id", c."second_id", '
        f'o."system_id", o."sample", o."text" FROM {sql.COMPARISON} c JOIN {sql.ITEM} i ON i."id" = c."item_id" '
        f'JOIN {sql.OUTPUT} o ON o."item_id" = c."item_id" AND o."system_id" IN (c."first_id", c."second_id") '
        'WHERE c."id" = %s ORDER BY o."system_id", o."sample"', [assignment.comparison_id])
    item = sql.instance(Item, ("id", "study_id", "external_id", "input", "reference"), found[0][:5])
    first_id, second_id = found[0][5:7]
    study = study or Study.objects.get(pk=item.study_id)
    texts: dict[int, str] = {}
    # The study's shown sample of each output, else its lowest sample.
    for *_, system_id, sample, text in found:
        if system_id not in texts or sample == study.shown_sample:
            texts[system_id] = text
    first, second = texts[first_id], texts[second_id]
    left, right = (second, first) if assignment.shown_swapped else (first, second)
    if done is None:
        done = annotator_judgement_count(study=study, annotator=assignment.annotator_id)
    return {"assignment": assignment, "item": item, "left": left, "right": right, "done": done}


def annotator_judgement_count(*, study: Study, annotator) -> int:
    """Real judgements of ``annotator`` (an Annotator or its id) in ``study`` (their session's
    work: checks and repeats are not comparisons of the study).

    Read from the annotator's judgements, each checked for its study (an EXISTS): as a join,
    SQLite walked every comparison of the study instead (12,000 for SummEval, per request).
    """
    annotator_id = getattr(annotator, "pk", annotator)
    return sql.one(
        f'SELECT COUNT(*) FROM {sql.JUDGEMENT} j WHERE j."annotator_id" = %s AND j."kind" = %s '
        f'AND EXISTS (SELECT 1 FROM {sql.COMPARISON} c WHERE c."id" = j."comparison_id" AND c."study_id" = %s)',
        [annotator_id, "real", study.pk])[0]


def study_of_slug(*, slug: str) -> Study | None:
    """The study at ``slug``: the first read of every annotator request (plain SQL)."""
    return next(iter(Study.objects.raw(f'SELECT * FROM {sql.STUDY} WHERE "slug" = %s', [slug])), None)


def _pair_labels_table(labels: dict[tuple[str, str], list[tuple[str, int]]]):
    import numpy as np

    from protocol.preferences import PairLabels

    return {
        pair: PairLabels(pair[0], pair[1], np.array([i for i, _ in rows], dtype=object),
                         np.array([v for _, v in rows], dtype=np.int8), np.array([""] * len(rows), dtype=object))
        for pair, rows in labels.items() if rows
    }


def protocol_pair_of(row: PairState):
    """The protocol's state of one pair row (protocol.adaptive.PairState), None before the start.

    Decoded by the one codec (services/protocol_state.py), validated.
    """
    from .services.protocol_state import pair_state_of

    return pair_state_of(row) if row.state else None


# SPA from fewer judged items per pair, or fewer pairs, is mostly noise (its interval spans
# most of [0, 1] on PandaLM with 5 items a pair): the dashboard says what is missing instead.
SPA_MIN_ITEMS_PER_PAIR = 10
SPA_MIN_PAIRS = 3
SPA_REPLICATES = 40
SPA_PERMUTATIONS = 300
LEADERBOARD_REPLICATES = 200
PROJECTION_DRAWS = 300


def _dashboard_version(study: Study) -> tuple:
    """A cheap fingerprint of everything the dashboard shows; it changes with every write."""
    from django.db.models import Max, Sum

    from .models import Comparison, PairStateHistory

    from .models import AnnotatorExclusion

    judgements = Judgement.objects.filter(comparison__study=study).aggregate(n=Count("id"), last=Max("id"))
    exclusions = AnnotatorExclusion.objects.filter(study=study).aggregate(
        n=Count("id", filter=Q(excluded=True)), last=Max("updated_at"))
    pairs = PairState.objects.filter(study=study).aggregate(
        rounds=Sum("round"), quota=Sum("quota_left"), decided=Count("id", filter=~Q(decision=0)),
        updated=Max("updated_at"))
    history = PairStateHistory.objects.filter(pair_state__study=study).aggregate(n=Count("id"), last=Max("id"))
    separability = Comparison.objects.filter(study=study).exclude(separability=None).count()
    return (study.pk, study.slug, str(study.created_at), study.budget, study.metric_id, study.gamma, study.batch_size, study.status,
            judgements["n"], judgements["last"], pairs["rounds"], pairs["quota"], pairs["decided"],
            str(pairs["updated"]), history["n"], history["last"], separability,
            exclusions["n"], str(exclusions["last"]), study.protocol_lost_judgements)


def study_dashboard_data(*, study: Study) -> dict:
    """Everything the researcher dashboard shows, as plain data (figures are built from it).

    Cached per study until anything it depends on changes (``_dashboard_version``), so the
    dashboard's polling costs a few aggregate queries while nothing happens.
    """
    from django.core.cache import cache

    key = f"evalapp:dashboard:{study.pk}"
    version = _dashboard_version(study)
    cached = cache.get(key)
    if cached is not None and cached[0] == version:
        return cached[1]
    data = _study_dashboard_data(study=study)
    cache.set(key, (version, data), timeout=3600)
    return data


def _leaderboard(systems, judgements, decisions, seed: int) -> list[dict]:
    """Leaderboard rows best first: Bradley–Terry from every human judgement, ordered by the
    protocol's partial order first (tier = layer of the decision DAG), then by score."""
    import numpy as np

    from protocol import ranking
    from protocol.leaderboard import bradley_terry

    index = {s: k for k, s in enumerate(systems)}
    rows = [(index[a], index[b], v) for (a, b), labels in judgements.items() for _, v in labels]
    first, second, values = (np.array(c) for c in zip(*rows)) if rows else ([], [], [])
    board = bradley_terry(systems, first, second, values, replicates=LEADERBOARD_REPLICATES, seed=seed)
    layout = ranking.dag_layout(ranking.significance_graph(systems, decisions))
    tier = {n["system"]: n["layer"] + 1 for n in layout["nodes"]}
    better, worse = {s: [] for s in systems}, {s: [] for s in systems}
    for (a, b), d in decisions.items():
        if d:
            winner, loser = (a, b) if d > 0 else (b, a)
            better[winner].append(loser)
            worse[loser].append(winner)

    def finite(x):
        return None if np.isnan(x) else float(x)

    out = []
    for k in board.order:
        s = systems[k]
        out.append({
            "system": s, "tier": tier[s], "score": finite(board.score[k]), "low": finite(board.score_low[k]),
            "high": finite(board.score_high[k]), "rank": int(board.rank[k]), "rank_low": int(board.rank_low[k]),
            "rank_high": int(board.rank_high[k]), "wins": int(board.wins[k]), "ties": int(board.ties[k]),
            "losses": int(board.losses[k]),
            "judgements": int(board.wins[k] + board.ties[k] + board.losses[k]),
            "better_than": _natural(better[s]), "worse_than": _natural(worse[s]),
        })
    out.sort(key=lambda r: (r["tier"], r["score"] is None, -(r["score"] or 0.0)))
    for position, row in enumerate(out, start=1):
        row["position"] = position
    return out


def _natural(names) -> list[str]:
    from protocol.leaderboard import natural_sorted

    return list(natural_sorted(names))


def _pair_matrix(order: list[str], pairs: list[dict]) -> list[dict]:
    """Rows of the pair matrix in leaderboard order: cell (row, column) = θ that the row system
    is better than the column system, and the protocol's decision seen from the row."""
    by_key = {(p["first"], p["second"]): p for p in pairs}
    rows = []
    for a in order:
        cells = []
        for b in order:
            if a == b:
                cells.append({"self": True})
                continue
            p, flip = (by_key.get((a, b)), False) if (a, b) in by_key else (by_key.get((b, a)), True)
            if p is None:
                cells.append({"missing": True, "other": b})
                continue
            theta = p["theta"] if p["theta"] is None or not flip else 1 - p["theta"]
            decision = -p["decision"] if flip else p["decision"]
            cells.append({"other": b, "first": p["first"], "second": p["second"], "theta": theta,
                          "decision": decision, "status": p["status"], "judgements": p["judgements"],
                          "tone": "better" if decision > 0 else "worse" if decision < 0 else
                          "stopped" if p["status"] in ("exhausted", "futile") else "open"})
        rows.append({"system": a, "cells": cells})
    return rows


def _spa_summary(human, metric, seed: int) -> dict:
    """SPA/PA between humans and the metric on the judged items, with a bootstrap interval,
    or why there is not enough data for it yet."""
    import numpy as np

    from protocol import spa

    used, human_rows, metric_rows = [], [], []
    for p in sorted(set(human) & set(metric)):
        metric_of = dict(zip(metric[p].items, metric[p].values))
        per_item: dict[str, list[int]] = {}
        for item, value in zip(human[p].items, human[p].values):
            if item in metric_of:
                per_item.setdefault(item, []).append(int(value))
        if len(per_item) >= SPA_MIN_ITEMS_PER_PAIR:
            items = sorted(per_item)
            used.append(p)
            human_rows.append([float(np.mean(per_item[i])) for i in items])
            metric_rows.append([float(metric_of[i]) for i in items])
    if len(used) < SPA_MIN_PAIRS:
        return {"enough": False, "pairs": len(used), "min_pairs": SPA_MIN_PAIRS,
                "min_items": SPA_MIN_ITEMS_PER_PAIR}
    result = spa.compare_differences(used, human_rows, metric_rows, permutations=SPA_PERMUTATIONS, seed=seed)
    interval = spa.bootstrap_interval(used, human_rows, metric_rows, replicates=SPA_REPLICATES,
                                      permutations=SPA_PERMUTATIONS, seed=seed)
    return {"enough": True, "spa": result.spa, "pa": result.pa, "pairs": len(used),
            "spa_low": interval.spa[0], "spa_high": interval.spa[1],
            "pa_low": interval.pa[0], "pa_high": interval.pa[1], "level": interval.level}


def _study_dashboard_data(*, study: Study) -> dict:
    import numpy as np

    from protocol import favi as favi_lib
    from protocol import ranking
    from protocol.projection import judgements_to_finish

    from .models import Comparison, Judgement, PairState, PairStateHistory

    systems = tuple(_natural(study.systems.values_list("name", flat=True)))
    states = list(PairState.objects.filter(study=study).select_related("first", "second"))
    judgements = counted_judgements(study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    imported = judgements.filter(source=Judgement.Source.IMPORT).count()
    reserved = sum(s.quota_left for s in states)
    judgement_labels = study_judgement_labels(study=study)
    human = _pair_labels_table(judgement_labels)
    metric_raw = study_metric_labels(study=study)
    metric = _pair_labels_table({pair: sorted(labels.items()) for pair, labels in metric_raw.items()})
    favi = favi_lib.favi_by_pair(human, metric) if human and metric else {}
    human_decisions = ranking.decisions_from_labels(human) if human else {}
    metric_decisions = ranking.decisions_from_labels(metric) if metric else {}
    pairs, running = [], []
    for s in states:
        key = (s.first.name, s.second.name)
        protocol_pair = protocol_pair_of(s)
        f = favi.get(key)
        status = protocol_pair.status if protocol_pair else "—"
        pairs.append({
            "first": key[0], "second": key[1], "status": status,
            "decision": s.decision, "theta": s.theta, "round": s.round, "quota": s.quota_left,
            "judgements": protocol_pair.judgements if protocol_pair else 0,
            "capacity": protocol_pair.capacity if protocol_pair else 0,
            "favi": None if f is None or np.isnan(f.favi) else f.favi,
            "agreement": None if f is None else f.sample_accuracy,
            "category": (ranking.decision_category(human_decisions.get(key, 0), metric_decisions[key])
                         if key in metric_decisions else None),
        })
        if protocol_pair and status not in ("decided", "exhausted", "futile") and protocol_pair.remaining > 0:
            running.append((protocol_pair.human_counts, protocol_pair.remaining))
    order_index = {name: k for k, name in enumerate(systems)}
    pairs.sort(key=lambda p: (order_index.get(p["first"], 0), order_index.get(p["second"], 0)))
    protocol_decisions = {(p["first"], p["second"]): p["decision"] for p in pairs}
    dags = {}
    if systems:
        for name, decisions in (("protocol", protocol_decisions), ("human", human_decisions),
                                ("metric", metric_decisions)):
            dags[name] = ranking.dag_layout(ranking.significance_graph(systems, decisions))
    leaderboard = _leaderboard(systems, judgement_labels, protocol_decisions, study.protocol_seed) if systems else []
    order = [r["system"] for r in leaderboard]
    summary = favi_lib.summarize(favi) if favi else None
    timeline = [
        {"pair": f"{h.pair_state.first.name} vs {h.pair_state.second.name}", "round": h.round, "theta": h.theta,
         "decision": h.decision, "judgements": h.judgements, "at": h.created_at.isoformat()}
        for h in PairStateHistory.objects.filter(pair_state__study=study).select_related(
            "pair_state__first", "pair_state__second").order_by("created_at", "id")
    ]
    separability = [v for v in Comparison.objects.filter(study=study).exclude(separability=None)
                    .values_list("separability", flat=True)]
    statuses: dict[str, int] = {}
    for p in pairs:
        statuses[p["status"]] = statuses.get(p["status"], 0) + 1
    projection = None
    if running:
        result = judgements_to_finish([c for c, _ in running], [r for _, r in running], batch=study.batch_size,
                                      gamma=study.gamma, draws=PROJECTION_DRAWS, seed=study.protocol_seed)
        projection = {"pairs": len(running), "total": result.total, "low": result.low, "high": result.high,
                      "level": result.level}
    total = study.budget
    lost = study.protocol_lost_judgements
    left = max(total - live - lost - reserved, 0)

    def percent(x: float) -> float:
        return round(100 * min(max(x, 0), total) / total, 2) if total else 0.0

    categories = {c: 0 for c in ranking.CATEGORIES}
    for p in pairs:
        if p["category"]:
            categories[p["category"]] += 1
    per_system = favi_lib.per_system_favi(favi) if favi else {}
    return {
        "systems": systems,
        "order": order,
        "budget": {"total": total, "spent": live + lost, "counted": live, "lost": lost, "imported": imported,
                   "reserved": reserved, "left": left,
                   "spent_percent": percent(live + lost), "reserved_percent": percent(reserved),
                   "projection": projection,
                   "projected_percent": None if projection is None else percent(live + lost + projection["total"])},
        "pairs": pairs,
        "statuses": dict(sorted(statuses.items())),
        "dags": dags,
        "leaderboard": leaderboard,
        "matrix": _pair_matrix(order, pairs),
        "per_system_favi": {k: per_system[k].tolist() for k in order if k in per_system},
        "favi_summary": None if summary is None else {
            "mean_abs_favi": summary.mean_abs_favi, "sample_accuracy": summary.sample_accuracy,
            "system_accuracy": summary.system_accuracy, "pairs": summary.pairs},
        "categories": categories if any(categories.values()) else None,
        "spa": _spa_summary(human, metric, study.protocol_seed) if human and metric else None,
        "timeline": timeline,
        "separability": separability,
        "metric": study.metric.name if study.metric_id else None,
        "decided": sum(1 for p in pairs if p["decision"]),
        "judgements": live + imported,
    }


def _pair_design(study: Study, protocol_pair) -> dict | None:
    """How the pair's items were chosen and whether its decision is design-weighted; None for
    uniform choice. ``weighted``: every judged item has a recorded draw, so the decision counts
    each with its design weight (``ess``: their Kish effective sample size) and holds for all
    the pair's items; otherwise the counts are unweighted and hold for the over-sampled items."""
    if study.item_choice == Study.ItemChoice.UNIFORM or protocol_pair is None or not protocol_pair.judged_items:
        return None
    from protocol import adaptive
    from protocol.allocation import design_weights

    weighted = adaptive.design_weighted(protocol_pair)
    ess = None
    if weighted:
        weights = design_weights([chance for _, chance in protocol_pair.draws])
        ess = float(weights.sum() ** 2 / (weights ** 2).sum())
    return {"choice": study.get_item_choice_display(), "weighted": weighted,
            "items": len(protocol_pair.judged_items), "ess": ess}


def pair_detail_data(*, study: Study, first: str, second: str) -> dict | None:
    """One system pair (canonical order) as plain data: its protocol state, θ by round with
    the credible interval of the share of judgements preferring ``first``, every item with
    its judgements, metric label and separability, and how the metric's sign test compares
    with the humans'. None when the study has no such pair."""
    import numpy as np
    from scipy.stats import beta

    from protocol import favi as favi_lib
    from protocol import ranking

    from .models import Comparison, PairStateHistory

    row = PairState.objects.filter(study=study, first__name=first, second__name=second).first()
    if row is None:
        return None
    protocol_pair = protocol_pair_of(row)
    judgements = list(counted_judgements(study=study).filter(
        comparison__first__name=first, comparison__second__name=second).order_by("id")
        .values_list("comparison__item__external_id", "value", "annotator__external_id", "source"))
    values = np.array([v for _, v, _, _ in judgements], dtype=np.int64)
    rounds = []
    for h in PairStateHistory.objects.filter(pair_state=row).order_by("created_at", "id"):
        if h.theta is None:
            continue
        prefix = values[: h.judgements]
        wins, losses = int((prefix > 0).sum()), int((prefix < 0).sum())
        low, high = beta.ppf([0.025, 0.975], wins + 1, losses + 1)
        rounds.append({"round": h.round, "judgements": h.judgements, "theta": h.theta, "decision": h.decision,
                       "wins": wins, "ties": int((prefix == 0).sum()), "losses": losses,
                       "share": (wins + 1) / (wins + losses + 2), "share_low": float(low), "share_high": float(high)})
    metric_labels = study_metric_labels(study=study).get((first, second), {})
    separability = dict(Comparison.objects.filter(study=study, first__name=first, second__name=second)
                        .values_list("item__external_id", "separability"))
    by_item: dict[str, list[int]] = {}
    for item, value, _, _ in judgements:
        by_item.setdefault(item, []).append(value)
    items = []
    for item in _natural(set(separability) | set(by_item)):
        human = by_item.get(item, [])
        majority = int(np.sign(sum(human))) if human else None
        label = metric_labels.get(item)
        items.append({"item": item, "judgements": human, "metric": label, "separability": separability.get(item),
                      "agrees": None if majority is None or label is None else majority == label})
    human_table = _pair_labels_table({(first, second): [(i, v) for i, v, _, _ in judgements]})
    metric_table = _pair_labels_table({(first, second): sorted(metric_labels.items())})
    human_decision = ranking.decisions_from_labels(human_table).get((first, second), 0) if human_table else 0
    metric_decision = ranking.decisions_from_labels(metric_table).get((first, second)) if metric_table else None
    favi = favi_lib.favi_by_pair(human_table, metric_table).get((first, second)) if human_table and metric_table else None
    counts = {"wins": int((values > 0).sum()), "ties": int((values == 0).sum()), "losses": int((values < 0).sum())}
    scored = [i["separability"] for i in items if i["separability"] is not None]
    return {
        "first": first, "second": second,
        "status": protocol_pair.status if protocol_pair else "—",
        "decision": row.decision, "theta": row.theta, "round": row.round, "quota": row.quota_left,
        "judgement_count": len(judgements),
        "capacity": protocol_pair.capacity if protocol_pair else None,
        # How the last close computed θ (protocol.decision: method, Kish ESS, draws, standard error).
        "diagnostics": dict(protocol_pair.diagnostics) if protocol_pair and protocol_pair.diagnostics else None,
        "design": _pair_design(study, protocol_pair),
        "annotator_agreement": judgement_agreement(study=study, pair=row),
        "counts": counts, "rounds": rounds, "items": items, "judgements": judgements,
        "human_decision": human_decision, "metric_decision": metric_decision,
        "category": None if metric_decision is None else ranking.decision_category(human_decision, metric_decision),
        "favi": None if favi is None or np.isnan(favi.favi) else favi.favi,
        "agreement": None if favi is None else favi.sample_accuracy,
        "separability": scored,
        "metric": study.metric.name if study.metric_id else None,
    }


def study_serving_audit(*, study: Study, acknowledged_keys: list[str] | None = None) -> dict:
    """Check serving's invariants from the database (for the load harness and the tests).

    duplicates          comparisons judged beyond ``ratings_per_item`` plus (comparison,
                        annotator) pairs judged twice
    lost                ``acknowledged_keys`` (submits the server answered as stored) with no
                        judgement
    counters_consistent every serving counter equals what it counts
    protocol_consistent the protocol state loads and validates, each pair's recorded
                        judgements equal its stored ones, no pair has live leases beyond its
                        open quota, live judgements stay within the budget
    """
    from .models import Assignment, Comparison
    from .services import protocol_state

    judgements = counted_judgements(study=study)
    # Imported judgements, and a re-included worker's (their comparisons were served again
    # while they were excluded), may exceed ratings_per_item by design.
    beyond_by_design = Judgement.objects.filter(comparison__study=study).filter(
        Q(source=Judgement.Source.IMPORT) | Q(annotator__exclusions__study=study)).values("comparison_id")
    over = (judgements.exclude(comparison_id__in=beyond_by_design).values("comparison_id")
            .annotate(n=Count("id")).filter(n__gt=study.ratings_per_item).count())
    twice = judgements.values("comparison_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1).count()
    lost = 0
    if acknowledged_keys:
        stored = set()
        for start in range(0, len(acknowledged_keys), 500):
            chunk = acknowledged_keys[start:start + 500]
            stored.update(Judgement.objects.filter(comparison__study=study, idempotency_key__in=chunk).values_list("idempotency_key", flat=True))
        lost = len(set(acknowledged_keys) - stored)
    problems = []
    counted = dict(judgements.values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    leased_rows = dict(Assignment.objects.filter(comparison__study=study, state=Assignment.State.LEASED, kind="real")
                       .values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    for pk, count, lease in Comparison.objects.filter(study=study).values_list(
            "id", "judgement_count", "lease_expires_at"):
        if count != counted.get(pk, 0):
            problems.append(f"comparison {pk}: judgement_count {count}, judgements {counted.get(pk, 0)}")
        if (lease is not None) != (leased_rows.get(pk, 0) == 1) or leased_rows.get(pk, 0) > 1:
            problems.append(f"comparison {pk}: lease column {lease}, {leased_rows.get(pk, 0)} live leases")
    rows = list(PairState.objects.filter(study=study))
    live_by_pair = dict(Comparison.objects.filter(study=study, lease_expires_at__isnull=False)
                        .values_list("pair_id").annotate(n=Count("id")).values_list("pair_id", "n"))
    stored_by_pair = dict(judgements.values_list("comparison__pair_id").annotate(n=Count("id"))
                          .values_list("comparison__pair_id", "n"))
    for row in rows:
        row.live, row.stored = live_by_pair.get(row.pk, 0), stored_by_pair.get(row.pk, 0)
    consistent = True
    try:
        state = protocol_state.study_state_load(study, rows)
    except ValueError as error:
        problems.append(f"protocol state does not load: {error}")
        state, consistent = None, False
    for row in rows:
        if row.leased != row.live:
            problems.append(f"pair {row.pk}: leased {row.leased}, live leases {row.live}")
        if row.leased > row.quota_left:
            problems.append(f"pair {row.pk}: {row.leased} live leases beyond its open quota {row.quota_left}")
            consistent = False
        recorded = protocol_pair_of(row).judgements if row.state else 0
        if recorded != row.stored:
            problems.append(f"pair {row.pk}: protocol recorded {recorded}, stored {row.stored}")
            consistent = False
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    if live + study.protocol_lost_judgements > study.budget:
        problems.append(f"{live} live judgements and {study.protocol_lost_judgements} lost to exclusions "
                        f"beyond the budget {study.budget}")
        consistent = False
    return {
        "judgements": judgements.count(),
        "live_judgements": live,
        "duplicates": over + twice,
        "lost": lost,
        "counters_consistent": not any("comparison" in p or "leased" in p for p in problems),
        "protocol_consistent": consistent and state is not None,
        "pairs_filled_waiting_for_close": sum(r.status == "filled" for r in rows),
        "problems": problems[:20],
    }


def study_judgements(*, study: Study, first: str | None = None, second: str | None = None,
                     annotator: str | None = None, platform: str | None = None) -> QuerySet[Judgement]:
    """The study's judgements, oldest first, optionally of one pair and/or one annotator.

    Every judgement, checks, repeats and excluded workers' included; each row carries
    ``excluded`` (its worker is excluded now) and its ``kind``: counted rows are kind "real"
    and not excluded (``counted_judgements``).

    ``first``/``second`` name the pair's systems in either order (one alone, or the same twice:
    every pair of that system);
    ``annotator`` is an Annotator's external id, ``platform`` its platform.
    """
    from protocol.preferences import canonical_pair

    from django.db.models import Exists, OuterRef

    from .models import AnnotatorExclusion

    excluded = AnnotatorExclusion.objects.filter(study=study, annotator_id=OuterRef("annotator_id"), excluded=True)
    rows = Judgement.objects.filter(comparison__study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator", "assignment").annotate(
        excluded=Exists(excluded)).order_by("id")
    if first is not None and second is not None and first != second:
        a, b, _ = canonical_pair(first, second)
        rows = rows.filter(comparison__first__name=a, comparison__second__name=b)
    elif first is not None or second is not None:  # one system: its pairs with every other
        system = first if first is not None else second
        rows = rows.filter(Q(comparison__first__name=system) | Q(comparison__second__name=system))
    if annotator is not None:
        rows = rows.filter(annotator__external_id=annotator)
    if platform is not None:
        rows = rows.filter(annotator__platform=platform)
    return rows


def study_members(*, study: Study) -> QuerySet:
    """The study's memberships with their users, by username."""
    from .models import StudyMembership

    return StudyMembership.objects.filter(study=study).select_related("user").order_by("user__username")


def study_bundle(*, study: Study):
    """The study's current data (live judgements as human_preference rows) as a protocol Bundle."""
    import json

    from protocol.bundle import parse_bundle_lines

    from .services import study_export_rows  # a read despite its module: rows of the stored study

    return parse_bundle_lines((n, json.dumps(row)) for n, row in enumerate(study_export_rows(study=study), 1))


def study_metric_report(*, study: Study, metric: str | None = None) -> dict:
    """protocol.report's comparison of ``metric`` (default: the study's) with the study's human labels.

    ValueError (naming what is missing) when the study has no such metric or no human labels.
    """
    from protocol.report import compare_metric, report_json

    name = metric or (study.metric.name if study.metric_id else None)
    if name is None:
        raise ValueError("the study has no metric; name one with ?metric=")
    tie_margin = study.metrics.filter(name=name).values_list("tie_margin", flat=True).first() or 0.0
    report = compare_metric(study_bundle(study=study), name, eps=tie_margin, seed=study.protocol_seed)
    return {"metric": name, **report_json(report)}


def study_leaderboard(*, study: Study) -> list[dict]:
    """Systems ranked by the protocol's decisions (layers of the significance DAG, SPEC §5).

    ``rank`` 1 = beaten by no system; systems that share a rank are not separated by the
    decisions so far. Within a rank: more wins first, then by name. ``wins``/``losses`` count
    decided pairs, ``undecided`` the pairs still open.
    """
    from protocol import ranking

    systems = tuple(study.systems.order_by("name").values_list("name", flat=True))
    decisions = {(a, b): d for a, b, d in PairState.objects.filter(study=study).values_list(
        "first__name", "second__name", "decision")}
    layout = ranking.dag_layout(ranking.significance_graph(systems, decisions)) if systems else {"nodes": []}
    record = {s: {"wins": 0, "losses": 0, "undecided": 0} for s in systems}
    for (a, b), d in decisions.items():
        if d == 0:
            record[a]["undecided"] += 1
            record[b]["undecided"] += 1
        else:
            winner, loser = (a, b) if d > 0 else (b, a)
            record[winner]["wins"] += 1
            record[loser]["losses"] += 1
    return [{"rank": node["layer"] + 1, "system": node["system"], **record[node["system"]]}
            for node in layout["nodes"]]
@dataclass(frozen=True)
class CrowdSession:
    """One worker's session in a study: their judgements and leases there.

    An Annotator is one platform worker id, so their work in a study is their session.
    """

    done: int                      # judgements given in the study
    hits_min: int                  # needed for the completion code (at least 1)
    hits_max: int                  # most judgements served; 0 = no limit
    started_at: datetime | None    # their first HIT in the study
    ends_at: datetime | None       # when the session time limit is up (None = no limit)
    time_up: bool

    @property
    def target(self) -> int:
        """M in "comparison N of M": the maximum, else the minimum when it is above 1 (0 = none)."""
        return self.hits_max or (self.hits_min if self.hits_min > 1 else 0)

    @property
    def share_done(self) -> bool:
        return bool(self.hits_max) and self.done >= self.hits_max

    @property
    def may_lease(self) -> bool:
        return not (self.share_done or self.time_up)

    @property
    def minimum_met(self) -> bool:
        return self.done >= self.hits_min

    def code_due(self, *, no_more_work: bool) -> bool:
        """The completion code rule: the minimum is met, or the worker judged at least one
        comparison and the study can serve them nothing more (paused, finished, out of work
        for them, or their time is up). A worker who judged nothing never gets the code."""
        return self.minimum_met or (self.done >= 1 and (no_more_work or self.time_up))


def crowd_session(*, study: Study, annotator, now: datetime | None = None) -> CrowdSession:
    """The worker's session in ``study`` (two small queries)."""
    now = now or timezone.now()
    done = annotator_judgement_count(study=study, annotator=annotator)
    started_at = ends_at = None
    time_up = False
    if study.session_minutes:
        in_study = Comparison.objects.filter(pk=OuterRef("comparison_id"), study=study)
        started_at = Assignment.objects.filter(Exists(in_study), annotator=annotator).aggregate(
            first=Min("issued_at"))["first"]
        if started_at is not None:
            ends_at = started_at + timedelta(minutes=study.session_minutes)
            time_up = now >= ends_at
    return CrowdSession(done=done, hits_min=max(study.session_hits_min, 1), hits_max=study.session_hits_max,
                        started_at=started_at, ends_at=ends_at, time_up=time_up)


def crowd_entry_known(*, study: Study, platform: str, worker_id: str, platform_session_id: str) -> bool:
    """Whether this worker id entered ``study`` from this platform session before (a new one
    counts against the client's limit on new crowd workers)."""
    return CrowdEntry.objects.filter(study=study, annotator__platform=platform,
                                       annotator__external_id=(worker_id or "").strip(),
                                       platform_session_id=(platform_session_id or "").strip()).exists()


def worker_completion_code(*, study: Study, platform: str, worker_id: str, session_id: str) -> str:
    """A crowd worker's own completion code: the study's code and a MAC (the server's secret
    key) of study, platform, worker id and platform session, so a code passed on to another
    worker does not match their submission; "" when the study has no code. Researchers verify
    submissions against study_crowd_sessions (crowd.csv)."""
    if not study.completion_code:
        return ""
    mac = salted_hmac("evalapp.completion-code", f"{study.pk}:{platform}:{worker_id}:{session_id}").hexdigest()
    return f"{study.completion_code}-{mac[:10].upper()}"


def crowd_completion_code(*, study: Study, annotator) -> str:
    """``annotator``'s completion code in ``study`` (worker_completion_code); the study's
    code for a logged-in member (the platforms pay crowd workers only)."""
    if annotator.platform not in (Annotator.Platform.PROLIFIC, Annotator.Platform.MTURK):
        return study.completion_code
    session_id = annotator.session_id or (CrowdEntry.objects.filter(study=study, annotator=annotator)
                                          .values_list("platform_session_id", flat=True).first() or "")
    return worker_completion_code(study=study, platform=annotator.platform, worker_id=annotator.external_id,
                                  session_id=session_id)


# Columns of crowd.csv: what a researcher matches with the platform's submission list.
CROWD_SESSION_COLUMNS = ("platform", "worker_id", "session_id", "entered_at", "judgements", "minimum_met",
                         "completion_code")


def study_crowd_sessions(*, study: Study) -> list[dict]:
    """Every crowd worker's entry into ``study`` with their judgements and their own
    completion code, oldest first: a platform submission is genuine when its worker id,
    session id and code appear here together (docs/crowd.md)."""
    counts = dict(Judgement.objects.filter(comparison__study=study, kind="real").values("annotator_id")
                  .annotate(n=Count("id")).values_list("annotator_id", "n"))
    hits_min = max(study.session_hits_min, 1)
    rows = []
    for entry in CrowdEntry.objects.filter(study=study).select_related("annotator").order_by("created_at", "pk"):
        annotator = entry.annotator
        done = counts.get(annotator.pk, 0)
        rows.append({"platform": annotator.platform, "worker_id": annotator.external_id,
                     "session_id": entry.platform_session_id, "entered_at": entry.created_at.isoformat(),
                     "judgements": done, "minimum_met": done >= hits_min,
                     "completion_code": worker_completion_code(study=study, platform=annotator.platform,
                                                               worker_id=annotator.external_id,
                                                               session_id=entry.platform_session_id)})
    return rows


def study_work_left(*, study: Study) -> bool:
    """Whether any pair of the study has a round open or about to close (more HITs may come)."""
    return PairState.objects.filter(study=study, status__in=ACTIVE_PAIR_STATUSES).exists()


def annotator_has_work(*, study: Study, annotator, skipped_too: bool = False) -> bool:
    """Could ``annotator`` be leased a comparison now? (A read; the lease itself decides.)

    An open round with quota beyond its live leases holds a comparison with fewer than
    ``ratings_per_item`` judgements, no live lease, an item not withdrawn, and no judgement or
    skip by this annotator. ``skipped_too``: their skipped comparisons count as work (whether
    it was their skips that emptied their queue: the completion code does not pay for those).
    """
    from django.db.models import F
    from django.utils import timezone

    from .models import Assignment, Comparison

    open_pairs = PairState.objects.filter(study=study, status="open", quota_left__gt=F("leased")).values("id")
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now())
    comparisons = (Comparison.objects.filter(free, pair_id__in=open_pairs,
                                             judgement_count__lt=study.ratings_per_item, item__withdrawn=False)
                   .exclude(pk__in=Judgement.objects.filter(annotator=annotator).values("comparison_id")))
    if not skipped_too:
        comparisons = comparisons.exclude(pk__in=Assignment.objects.filter(
            annotator=annotator, state=Assignment.State.SKIPPED).values("comparison_id"))
    return comparisons.exists()


# Columns of the annotator quality table (dashboard panel, CSV, API), in display order.
QUALITY_COLUMNS = ("annotator", "platform", "judgements", "checks", "median_seconds", "tie_rate", "left_share",
                   "agreement", "overlap", "gold_accuracy", "repeats", "repeat_consistency", "flags", "excluded")
QUALITY_SORTS = {c for c in QUALITY_COLUMNS if c not in ("flags",)} | {"flag_count"}


def study_annotator_quality(*, study: Study, sort: str = "annotator", descending: bool = False,
                            thresholds=None) -> list[dict]:
    """Per worker of ``study``: protocol.quality's statistics and flags (docs/quality.md), with
    whether they are excluded now, one dict per worker sorted by ``sort`` (a QUALITY_SORTS key;
    missing values last either way).

    Over every judgement of the study, checks and repeats included (the statistics tell them
    apart), excluded workers included (so agreement is with everyone who judged). Time on task
    is the server's measure (render to answer) where there is one, else the client's claim.
    """
    import math

    import numpy as np

    from protocol.quality import QualityThresholds, annotator_quality

    from .models import Annotator, JudgementKind

    if sort not in QUALITY_SORTS:
        raise ValueError(f"cannot sort by {sort!r}; choose one of {', '.join(sorted(QUALITY_SORTS))}")
    from .models import CheckItem

    rows = list(Judgement.objects.filter(Q(comparison__study=study) | Q(check_item__study=study)).order_by("id")
                .values_list("annotator_id", "comparison_id", "value", "assignment__shown_swapped", "server_seconds",
                             "seconds_on_task", "kind", "check_item_id"))
    if not rows:
        return []
    annotators = [r[0] for r in rows]
    comparisons = [r[1] if r[7] is None else f"check:{r[7]}" for r in rows]
    values = np.array([r[2] for r in rows], dtype=np.int64)
    shown = np.array([-r[2] if r[3] else r[2] for r in rows], dtype=np.int64)
    seconds = np.array([r[4] if r[4] is not None else (r[5] if r[5] is not None else math.nan) for r in rows],
                       dtype=float)
    first_time: dict[tuple[int, int], int] = {}
    repeats = []
    for j, (who, comparison, *_, kind, _check) in enumerate(rows):
        if kind == JudgementKind.REPEAT and (who, comparison) in first_time:
            repeats.append((first_time[(who, comparison)], j))
        elif kind == JudgementKind.REAL:
            first_time.setdefault((who, comparison), j)
    quality = annotator_quality(annotators, comparisons, values, shown, seconds, repeats=repeats or None,
                                gold=_gold_answers(rows, CheckItem), thresholds=thresholds or QualityThresholds())
    names = {pk: (external_id, platform) for pk, external_id, platform in
             Annotator.objects.filter(pk__in=set(annotators)).values_list("id", "external_id", "platform")}
    excluded = set(excluded_annotators(study=study).values_list("annotator_id", flat=True))
    table = []
    for q in quality:
        row = q.as_dict()
        row["annotator_id"] = row.pop("annotator")
        row["annotator"], row["platform"] = names[row["annotator_id"]]
        row["excluded"] = row["annotator_id"] in excluded
        row["flag_count"] = len(row["flags"])
        table.append(row)
    present = [r for r in table if r[sort] is not None]
    present.sort(key=lambda r: (r[sort], r["annotator"]), reverse=descending)
    return present + sorted((r for r in table if r[sort] is None), key=lambda r: r["annotator"])


def _gold_answers(rows, check_model) -> list | None:
    """Per judgement (rows of study_annotator_quality) the answers its check accepts, None for
    other judgements; None when there are no checks."""
    checks = {r[7] for r in rows if r[7] is not None}
    if not checks:
        return None
    accepted = {c.pk: c.accepted for c in check_model.objects.filter(pk__in=checks)}
    return [None if r[7] is None else accepted[r[7]] for r in rows]


def study_exclusion_log(*, study: Study) -> QuerySet:
    """The study's exclusion audit log, newest first, with worker and user."""
    from .models import ExclusionEvent

    return ExclusionEvent.objects.filter(study=study).select_related("annotator", "user")


def study_plan_jobs(*, study: Study, limit: int = 10) -> list:
    """The study's latest plan jobs, newest first."""
    from .models import PlanJob

    return list(PlanJob.objects.filter(study=study).order_by("-created_at", "-id")[:limit])


def study_human_label_count(*, study: Study) -> int:
    """Judgements plus imported human ratings: what the planner can estimate its assumptions from."""
    from .models import HumanScore

    return (Judgement.objects.filter(comparison__study=study).count()
            + HumanScore.objects.filter(output__item__study=study).count())


def plan_job_rows(*, job) -> list[dict]:
    """A finished job's plans with the time to finish at the job's throughput (hours)."""
    from protocol.plan import hours_to_finish

    if not job.result:
        return []
    throughput = float(job.params["throughput"])
    return [{**row, "hours": hours_to_finish(row["expected_annotations"], throughput)}
            for row in job.result["plans"]]
