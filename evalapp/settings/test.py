"""Settings for the test suite: fast hashing, eager tasks, database from DATABASE_URL."""
from .base import *  # noqa: F401,F403
import os

from .base import VAR_DIR, background_work_from

DEBUG = False
SECRET_KEY = "test-only-key"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
EVALAPP_BACKGROUND_WORK = background_work_from(os.environ, "inline")
# Background jobs in threads of the test process, which share its in-memory caches and test
# database (a test that wants a lane's child process asks for it, tests/serving/test_process_lanes.py).
EVALAPP_PROCESS_LANES = frozenset()
# Tasks run eagerly in the test process, so an in-memory cache is shared with them and
# nothing survives the run.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
          "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"},
          "shared": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "shared"}}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
VAR_DIR.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve static/ without collectstatic
STATIC_ROOT = None  # static files come from static/ via finders; collectstatic is for prod

# A file (not in-memory) SQLite test database, so a real Celery worker process started by a
# test can open the same database.
# Every run gets its own test database (SQLite file or PostgreSQL database), so two runs on one
# machine (a developer's and CI's, or parallel checkouts) never drop each other's tables.
if DATABASES["default"]["ENGINE"] == "evalapp.sqlite_backend":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}  # noqa: F405
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_evalapp_{os.getpid()}"}  # noqa: F405
    # A test's commits need not reach the disk (the database is dropped at the end): PostgreSQL
    # otherwise waits for an fsync at every commit of the tests that commit (live server,
    # TransactionTestCase flushes).
    _options = DATABASES["default"].setdefault("OPTIONS", {})  # noqa: F405
    _options["options"] = " ".join(filter(None, [_options.get("options"), "-c synchronous_commit=off"]))
# The same for the Celery queue that tests with a real worker send to.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("EVALAPP_CELERY_QUEUE") or f"evalapp-test-{os.getpid()}"
# The cache (throttle counts) gets a prefix of its own per run, so runs sharing a Redis never mix.
CACHES["default"]["KEY_PREFIX"] = f"evalapp-test-{os.getpid()}"  # noqa: F405
CACHES["throttle"]["KEY_PREFIX"] = f"evalapp-test-throttle-{os.getpid()}"  # noqa: F405
