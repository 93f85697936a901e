"""Background work (Celery). Without a broker the tasks run eagerly in the calling process."""
from celery import shared_task

from . import services


@shared_task(acks_late=True)
def study_separability_task(study_id: int) -> int:
    return services.study_separability_compute(study_id=study_id)


@shared_task(acks_late=True)
def study_protocol_advance_task(study_id: int) -> None:
    from .serving import study_protocol_advance

    study_protocol_advance(study_id=study_id)


@shared_task(acks_late=True)
def study_metrics_table_task(study_id: int) -> None:
    from .reports import study_metrics_table_refresh

    study_metrics_table_refresh(study_id=study_id)
