from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"
    verbose_name = "Annotation studies"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the deployment checks)
