"""Settings for the test suite: fast hashing, eager tasks, database from DATABASE_URL."""
from .base import *  # noqa: F401,F403
import os

from .base import VAR_DIR

DEBUG = False
SECRET_KEY = "test-only-key"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
VAR_DIR.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve static/ without collectstatic
STATIC_ROOT = None  # static files come from static/ via finders; collectstatic is for prod

# A file (not in-memory) SQLite test database, so a real Celery worker process started by a
# test can open the same database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}  # noqa: F405
