"""Background work (Celery). Without a broker the tasks run eagerly in the calling process.

Services never import this module: they enqueue through annotation/jobs.py, which finds these
tasks by name (the app's ``ready`` imports this module, so they are registered in every process).
"""
from celery import shared_task
from django.core.cache import cache
from django.db import InterfaceError, OperationalError

from . import jobs
from .reports import study_dashboard_refresh, study_metrics_table_refresh
from .services import judges, planner, runtime, studies


@shared_task(acks_late=True)
def study_separability_task(study_id: int) -> int:
    return studies.study_separability_compute(study_id=study_id)


# Transient database errors (a dropped connection, a locked SQLite file) retry with backoff;
# acks_late + reject_on_worker_lost (settings) redeliver the task if its worker dies.
@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=8)
def rounds_close_task(study_id: int) -> int:
    cache.delete(jobs.QUEUED_KEY.format(study_id))
    return runtime.rounds_close(study_id=study_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def protocol_sweep_task() -> dict:
    return runtime.protocol_sweep()


@shared_task(acks_late=True)
def study_metrics_table_task(study_id: int) -> None:
    study_metrics_table_refresh(study_id=study_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def plan_job_task(job_id: int) -> None:
    planner.plan_job_run(job_id=job_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def study_dashboard_task(study_id: int) -> None:
    study_dashboard_refresh(study_id=study_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def judge_run_task(run_id: int) -> None:
    judges.judge_run_execute(run_id=run_id)
