"""Background work (Celery). Without a broker the tasks run eagerly in the calling process."""
from celery import shared_task
from django.core.cache import cache
from django.db import InterfaceError, OperationalError


@shared_task(acks_late=True)
def study_separability_task(study_id: int) -> int:
    from .services import studies

    return studies.study_separability_compute(study_id=study_id)


# Transient database errors (a dropped connection, a locked SQLite file) retry with backoff;
# acks_late + reject_on_worker_lost (settings) redeliver the task if its worker dies.
@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=8)
def rounds_close_task(study_id: int) -> int:
    from .services import rounds

    cache.delete(rounds.QUEUED_KEY.format(study_id))
    return rounds.rounds_close(study_id=study_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def protocol_sweep_task() -> dict:
    from .services import rounds

    return rounds.protocol_sweep()


@shared_task(acks_late=True)
def study_metrics_table_task(study_id: int) -> None:
    from .reports import study_metrics_table_refresh

    study_metrics_table_refresh(study_id=study_id)


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1, max_retries=3)
def plan_job_task(job_id: int) -> None:
    from .services import planner

    planner.plan_job_run(job_id=job_id)
