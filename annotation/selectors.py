"""Reads: querysets and plain data for views, the API and the protocol."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from protocol.preferences import preferences_from_scores

from .models import Assignment, Judgement, PairState, Study

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


def study_progress(*, study: Study) -> dict:
    """Budget, judgements and decided pairs of one study."""
    judgements = Judgement.objects.filter(comparison__study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    pairs = PairState.objects.filter(study=study).aggregate(total=Count("id"),
                                                            decided=Count("id", filter=Q(status="decided")))
    return {
        "budget": study.budget,
        "judgements": judgements.count(),
        "live_judgements": live,
        "budget_left": max(study.budget - live, 0),
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


def study_metric_labels(*, study: Study) -> dict[tuple[str, str], dict[str, int]]:
    """(first, second) -> {item external id: the study metric's preference}; {} without a metric.

    Scalar metrics give sign(s_first - s_second) with the metric's tie margin (SPEC §1).
    """
    from .models import Comparison, Metric, MetricPreference, MetricScore

    metric = study.metric
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
    """(first, second) -> [(item external id, value)] of every judgement, oldest first."""
    rows = Judgement.objects.filter(comparison__study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item__external_id", "value")
    labels: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a, b, item, value in rows.iterator():
        labels.setdefault((a, b), []).append((item, value))
    return labels


def hit_display(*, assignment, study: Study | None = None) -> dict:
    """What the annotator sees for a HIT: input, and the two outputs in screen order."""
    from .models import Comparison, Judgement, Output

    comparison = Comparison.objects.select_related("item").get(pk=assignment.comparison_id)
    study = study or comparison.study
    texts: dict[int, str] = {}
    # The study's shown sample of each output, else its lowest sample: one query for both.
    for system_id, sample, text in Output.objects.filter(
            item_id=comparison.item_id, system_id__in=(comparison.first_id, comparison.second_id)).order_by(
            "system_id", "sample").values_list("system_id", "sample", "text"):
        if system_id not in texts or sample == study.shown_sample:
            texts[system_id] = text
    first, second = texts[comparison.first_id], texts[comparison.second_id]
    left, right = (second, first) if assignment.shown_swapped else (first, second)
    done = Judgement.objects.filter(annotator_id=assignment.annotator_id, comparison__study=study).count()
    return {"assignment": assignment, "item": comparison.item, "left": left, "right": right, "done": done}


def annotator_judgement_count(*, study: Study, annotator) -> int:
    return Judgement.objects.filter(annotator=annotator, comparison__study=study).count()


def _pair_labels_table(labels: dict[tuple[str, str], list[tuple[str, int]]]):
    import numpy as np

    from protocol.preferences import PairLabels

    return {
        pair: PairLabels(pair[0], pair[1], np.array([i for i, _ in rows], dtype=object),
                         np.array([v for _, v in rows], dtype=np.int8), np.array([""] * len(rows), dtype=object))
        for pair, rows in labels.items() if rows
    }


def study_dashboard_data(*, study: Study) -> dict:
    """Everything the researcher dashboard shows, as plain data (figures are built from it).

    budget, per-pair protocol state with Favi-Score, three significance DAG layouts
    (protocol decisions, human-only sign test, metric-only sign test), per-system Favi
    sets, SPA/PA between humans and the metric on the judged items, the separability
    histogram values and the timeline of theta per closed round.
    """
    import numpy as np

    from protocol import favi as favi_lib
    from protocol import ranking, spa

    from .models import Comparison, Judgement, PairState, PairStateHistory

    systems = tuple(study.systems.order_by("name").values_list("name", flat=True))
    states = list(PairState.objects.filter(study=study).select_related("first", "second").order_by(
        "first__name", "second__name"))
    judgements = Judgement.objects.filter(comparison__study=study)
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    imported = judgements.filter(source=Judgement.Source.IMPORT).count()
    reserved = sum(s.quota_left for s in states)
    human = _pair_labels_table(study_judgement_labels(study=study))
    metric_raw = study_metric_labels(study=study)
    metric = _pair_labels_table({pair: sorted(labels.items()) for pair, labels in metric_raw.items()})
    favi = favi_lib.favi_by_pair(human, metric) if human and metric else {}
    pairs = []
    for s in states:
        key = (s.first.name, s.second.name)
        pair_state = s.state
        f = favi.get(key)
        pairs.append({
            "first": key[0], "second": key[1], "status": pair_state.get("status", "—"),
            "decision": s.decision, "theta": s.theta, "round": s.round, "quota": s.quota_left,
            "judgements": pair_state.get("judgements", 0), "capacity": pair_state.get("capacity", 0),
            "favi": None if f is None or np.isnan(f.favi) else f.favi,
            "agreement": None if f is None else f.sample_accuracy,
        })
    protocol_decisions = {(p["first"], p["second"]): p["decision"] for p in pairs}
    human_decisions = ranking.decisions_from_labels(human) if human else {}
    metric_decisions = ranking.decisions_from_labels(metric) if metric else {}
    dags = {}
    if systems:
        for name, decisions in (("protocol", protocol_decisions), ("human", human_decisions),
                                ("metric", metric_decisions)):
            dags[name] = ranking.dag_layout(ranking.significance_graph(systems, decisions))
    spa_result = None
    common = [p for p in sorted(human) if p in metric]
    if common:
        human_rows, metric_rows, used = [], [], []
        for p in common:
            metric_of = dict(zip(metric[p].items, metric[p].values))
            per_item: dict[str, list[int]] = {}
            for item, value in zip(human[p].items, human[p].values):
                if item in metric_of:
                    per_item.setdefault(item, []).append(int(value))
            if per_item:
                items = sorted(per_item)
                human_rows.append([float(np.mean(per_item[i])) for i in items])
                metric_rows.append([float(metric_of[i]) for i in items])
                used.append(p)
        if used:
            result = spa.compare_differences(used, human_rows, metric_rows, seed=study.protocol_seed)
            spa_result = {"spa": result.spa, "pa": result.pa, "pairs": len(used)}
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
    return {
        "systems": systems,
        "budget": {"total": study.budget, "spent": live, "imported": imported, "reserved": reserved,
                   "left": max(study.budget - live - reserved, 0)},
        "pairs": pairs,
        "statuses": dict(sorted(statuses.items())),
        "dags": dags,
        "per_system_favi": {k: v.tolist() for k, v in favi_lib.per_system_favi(favi).items()} if favi else {},
        "favi_summary": None if summary is None else {
            "mean_abs_favi": summary.mean_abs_favi, "sample_accuracy": summary.sample_accuracy,
            "system_accuracy": summary.system_accuracy},
        "spa": spa_result,
        "timeline": timeline,
        "separability": separability,
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

    judgements = Judgement.objects.filter(comparison__study=study)
    over = Comparison.objects.filter(study=study).annotate(n=Count("judgements")).filter(
        n__gt=study.ratings_per_item).exclude(judgements__source=Judgement.Source.IMPORT).count()
    twice = judgements.values("comparison_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1).count()
    lost = 0
    if acknowledged_keys:
        stored = set()
        for start in range(0, len(acknowledged_keys), 500):
            chunk = acknowledged_keys[start:start + 500]
            stored.update(judgements.filter(idempotency_key__in=chunk).values_list("idempotency_key", flat=True))
        lost = len(set(acknowledged_keys) - stored)
    problems = []
    counted = dict(judgements.values_list("comparison_id").annotate(n=Count("id")).values_list("comparison_id", "n"))
    leased_rows = dict(Assignment.objects.filter(comparison__study=study, state=Assignment.State.LEASED)
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
        if row.state and row.state["judgements"] != row.stored:
            problems.append(f"pair {row.pk}: protocol recorded {row.state['judgements']}, stored {row.stored}")
            consistent = False
    live = judgements.filter(source=Judgement.Source.LIVE).count()
    if live > study.budget:
        problems.append(f"{live} live judgements beyond the budget {study.budget}")
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

    ``first``/``second`` name the pair's systems in either order (both or neither);
    ``annotator`` is an Annotator's external id, ``platform`` its platform.
    """
    from protocol.preferences import canonical_pair

    rows = Judgement.objects.filter(comparison__study=study).select_related(
        "comparison__item", "comparison__first", "comparison__second", "annotator", "assignment").order_by("id")
    if first is not None and second is not None:
        a, b, _ = canonical_pair(first, second)
        rows = rows.filter(comparison__first__name=a, comparison__second__name=b)
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
    done = Judgement.objects.filter(annotator=annotator, comparison__study=study).count()
    started_at = ends_at = None
    time_up = False
    if study.session_minutes:
        started_at = Assignment.objects.filter(annotator=annotator, comparison__study=study).aggregate(
            first=Min("issued_at"))["first"]
        if started_at is not None:
            ends_at = started_at + timedelta(minutes=study.session_minutes)
            time_up = now >= ends_at
    return CrowdSession(done=done, hits_min=max(study.session_hits_min, 1), hits_max=study.session_hits_max,
                        started_at=started_at, ends_at=ends_at, time_up=time_up)


def study_work_left(*, study: Study) -> bool:
    """Whether any pair of the study has a round open or about to close (more HITs may come)."""
    return PairState.objects.filter(study=study, status__in=ACTIVE_PAIR_STATUSES).exists()
