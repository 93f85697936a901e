from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"
    verbose_name = "Annotation studies"

    def ready(self) -> None:
        # Imported once the models are loaded, as Django asks of ready(): the deployment checks
        # register themselves, and so do the Celery tasks that annotation/jobs.py finds by name.
        from . import checks  # noqa: F401
        from . import tasks  # noqa: F401
