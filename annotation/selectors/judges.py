"""Reads of the judges screens: a study's judge runs and one run's progress and cost
(services/judges.py writes them); the calibration table is ``studies.study_judges``."""
from __future__ import annotations

from django.db.models import Count, Sum
from django.utils import timezone

from ..models import JudgeRun, Study


def judge_run_summary(*, run: JudgeRun) -> dict:
    """One run as plain data: settings (the key's variable by name only), progress, what it cost
    (calls paid and their tokens, from the cache rows it paid for) and its speed."""
    paid = run.calls.aggregate(n=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    end = run.finished_at or (timezone.now() if run.running and run.started_at else None)
    seconds = (end - run.started_at).total_seconds() if end and run.started_at else None
    judged = run.done - run.already
    return {
        "id": run.pk, "status": run.status, "metric": run.metric_name, "model": run.model, "base_url": run.base_url,
        "api_key_env": run.api_key_env, "prompt": run.prompt_name, "criteria": list(run.criteria),
        "both_orders": run.both_orders, "samples": run.samples, "concurrency": run.concurrency, "scope": run.scope,
        "total": run.total, "done": run.done, "percent": run.percent, "already": run.already,
        "verdicts": run.verdicts, "unparsed": run.unparsed, "cache_hits": run.cache_hits, "retries": run.retries,
        "calls": paid["n"], "prompt_tokens": paid["prompt"] or 0, "completion_tokens": paid["completion"] or 0,
        "tokens": (paid["prompt"] or 0) + (paid["completion"] or 0),
        "seconds": seconds, "per_second": judged / seconds if seconds and judged > 0 else None,
        "attempts": run.attempts, "error": run.error, "created_at": run.created_at, "finished_at": run.finished_at,
    }


def study_judge_runs(*, study: Study, limit: int = 20) -> list[dict]:
    """The study's latest judge runs, newest first."""
    return [judge_run_summary(run=run) for run in JudgeRun.objects.filter(study=study)[:limit]]
