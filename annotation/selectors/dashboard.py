"""Reads of the researcher dashboard and the pair page: leaderboard, pair matrix, budget,
the metric against the humans, and the charts' data."""
from __future__ import annotations


import numpy as np
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import Coalesce

from protocol import adaptive, ranking, spa
from protocol import favi as favi_lib
from protocol.allocation import design_weights, kish_ess
from protocol.leaderboard import natural_sorted
from protocol.preferences import pair_labels_table
from protocol.projection import judgements_to_finish, projection_draws
from protocol.report import JUDGED_ONLY, HumanItemsInsufficient, compare_metric, report_json

from ..models import (AnnotatorExclusion, Comparison, HumanScore, Judgement, JudgeRun, PairState, PairStateHistory,
                      Study)
from ..rubrics import criterion_metrics, is_rubric, study_rubric
from ..serving.protocol_state import pair_hits_of, pair_lanes_of
from .quality import counted_judgements, judgement_agreement
from .serving import protocol_pair_of
from .style import study_style_leaderboard
from .fragility import NO_FRAGILITY, study_pair_fragility
from .exports import human_labelled_items, study_bundle
from .studies import (
    ACTIVE_PAIR_STATUSES,
    pair_item_names,
    study_design_kinds,
    study_judgement_labels,
    study_judges,
    study_metric_counts,
    study_metric_labels,
)


def metric_labels_table(*, study: Study, metric, human: dict) -> dict:
    """The metric's labels of the pairs and items in ``human`` (PairLabels tables of the human
    judgements: Favi and SPA compare nothing else) as PairLabels tables, items sorted; {}
    without a metric. At 50 systems x 2,000 items this reads a few thousand labels, not 2.45 M."""
    if metric is None or not human:
        return {}
    judged = {pair: set(table.items.tolist()) for pair, table in human.items()}
    labels = study_metric_labels(study=study, metric=metric, judged=judged)
    return pair_labels_table({pair: sorted(found.items()) for pair, found in labels.items()})


# The leaderboard's bootstrap replicates (Bradley–Terry intervals, protocol.ranking.tiered_leaderboard).
LEADERBOARD_REPLICATES = 200


def dashboard_pair_totals(*, study: Study) -> dict:
    """The study's pair rows summed in one scan: what the dashboard's version reads (``rounds``,
    ``decided``, ``versions``), what its budget reserves now (``reserved``, the open rounds'
    quotas) and whether a worker sent to its start link finds work (``active``: pairs with a
    round open or about to close, as ``serving.study_work_left`` counts them). A pair row is
    wide (its protocol state, about 0.9 KB): at 200 systems one scan of the 19,900 is 26 MB of
    heap on PostgreSQL, 13-16 ms, and a cached dashboard made two."""
    return PairState.objects.filter(study=study).aggregate(
        rounds=Sum("round"), decided=Count("id", filter=~Q(decision=0)), versions=Sum("version"),
        reserved=Coalesce(Sum("quota_left"), 0), active=Count("id", filter=Q(status__in=ACTIVE_PAIR_STATUSES)))


def dashboard_version(*, study: Study, pairs: dict | None = None) -> tuple:
    """A cheap fingerprint of the dashboard's heavy parts: it changes when a round closes (or a
    pair is rebuilt, an annotator excluded, a setting or the separability changes), not with
    every judgement, so the dashboard is computed once per round (issue 22: 2.45 M comparisons
    at 50 systems), or as a judge run stores verdicts. No scan of the comparisons: the
    separability's state is on the study row. ``pairs``: ``dashboard_pair_totals`` of the
    study, read now (else read here)."""

    exclusions = AnnotatorExclusion.objects.filter(study=study).aggregate(
        n=Count("id", filter=Q(excluded=True)), last=Max("updated_at"))
    if pairs is None:
        pairs = dashboard_pair_totals(study=study)
    history = PairStateHistory.objects.filter(pair_state__study=study).aggregate(n=Count("id"), last=Max("id"))
    # A judge run's verdicts change the Judges table (not the protocol).
    judged = JudgeRun.objects.filter(study=study).aggregate(n=Count("id"), done=Sum("done"))
    return (study.pk, study.slug, str(study.created_at), study.budget, study.metric_id, study.gamma, study.batch_size,
            study.status, pairs["rounds"], pairs["decided"], pairs["versions"], history["n"], history["last"],
            study.separability_status, study.separability_done, exclusions["n"], str(exclusions["last"]),
            study.protocol_lost_judgements, study.protocol_seed, judged["n"], judged["done"])


def study_dashboard_data(*, study: Study) -> dict:
    """Everything the researcher dashboard shows, as plain data (figures are built from it),
    computed now. Pages read it per round from the cache instead (``reports.study_dashboard``)."""

    data = study_dashboard_heavy(study=study)
    return {**data, **dashboard_live(study=study, data=data)}


def dashboard_live(*, study: Study, data: dict, pairs: dict | None = None) -> dict:
    """What changes with every judgement, counted per request: the budget, the judgements and
    whether the crowd link has work left (``work_left``: a study settled by the judgements
    imported with it sends a worker to "This study has finished"). ``pairs``:
    ``dashboard_pair_totals`` of the study, read in this request (else read here)."""
    judgements = counted_judgements(study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    imported = judgements.filter(source=Judgement.Source.IMPORT).count()
    pairs = pairs if pairs is not None else dashboard_pair_totals(study=study)
    return {"budget": _budget(study, live, imported, pairs["reserved"], data["budget"]["projection"]),
            "judgements": live + imported, "work_left": pairs["active"] > 0}


def _budget(study: Study, live: int, imported: int, reserved: int, projection: dict | None) -> dict:
    total = study.budget
    lost = study.protocol_lost_judgements
    left = max(total - live - lost - reserved, 0)

    def percent(x: float) -> float:
        return round(100 * min(max(x, 0), total) / total, 2) if total else 0.0

    return {"total": total, "spent": live + lost, "counted": live, "lost": lost, "imported": imported,
            "reserved": reserved, "left": left, "spent_percent": percent(live + lost),
            "reserved_percent": percent(reserved), "projection": projection,
            "projected_percent": None if projection is None else percent(live + lost + projection["total"])}


def _natural(names) -> list[str]:

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
            implied = p.get("implied", 0)  # a pair the ranking's sort did not run, ordered by transitivity
            decision = (-1 if flip else 1) * (p["decision"] or implied)
            status = p["status"] if p["status"] != adaptive.PARKED else (
                "parked" if p["judgements"] else "not run (implied)" if implied else "not run")
            cells.append({"other": b, "first": p["first"], "second": p["second"], "theta": theta,
                          "decision": decision, "status": status, "judgements": p["judgements"],
                          "tone": ("implied-" if implied else "") + ("better" if decision > 0 else "worse")
                          if decision else "stopped" if p["status"] in ("exhausted", "futile") else
                          "parked" if p["status"] == adaptive.PARKED else "open"})
        rows.append({"system": a, "cells": cells})
    return rows


def study_dashboard_heavy(*, study: Study) -> dict:
    """The dashboard's parts that cost: every pair's labels, Favi, SPA, the leaderboard's
    bootstrap, the DAGs, the projection (seconds at 50 systems x 2,000 items)."""

    systems = tuple(_natural(study.systems.values_list("name", flat=True)))
    states = list(PairState.objects.filter(study=study).select_related("first", "second"))
    judgements = counted_judgements(study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    imported = judgements.filter(source=Judgement.Source.IMPORT).count()
    reserved = sum(s.quota_left for s in states)
    judgement_labels = study_judgement_labels(study=study)
    human = pair_labels_table(judgement_labels)
    metric = metric_labels_table(study=study, metric=study.metric, human=human)
    favi = favi_lib.favi_by_pair(human, metric) if human and metric else {}
    human_decisions = ranking.decisions_from_labels(human) if human else {}
    # The metric's own decisions (its significance graph) from its labels on all of a pair's
    # items; its category against the humans from the items both labelled (docs/formulas.md §5),
    # as the pair page and the metric report judge it.
    metric_decisions = ranking.decisions_from_counts(study_metric_counts(study=study))
    metric_on_judged = ranking.decisions_from_labels(metric) if metric else {}
    pairs, running, protocol_pairs = [], [], []
    for s in states:
        key = (s.first.name, s.second.name)
        protocol_pair = protocol_pair_of(study, s)
        if protocol_pair:
            protocol_pairs.append(protocol_pair)
        f = favi.get(key)
        status = protocol_pair.status if protocol_pair else "—"
        pairs.append({
            "first": key[0], "second": key[1], "status": status,
            "decision": s.decision, "theta": s.theta, "round": s.round, "quota": s.quota_left,
            "judgements": protocol_pair.judgements if protocol_pair else 0,
            "capacity": protocol_pair.capacity if protocol_pair else 0,
            "favi": None if f is None or np.isnan(f.favi) else f.favi,
            "agreement": None if f is None else f.sample_accuracy,
            "category": (ranking.decision_category(human_decisions.get(key, 0), metric_on_judged[key])
                         if key in metric_on_judged else None),
        })
        if protocol_pair and status not in (*adaptive.STOPPED, adaptive.PARKED) and protocol_pair.remaining > 0:
            running.append((protocol_pair.human_counts, protocol_pair.remaining))
    fragility = study_pair_fragility(study=study, states=states, labels=judgement_labels)
    for p in pairs:
        p.update(fragility.get((p["first"], p["second"]), NO_FRAGILITY))
    order_index = {name: k for k, name in enumerate(systems)}
    pairs.sort(key=lambda p: (order_index.get(p["first"], 0), order_index.get(p["second"], 0)))
    protocol_decisions = {(p["first"], p["second"]): p["decision"] for p in pairs}
    section = _design_section(study, protocol_pairs) if len(protocol_pairs) == len(states) else None
    partial = study.design.partial_order(section, protocol_decisions) if section else None
    if partial is not None:
        # the design's partial order: the pairs decided and those they imply by transitivity
        protocol_decisions = partial
        for p in pairs:
            p["implied"] = study.design.implied(p, partial)
    dags = {}
    if systems:
        for name, decisions in (("protocol", protocol_decisions), ("human", human_decisions),
                                ("metric", metric_decisions)):
            dags[name] = ranking.dag_layout(ranking.significance_graph(systems, decisions))
    leaderboard = ranking.tiered_leaderboard(systems, judgement_labels, protocol_decisions,
                                             replicates=LEADERBOARD_REPLICATES, seed=study.protocol_seed) if systems else []
    # a ranking study's matrix reads best first along the ranking it decided
    order = section["order"] if section and section["complete"] else [r["system"] for r in leaderboard]
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
                                      gamma=study.gamma, seed=study.protocol_seed,
                                      draws=projection_draws(len(running)))
        projection = {"pairs": len(running), "total": result.total, "low": result.low, "high": result.high,
                      "level": result.level}
    categories = {c: 0 for c in ranking.CATEGORIES}
    for p in pairs:
        if p["category"]:
            categories[p["category"]] += 1
    per_system = favi_lib.per_system_favi(favi) if favi else {}
    return {
        "systems": systems,
        "order": order,
        "budget": _budget(study, live, imported, reserved, projection),
        "pairs": pairs,
        "statuses": dict(sorted(statuses.items())),
        "dags": dags,
        "leaderboard": leaderboard,
        "style_leaderboard": study_style_leaderboard(study=study, plain=leaderboard) if systems else None,
        "matrix": _pair_matrix(order, pairs),
        "per_system_favi": {k: per_system[k].tolist() for k in order if k in per_system},
        "favi_summary": None if summary is None else {
            "mean_abs_favi": summary.mean_abs_favi, "sample_accuracy": summary.sample_accuracy,
            "system_accuracy": summary.system_accuracy, "pairs": summary.pairs},
        "categories": categories if any(categories.values()) else None,
        "spa": spa.spa_summary(human, metric, study.protocol_seed) if human and metric else None,
        "timeline": timeline,
        "separability": separability,
        "metric": study.metric.name if study.metric_id else None,
        "judges": study_judges(study=study),
        "criteria": rubric_side_by_side(study=study, states=states, order=order) if is_rubric(study) else None,
        "decided": sum(1 for p in pairs if p["decision"]),
        "fragile": [p for p in pairs if p["fragile"]],
        "judgements": live + imported,
        "ranking": section,
    }


def _design_section(study: Study, protocol_pairs: list[adaptive.PairState]) -> dict | None:
    """The study's pair design's dashboard section (protocol.designs; None: the design has none)."""
    return study.design.section(protocol_pairs, study.ranking_order, study.active_settings, study.decision_level,
                                kinds=study_design_kinds(study=study))


def study_ranking(*, study: Study) -> dict | None:
    """A ranking study's sort or active design, read now (the dashboard reads it per round
    from its cache); None under the all-pairs design."""
    if not study.design.orders_systems:  # a design without an order has no section to read
        return None
    states = list(PairState.objects.filter(study=study).select_related("first", "second"))
    return _design_section(study, [protocol_pair_of(study, s) for s in states])


def rubric_side_by_side(*, study: Study, states: list[PairState], order: list[str]) -> dict:
    """A rubric study's criteria side by side: each criterion's summary (decided pairs, the
    judgements its protocol counted, its metric's agreement with the humans on the judged items,
    its ranking by pairs won) and, per pair, every criterion's decision and status.

    ``states``: the study's pair rows with first and second loaded; ``order``: the systems in
    leaderboard order (the rows' order)."""
    criteria = study_rubric(study)
    metrics = criterion_metrics(study)
    rank = {name: k for k, name in enumerate(order)}
    rows, totals = [], {c.name: {"decided": 0, "judgements": 0, "agree": 0, "paired": 0, "wins": {}} for c in criteria}
    for s in sorted(states, key=lambda s: (rank.get(s.first.name, 0), rank.get(s.second.name, 0))):
        if not s.state:
            continue
        lanes = pair_lanes_of(study, s)
        cells = []
        for c in criteria:
            pair, total = lanes[c.name], totals[c.name]
            paired = np.asarray(pair.paired)
            total["judgements"] += pair.judgements
            total["agree"] += int(np.trace(paired))
            total["paired"] += int(paired.sum())
            winner = None if not pair.decision else s.first.name if pair.decision > 0 else s.second.name
            if winner:
                total["decided"] += 1
                total["wins"][winner] = total["wins"].get(winner, 0) + 1
            cells.append({"criterion": c.name, "decision": pair.decision, "status": pair.status,
                          "judgements": pair.judgements, "winner": winner})
        rows.append({"first": s.first.name, "second": s.second.name, "hits": pair_hits_of(study, s), "cells": cells})
    summary = []
    for c in criteria:
        total = totals[c.name]
        wins = total["wins"]
        ranking_order = sorted(order, key=lambda name: (-wins.get(name, 0), rank.get(name, 0)))
        summary.append({
            "name": c.name, "label": c.label, "metric": metrics[c.name],
            "decided": total["decided"], "pairs": len(rows), "judgements": total["judgements"],
            "agreement": total["agree"] / total["paired"] if total["paired"] else None,
            "ranking": ranking_order,
            "ranking_wins": [(name, wins.get(name, 0)) for name in ranking_order],
        })
    return {"criteria": summary, "pairs": rows, "hits": sum(row["hits"] for row in rows)}


def _pair_design(study: Study, protocol_pair) -> dict | None:
    """How the pair's items were chosen and whether its decision is design-weighted; None for
    uniform choice. ``weighted``: every judged item has a recorded draw, so the decision counts
    each with its design weight (``ess``: their Kish effective sample size) and holds for all
    the pair's items; otherwise the counts are unweighted and hold for the over-sampled items."""
    if study.item_choice == Study.ItemChoice.UNIFORM or protocol_pair is None or not protocol_pair.judged_items:
        return None

    weighted = adaptive.design_weighted(protocol_pair)
    ess = None
    if weighted:
        ess = kish_ess(design_weights([chance for _, chance in protocol_pair.draws]))
    return {"choice": study.get_item_choice_display(), "weighted": weighted,
            "items": len(protocol_pair.judged_items), "ess": ess}


def _pair_criteria(study: Study, row: PairState) -> list[dict]:
    """Each criterion's protocol state of one pair of a rubric study (the pair page)."""
    lanes = pair_lanes_of(study, row)
    return [{"name": c.name, "label": c.label, "status": lanes[c.name].status, "decision": lanes[c.name].decision,
             "theta": lanes[c.name].theta[-1] if lanes[c.name].theta else None,
             "judgements": lanes[c.name].judgements, "quota": lanes[c.name].quota,
             "evidence": float(np.exp(min(lanes[c.name].log_evidence, 700.0)))}
            for c in study_rubric(study)]


def _pair_reasons(study: Study, first: str, second: str) -> list[dict]:
    """The reasons given on a rubric pair's counted judgements, oldest first: item, annotator,
    criterion, its answer in canonical order (+1 = ``first`` better) and strength, the reason."""
    criteria = {c.name: c for c in study_rubric(study)}
    rows = counted_judgements(study=study).filter(
        comparison__first__name=first, comparison__second__name=second, answers__isnull=False).order_by("id")
    reasons = []
    for item, annotator, answers in rows.values_list("comparison__item__external_id", "annotator__external_id",
                                                     "answers").iterator():
        for name, answer in answers.items():
            if answer.get("reason"):
                criterion = criteria.get(name)
                strength = answer.get("strength", 0)
                reasons.append({"item": item, "annotator": annotator, "criterion": name,
                                "label": criterion.label if criterion else name, "value": answer["value"],
                                "strength": strength, "reason": answer["reason"],
                                "word": criterion.answer_scale.words.get(strength, "") if criterion else ""})
    return reasons


def pair_detail_data(*, study: Study, first: str, second: str) -> dict | None:
    """One system pair (canonical order) as plain data: its protocol state, θ by round with
    the credible interval of the share of judgements preferring ``first``, every item with
    its judgements, metric label and separability (judged items first), and how the metric's sign test compares
    with the humans'. None when the study has no such pair."""

    row = PairState.objects.filter(study=study, first__name=first, second__name=second).select_related(
        "first", "second").first()
    if row is None:
        return None
    protocol_pair = protocol_pair_of(study, row)
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
        share, low, high = ranking.share_interval(wins, losses)
        rounds.append({"round": h.round, "judgements": h.judgements, "theta": h.theta, "decision": h.decision,
                       "wins": wins, "ties": int((prefix == 0).sum()), "losses": losses,
                       "share": share, "share_low": low, "share_high": high})
    metric_labels = study_metric_labels(study=study, pair=(first, second)).get((first, second), {})
    separability = dict(Comparison.objects.filter(pair=row).exclude(separability=None)
                        .values_list("item__external_id", "separability"))
    by_item: dict[str, list[int]] = {}
    for item, value, _, _ in judgements:
        by_item.setdefault(item, []).append(value)
    items = []
    for item in _natural(pair_item_names(study=study, first_id=row.first_id, second_id=row.second_id)):
        human = by_item.get(item, [])
        majority = int(np.sign(sum(human))) if human else None
        label = metric_labels.get(item)
        items.append({"item": item, "judgements": human, "metric": label, "separability": separability.get(item),
                      "agrees": None if majority is None or label is None else majority == label})
    items.sort(key=lambda i: not i["judgements"])  # the judged items first, each part in natural order
    human_table = pair_labels_table({(first, second): [(i, v) for i, v, _, _ in judgements]})
    metric_table = pair_labels_table({(first, second): sorted(metric_labels.items())})
    human_decision = ranking.decisions_from_labels(human_table).get((first, second), 0) if human_table else 0
    metric_decision = ranking.decisions_from_labels(metric_table).get((first, second)) if metric_table else None
    # The metric's error category: judged against the humans on the items both labelled
    # (docs/formulas.md §5), as the dashboard and the metric report judge it.
    judged_table = pair_labels_table({(first, second): sorted((i, label) for i, label in metric_labels.items()
                                                              if i in by_item)})
    metric_on_judged = ranking.decisions_from_labels(judged_table).get((first, second)) if judged_table else None
    favi = favi_lib.favi_by_pair(human_table, metric_table).get((first, second)) if human_table and metric_table else None
    counts = {"wins": int((values > 0).sum()), "ties": int((values == 0).sum()), "losses": int((values < 0).sum())}
    fragility = study_pair_fragility(study=study, pair=row, labels={(first, second): [(i, v) for i, v, _, _ in judgements]})
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
        "criteria": _pair_criteria(study, row) if is_rubric(study) and row.state else None,
        "reasons": _pair_reasons(study, first, second) if is_rubric(study) else [],
        "annotator_agreement": judgement_agreement(study=study, pair=row),
        "counts": counts, "rounds": rounds,
        **fragility.get((first, second), NO_FRAGILITY), "items": items, "judgements": judgements,
        "human_decision": human_decision, "metric_decision": metric_decision, "metric_on_judged": metric_on_judged,
        "judged_items": len(by_item),
        "category": None if metric_on_judged is None else ranking.decision_category(human_decision, metric_on_judged),
        "favi": None if favi is None or np.isnan(favi.favi) else favi.favi,
        "agreement": None if favi is None else favi.sample_accuracy,
        "separability": scored,
        "metric": study.metric.name if study.metric_id else None,
    }


def study_metric_report(*, study: Study, metric: str | None = None) -> dict:
    """protocol.report's comparison of ``metric`` (default: the study's) with the study's human labels.

    ValueError (naming what is missing) when the study has no such metric or no human labels.
    """

    name = metric or (study.metric.name if study.metric_id else None)
    if name is None:
        raise ValueError("the study has no metric; name one with ?metric=")
    # Said before the study is read as a bundle: at 200 x 2,000 that took a minute (400,000
    # outputs) to find no human label, the state of every study before its first judgement.
    known = sorted(study.metrics.values_list("name", flat=True))
    if name not in known:
        raise ValueError(f"unknown metric {name!r}; the study has: {', '.join(known) or 'none'}")
    if not (HumanScore.objects.filter(output__item__study=study).exists()
            or counted_judgements(study=study).exists()):
        raise ValueError("the study has no human labels to compare with yet (no human_score row, no counted "
                         "judgement)")
    tie_margin = study.metrics.filter(name=name).values_list("tie_margin", flat=True).first() or 0.0
    # The items with a human label are all the report reads (protocol.report.compare_metric, labels=JUDGED_ONLY):
    # at 200 x 2,000 a few hundred judged items, not 400,000 outputs and 40 M metric labels.
    try:
        report = compare_metric(study_bundle(study=study, items=human_labelled_items(study=study)), name,
                                eps=tie_margin, seed=study.protocol_seed, labels=JUDGED_ONLY)
    except HumanItemsInsufficient:  # the metric left a judged pair unlabelled on its judged items
        report = compare_metric(study_bundle(study=study), name, eps=tie_margin, seed=study.protocol_seed)
    return {"metric": name, **report_json(report)}


def study_leaderboard(*, study: Study) -> list[dict]:
    """Systems ranked by the protocol's decisions (layers of the significance DAG, docs/formulas.md §5).

    ``rank`` 1 = beaten by no system; systems that share a rank are not separated by the
    decisions so far. Within a rank: more wins first, then by name. ``wins``/``losses`` count
    decided pairs, ``undecided`` the pairs still open.
    """

    systems = tuple(study.systems.order_by("name").values_list("name", flat=True))
    decisions = {(a, b): d for a, b, d in PairState.objects.filter(study=study).values_list(
        "first__name", "second__name", "decision")}
    return ranking.decision_ranks(systems, decisions)
