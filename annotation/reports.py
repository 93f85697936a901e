"""The study's reports computed off the request path and cached, one way (``CachedReport``):
the dashboard's heavy parts, per round, and every imported metric against the human
judgements (issue 12, item 4).

Too slow for a request on a large study (50 systems; a dozen metrics x SPA with a bootstrap),
so a job computes each (``study_dashboard_refresh``, ``study_metrics_table_refresh``) and the
shared cache keeps it, one entry per study with the version of the study it was computed for;
pages read the metrics table with ``study_metrics_table`` and ask for a refresh with
``study_metrics_table_request``. The cache must be shared by web processes and workers
(settings.CACHES["shared"]: Redis or files in var/).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.core.cache import caches
from django.db.models import Count, Max

from protocol import favi as favi_lib
from protocol import ranking
from protocol.leaderboard import natural_key
from protocol.preferences import pair_labels_table
from protocol.spa import (SPA_MIN_PAIRS, SUMMARY_PERMUTATIONS, SUMMARY_REPLICATES, bootstrap_interval,
                          compare_differences, item_mean_rows, significance_clusters, spa_summary)

from . import figures, jobs
from .models import Study
from .selectors import dashboard, studies
from .selectors.quality import counted_judgements

CACHE_SECONDS = 7 * 24 * 3600
LOCK_SECONDS = 600


@dataclass(frozen=True)
class CachedReport:
    """A report of a study computed off the request path and kept in the shared cache: one
    entry per study, ``(version, data)`` — the version of the study it was computed for — and
    a lock while a job computes it. The one way both of this module's reports are cached.

    ``key``: the entry's key with ``{}`` for the study's id; the format's number is in it, so
    a deployment that changes what is cached never reads an entry of the old shape."""

    key: str

    def read(self, study_id: int) -> tuple[tuple, object] | None:
        """``(version, data)`` as last stored, or None."""
        return _cache().get(self.key.format(study_id))

    def store(self, study_id: int, version: tuple, data) -> None:
        _cache().set(self.key.format(study_id), (version, data), CACHE_SECONDS)

    def claim(self, study_id: int) -> bool:
        """Take the study's lock (True) unless a job already holds it."""
        return _cache().add(self.key.format(study_id) + ":lock", 1, LOCK_SECONDS)

    def release(self, study_id: int) -> None:
        _cache().delete(self.key.format(study_id) + ":lock")


# 2: the figures are cached with the data; 3: the ranking design's sort and implied pairs;
# 4: a design's section names its design, which names its template; 5: the style-controlled
# leaderboard; 6: the pairs' fragility; 7: the matrix's heatmap in pages; 8: the active design's
# claims carry the bar they are made at (order_misorder, each neighbour's bar); 9: no DAG
# figure beyond 50 systems.
DASHBOARD = CachedReport("evalapp:dashboard:9:{}")
# 2: one entry per study, its version in the entry (before: one key per version).
METRICS_TABLE = CachedReport("evalapp:metrics-table:2:{}")


def study_dashboard(*, study: Study, current: bool = False) -> dict:
    """The dashboard's data: its heavy parts cached per round in the shared cache (one copy for
    every web process), the budget counted now (issue 22).

    While a round runs a request reads the cached parts. When a round has closed since, it
    shows the last round's and has a job (``jobs.study_dashboard``) compute the new ones off
    the request; only a study never computed is computed in the request (the CSV exports and
    the API; the dashboard page asks with ``study_dashboard_ready`` and says it is computing).
    ``current``: never the last round's (the API, whose clients read the decisions right after
    a close): this round's parts are computed in the request when the cache holds an older
    round's.
    """
    pairs = dashboard.dashboard_pair_totals(study=study)  # one scan of the wide pair rows for both
    version = dashboard.dashboard_version(study=study, pairs=pairs)
    data = _dashboard_cached(study, version, last_round=not current)
    if data is None:
        data = _dashboard_store(study, version)
    return {**data, **dashboard.dashboard_live(study=study, data=data, pairs=pairs)}


def study_dashboard_ready(*, study: Study) -> dict | None:
    """As ``study_dashboard``, but a study whose dashboard was never computed has the job compute
    it and gets None while it runs (the page says so and reloads itself): ``import_study``
    leaves the first one to the job (tens of seconds at 200 systems: docs/benchmarks.md,
    "Import"), and a request must not spend them. Ready at once where jobs run inline."""
    pairs = dashboard.dashboard_pair_totals(study=study)
    version = dashboard.dashboard_version(study=study, pairs=pairs)
    data = _dashboard_cached(study, version)
    if data is None:
        if DASHBOARD.claim(study.pk):
            jobs.study_dashboard(study.pk)
        data = _dashboard_cached(study, version)
        if data is None:
            return None
    return {**data, **dashboard.dashboard_live(study=study, data=data, pairs=pairs)}


def _dashboard_cached(study: Study, version: tuple, *, last_round: bool = True) -> dict | None:
    """The cached heavy parts for ``version``, else (``last_round``) the last round's of this
    study with a job started for the current ones, else None (never computed)."""
    cached = DASHBOARD.read(study.pk)
    if cached is not None and cached[0] == version:
        return cached[1]
    if last_round and cached is not None and cached[0][:3] == version[:3]:  # this study's (pk, slug, created_at)
        if DASHBOARD.claim(study.pk):
            jobs.study_dashboard(study.pk)
        return cached[1]
    return None


def study_dashboard_refresh(*, study_id: int) -> None:
    """Compute the dashboard's heavy parts for the study's current round and cache them (the job's body)."""
    study = Study.objects.get(pk=study_id)
    try:
        _dashboard_store(study, dashboard.dashboard_version(study=study))
    finally:
        DASHBOARD.release(study_id)


def _dashboard_store(study: Study, version: tuple) -> dict:
    data = dashboard.study_dashboard_heavy(study=study)
    # The figures are built from the round's data alone (and gamma, part of the version), and
    # building them through plotly's validators costs far more than reading them at 50 systems
    # (docs/benchmarks.md), so they are cached with it rather than rebuilt on every view.
    data["charts"] = figures.dashboard_charts(data, gamma=study.gamma)
    data["matrix_charts"] = figures.matrix_charts(data)
    data["round_version"] = version  # what the template caches the round's fragments under
    DASHBOARD.store(study.pk, version, data)
    return data


def _cache():
    return caches["shared"]


SORT_KEYS = {
    # key: (label, higher is better)
    "spa": ("SPA", True), "spa_common": ("SPA on common items", True), "pa": ("PA", True), "sample_accuracy": ("sample agreement", True),
    "system_accuracy": ("system agreement", True), "mean_abs_favi": ("mean |Φ|", False), "name": ("name", None),
}


def metrics_table_version(*, study: Study) -> tuple:
    """What the metrics table is computed from: the counted judgements, the metrics, the seed."""
    version = counted_judgements(study=study).aggregate(n=Count("id"), last=Max("id"))
    metrics = study.metrics.aggregate(n=Count("id"), last=Max("id"))
    return (study.pk, study.created_at.timestamp(), version["n"], version["last"], metrics["n"], metrics["last"],
            study.protocol_seed)


def study_metrics_table(*, study: Study) -> dict | None:
    """The cached table for the study's current judgements, or None while it is computed."""
    cached = METRICS_TABLE.read(study.pk)
    return cached[1] if cached is not None and cached[0] == metrics_table_version(study=study) else None


def study_metrics_table_request(*, study: Study) -> None:
    """Ask a worker for the table unless it is cached or already being computed."""
    if study_metrics_table(study=study) is None and METRICS_TABLE.claim(study.pk):
        jobs.study_metrics_table(study.pk)


def study_metrics_table_refresh(*, study_id: int) -> dict:
    """Compute the table and store it in the cache (the Celery task's body)."""
    study = Study.objects.get(pk=study_id)
    version = metrics_table_version(study=study)
    try:
        table = study_metrics_table_compute(study=study)
        METRICS_TABLE.store(study_id, version, table)
    finally:
        METRICS_TABLE.release(study_id)
    return table


def study_metrics_table_compute(*, study: Study) -> dict:
    """One row per imported metric: sample and system agreement, mean |Φ|, SPA (with its
    interval and significance cluster) and PA, error categories of its sign-test decisions
    against the humans'; ``protocol`` marks the study's own metric."""
    human = pair_labels_table(studies.study_judgement_labels(study=study))
    human_decisions = ranking.decisions_from_labels(human) if human else {}
    rows, tables = [], {}
    for metric in study.metrics.all():
        table = dashboard.metric_labels_table(study=study, metric=metric, human=human)
        tables[metric.name] = table
        favi = favi_lib.favi_by_pair(human, table) if human and table else {}
        summary = favi_lib.summarize(favi) if favi else None
        spa = spa_summary(human, table, study.protocol_seed) if human and table else None
        metric_decisions = ranking.decisions_from_counts(studies.study_metric_counts(study=study, metric=metric))
        categories = {c: 0 for c in ranking.CATEGORIES}
        for pair, decision in metric_decisions.items():
            categories[ranking.decision_category(human_decisions.get(pair, 0), decision)] += 1

        def finite(x):
            return None if x is None or np.isnan(x) else float(x)

        enough = bool(spa and spa["enough"])
        rows.append({
            "name": metric.name, "kind": metric.kind, "protocol": metric.pk == study.metric_id,
            "pairs": 0 if summary is None else summary.pairs,
            "sample_accuracy": None if summary is None else finite(summary.sample_accuracy),
            "system_accuracy": None if summary is None else finite(summary.system_accuracy),
            "mean_abs_favi": None if summary is None else finite(summary.mean_abs_favi),
            "spa": spa["spa"] if enough else None, "spa_low": spa["spa_low"] if enough else None,
            "spa_high": spa["spa_high"] if enough else None, "pa": spa["pa"] if enough else None,
            "cluster": None, "spa_common": None, "categories": categories,
        })
    clustered = _clusters(rows, human, tables, study.protocol_seed)
    return {"rows": rows, "judgements": sum(len(h.values) for h in human.values()), "clustered": clustered}


def _clusters(rows: list[dict], human, tables, seed: int) -> int:
    """Sets ``spa_common`` and ``cluster`` on the rows with an SPA: metrics compared on the items EVERY such metric
    labels, by the same bootstrap redraws (p[a, b] = share of redraws where b's SPA is at least
    a's, a ranked above b), grouped greedily (protocol.spa.significance_clusters). Returns how
    many metrics were clustered (0 when fewer than two have enough common data)."""
    names = [r["name"] for r in rows if r["spa"] is not None]
    if len(names) < 2:
        return 0
    pairs, human_rows, metric_rows = item_mean_rows(human, {n: tables[n] for n in names})
    if len(pairs) < SPA_MIN_PAIRS:
        return 0
    common = {n: compare_differences(pairs, human_rows, metric_rows[n], permutations=SUMMARY_PERMUTATIONS,
                                     seed=seed).spa for n in names}
    order = sorted(names, key=lambda n: -common[n])
    replicates = np.array([bootstrap_interval(pairs, human_rows, metric_rows[n], replicates=SUMMARY_REPLICATES,
                                              permutations=SUMMARY_PERMUTATIONS, seed=seed).replicate_spa
                           for n in order])
    p_values = np.full((len(order), len(order)), np.nan)
    for a in range(len(order)):
        for b in range(a + 1, len(order)):
            p_values[a, b] = float(np.mean(replicates[b] >= replicates[a]))
    cluster_of = dict(zip(order, significance_clusters(p_values)))
    for row in rows:
        row["cluster"] = cluster_of.get(row["name"])
        row["spa_common"] = common.get(row["name"])
    return len(order)


def sorted_rows(rows: list[dict], sort: str) -> list[dict]:
    """Rows ordered by ``sort`` (a SORT_KEYS key), best first; missing values last."""
    if sort not in SORT_KEYS:
        raise ValueError(f"unknown sort key {sort!r}; one of {', '.join(SORT_KEYS)}")
    if sort == "name":
        return sorted(rows, key=lambda r: natural_key(r["name"]))
    higher_better = SORT_KEYS[sort][1]
    return sorted(rows, key=lambda r: (r[sort] is None, -(r[sort] or 0) if higher_better else (r[sort] or 0)))
