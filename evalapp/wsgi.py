"""WSGI entry point."""
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalapp.settings.prod")

application = get_wsgi_application()
# Import every view (and what they import) now, not in the first annotator's request: with
# gunicorn --preload this happens once, before the workers fork.
get_resolver().url_patterns
