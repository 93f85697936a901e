"""The Celery app. Without CELERY_BROKER_URL tasks run eagerly in the calling process."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalapp.settings.dev")

app = Celery("evalapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
