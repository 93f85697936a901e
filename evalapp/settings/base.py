"""Settings shared by every environment; values come from the environment."""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("EVALAPP_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = False
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h]
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "annotation",
]

MIDDLEWARE = [
    "annotation.framing.PartitionedCookieMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "annotation.http.RefuseNulMiddleware",  # after auth: the 400 page shows who is logged in
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "evalapp.urls"
WSGI_APPLICATION = "evalapp.wsgi.application"
ASGI_APPLICATION = "evalapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotation.context_processors.permissions",
            ],
        },
    },
]

# SQLite in var/ is the embedded default; DATABASE_URL (postgres://...) switches.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'evalapp.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers queue for the database file instead of polling it (evalapp/sqlite_backend).
    DATABASES["default"]["ENGINE"] = "evalapp.sqlite_backend"
    # Serving and deciding write from several threads; wait for the lock, never fail fast.
    # IMMEDIATE: a write transaction takes the lock when it begins, so two concurrent
    # read-then-write transactions queue instead of failing with "database is locked".
    # WAL: readers never wait for the writer; synchronous=NORMAL is durable across a process
    # crash (a power cut may lose the last transactions, never corrupt the file).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20, transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
else:
    # A persistent connection that the server dropped is replaced before a request uses it;
    # the check polls the connection's socket, no round trip unless the server sent something
    # (evalapp/postgresql_backend).
    DATABASES["default"]["ENGINE"] = "evalapp.postgresql_backend"
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Server-side parameters and prepared statements: the serving loop runs the same few
    # statements all day, and PostgreSQL parsing and planning them anew was a third of its CPU
    # per submit + next HIT (docs/serving.md). A statement is prepared on a connection after
    # EVALAPP_PG_PREPARE_THRESHOLD runs; 0 turns preparing off (e.g. behind a pooler in
    # transaction mode, where a connection's prepared statements are not the session's).
    # PostgreSQL's default plan cache (plan_cache_mode=auto): a prepared statement runs on a
    # generic plan, made once for any parameters, after five runs whose custom plans cost no less.
    # Planning every run (force_custom_plan, until issue 41) was 37-42 % of the backend's CPU per
    # submit + next HIT; the lookups by key plan the same for any data. The few statements whose
    # best plan depends on their parameters and on tables that grow with use (a study's serving
    # tables start empty) are sent unprepared, planned on every run (annotation/serving/store.py,
    # ``planned_per_run``): a generic plan made for the empty tables had the annotator's judgement
    # count scan every comparison for each of their judgements, and the loop's database CPU per
    # submit grow sevenfold within a minute of load at 50 x 2,000 (docs/serving.md, "Query plans
    # and statements"; docs/benchmarks.md).
    _prepare_threshold = int(os.environ.get("EVALAPP_PG_PREPARE_THRESHOLD", "2"))
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True,
                                                          prepare_threshold=_prepare_threshold or None)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Sessions are read on every annotator request: from this process's cache, the database
# only on a miss (a crowd worker's session is written once, at the start link). A new
# session's key is drawn without asking the database first (evalapp/sessions.py).
SESSION_ENGINE = "evalapp.sessions"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))

# Origins that may frame the crowd pages (start link, HIT page; annotation/framing.py).
EVALAPP_CROWD_FRAME_ANCESTORS = os.environ.get(
    "EVALAPP_CROWD_FRAME_ANCESTORS", "https://www.mturk.com https://workersandbox.mturk.com").split()

# Content-Security-Policy on every response (django-csp): scripts only from our own origin
# (htmx, plotly.js and the Swagger UI are vendored, no page has an inline script or handler),
# so an injected <script> or onerror= cannot run even where escaping failed. Styles allow
# inline attributes: the dashboard's bars and plotly set style attributes. Crowd pages
# replace frame-ancestors with the platforms' origins (annotation/framing.py).
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}}

# Session and CSRF cookies marked Partitioned (CHIPS) for crowd pages in MTurk's frame (prod).
EVALAPP_PARTITIONED_COOKIES = env_bool("EVALAPP_PARTITIONED_COOKIES", False)

# Mail (password reset). Without DJANGO_EMAIL_HOST there is no mail server: the password reset
# page says so (a researcher's set-password link is the way in) instead of pretending it sent one.
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("DJANGO_EMAIL_PORT", "587"))
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("DJANGO_EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "evalapp@localhost")
EVALAPP_PASSWORD_RESET_BY_MAIL = bool(EMAIL_HOST)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Limits of a study bundle read by upload, API and import (docs/bundle-format.md), checked as
# the file streams in; a variable left unset keeps protocol.bundle.BundleLimits' default.
EVALAPP_BUNDLE_LIMITS = {name: int(os.environ[variable]) for name, variable in (
    ("max_bytes", "EVALAPP_MAX_BUNDLE_BYTES"), ("max_lines", "EVALAPP_MAX_BUNDLE_LINES"),
    ("max_line_bytes", "EVALAPP_MAX_BUNDLE_LINE_BYTES"), ("max_rows", "EVALAPP_MAX_BUNDLE_ROWS"),
) if os.environ.get(variable)}
# Where an uploaded bundle waits for the researcher's metric choice (docs/studies.md): under
# the app's var/ (a test run's own, so runs never share or leak files). Several web hosts need
# a shared directory.
EVALAPP_STAGED_UPLOAD_DIR = os.environ.get("EVALAPP_STAGED_UPLOAD_DIR") or str(VAR_DIR / "staged-uploads")
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# "default" is this process's memory; "shared" is one cache for every web process and Celery
# worker (a worker computes the metrics table, the web reads it): Redis when EVALAPP_CACHE_URL
# is set (redis://...), else files in var/.
# Seconds between two polls of the live dashboard (htmx); tests make it short.
DASHBOARD_REFRESH_SECONDS = float(os.environ.get("EVALAPP_DASHBOARD_REFRESH_SECONDS", "5"))

# Celery: eager (in-process) unless a broker is configured.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("EVALAPP_CELERY_QUEUE", "celery")
# A worker killed mid-task leaves its task on the broker, redelivered after this many seconds
# (round closes are idempotent, so a redelivery is harmless).
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": int(os.environ.get("EVALAPP_CELERY_VISIBILITY_TIMEOUT", "120"))}
CELERY_BEAT_SCHEDULE = {
    "protocol-sweep": {"task": "annotation.tasks.protocol_sweep_task",
                       "schedule": float(os.environ.get("EVALAPP_SWEEP_SECONDS", "30"))},
}

# Where background work runs (round closes, plans, reports, judge runs: annotation/jobs.py, one
# backend class each): "celery" (a task; the default with a broker), "thread" (a background
# thread of the web process; the default without one) or "inline" (right after the submit
# commits, in the same request: the test suite's choice, so tests see decisions at once).
# Either way it runs after the annotator's transaction, never in it.
BACKGROUND_WORK_BACKENDS = ("celery", "thread", "inline")  # annotation.jobs.BACKENDS (a test checks)


def background_work_from(environ: Mapping[str, str], default: str) -> str:
    """EVALAPP_BACKGROUND_WORK from the environment, else its deprecated old name
    EVALAPP_ROUND_CLOSE (it governs all background work, not only round closes), else ``default``."""
    value = environ.get("EVALAPP_BACKGROUND_WORK")
    if not value and environ.get("EVALAPP_ROUND_CLOSE"):
        warnings.warn("EVALAPP_ROUND_CLOSE is deprecated: name it EVALAPP_BACKGROUND_WORK", DeprecationWarning,
                      stacklevel=2)
        value = environ["EVALAPP_ROUND_CLOSE"]
    value = value or default
    if value not in BACKGROUND_WORK_BACKENDS:
        raise ValueError(f"EVALAPP_BACKGROUND_WORK must be {', '.join(BACKGROUND_WORK_BACKENDS)}, not {value!r}")
    return value


EVALAPP_BACKGROUND_WORK = background_work_from(os.environ, "celery" if CELERY_BROKER_URL else "thread")
# Fault injection for the fault tests only: seconds a round close waits between deciding and
# applying (a worker can then be killed mid-close). 0 in every real deployment.
EVALAPP_FAULT_PAUSE_BEFORE_APPLY = float(os.environ.get("EVALAPP_FAULT_PAUSE_BEFORE_APPLY", "0"))
# How often the sweep closes filled rounds left behind and reclaims expired leases (seconds).
EVALAPP_SWEEP_SECONDS = float(os.environ.get("EVALAPP_SWEEP_SECONDS", "30"))
# Lanes of background jobs (annotation/jobs.py) that run in a child process of each web process
# instead of a thread, in mode "thread": "reports" (the dashboard's data, the metrics table:
# seconds of CPU a request thread would wait behind). Comma-separated; empty: all in threads.
EVALAPP_PROCESS_LANES = frozenset(
    lane.strip() for lane in os.environ.get("EVALAPP_PROCESS_LANES", "reports").split(",") if lane.strip())

# LLM judge runs (annotation/services/judges.py, docs/judges.md). A run started from a study's
# page may send an API key only where this allows: environment variable name -> the base URLs
# its key may be sent to (JSON in EVALAPP_JUDGE_ENDPOINTS; a researcher picks one pair, and no
# researcher can have the server send a key elsewhere or read another variable). The key stays
# in the environment, never in the database. `manage.py judge` (a shell user) may name any.
EVALAPP_JUDGE_ENDPOINTS = json.loads(os.environ.get("EVALAPP_JUDGE_ENDPOINTS")
                                     or '{"OPENAI_API_KEY": ["https://api.openai.com/v1"]}')
# One call's timeout (s); calls tried again after a 429, a 5xx, a timeout or a lost connection,
# waiting EVALAPP_JUDGE_BACKOFF seconds doubled each time (at most 60 s, or the Retry-After).
EVALAPP_JUDGE_TIMEOUT = float(os.environ.get("EVALAPP_JUDGE_TIMEOUT", "120"))
EVALAPP_JUDGE_MAX_RETRIES = int(os.environ.get("EVALAPP_JUDGE_MAX_RETRIES", "6"))
EVALAPP_JUDGE_BACKOFF = float(os.environ.get("EVALAPP_JUDGE_BACKOFF", "1"))
EVALAPP_JUDGE_MAX_CONCURRENCY = 32

# Caches, one declaration. "default" (round-close coalescing; per process is enough),
# "throttle" (rate-limit counts, which every web process must share, or N processes accept N
# times a limit) and "shared" (the metrics table, computed by a worker and read by every web
# process): Redis when EVALAPP_CACHE_URL is set (deployment), else this process's memory and,
# for what processes share, files in var/ (the embedded default's gunicorn processes: the
# throttle's counts in diskcache's SQLite shards, the shared reports as files).
if os.environ.get("EVALAPP_CACHE_URL"):
    # While Redis does not answer, each process counts and caches in its own memory and says so
    # in its log (evalapp/caches.ResilientRedisCache; docs/serving.md): an outage was a 500 on
    # every rate-limited request. A call waits at most a second for Redis, and after a failure
    # Redis is asked again only every retry_seconds.
    _redis_options = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0, "retry_seconds": 5}
    CACHES = {
        alias: {"BACKEND": "evalapp.caches.ResilientRedisCache", "LOCATION": os.environ["EVALAPP_CACHE_URL"],
                "KEY_PREFIX": prefix, "OPTIONS": _redis_options}
        for alias, prefix in (("default", "evalapp"), ("throttle", "evalapp-throttle"), ("shared", "evalapp-shared"))
    }
else:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "evalapp"},
        # Rate-limit counts: a small entry per client and scope, written on every counted request.
        # diskcache keeps them in sharded SQLite files (not the app's database): a write costs the
        # same however many clients it has seen. Django's file cache lists its whole directory on
        # every write to decide whether to cull (one file per entry, the expired ones kept until
        # then), so its writes grow with the clients, paid by every crowd request of a
        # long-running study (docs/benchmarks.md; scripts/bench/throttle_cache.py).
        # One shard: each request thread opens its own connection to every shard on first use
        # (eight cost eight times one), and 75 writes/s need no sharding;
        # ThrottleCache keeps it open across requests (diskcache's own closes it at each end).
        "throttle": {"BACKEND": "evalapp.caches.ThrottleCache", "LOCATION": str(VAR_DIR / "throttle"), "SHARDS": 1,
                     "OPTIONS": {"size_limit": 2**26}},
        "shared": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                   "LOCATION": str(VAR_DIR / "cache")},
    }

REST_FRAMEWORK = {
    # Token first: an unauthenticated API call then answers 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["annotation.api_renderers.FiniteJSONRenderer",
                                 "rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_THROTTLE_CLASSES": ["annotation.throttles.ApiTokenThrottle"],
    # The client address of rate limits: REMOTE_ADDR unless EVALAPP_TRUSTED_PROXIES proxies
    # (each appending to X-Forwarded-For) stand in front; then the address the outermost trusted
    # proxy saw. A client's own X-Forwarded-For is never believed.
    "NUM_PROXIES": int(os.environ.get("EVALAPP_TRUSTED_PROXIES", "0")),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "annotation.api_errors.exception_handler",
}

# Request rates (docs/api.md). Keys are throttle scopes (annotation/throttles.py).
EVALAPP_THROTTLE_RATES = {
    "api": os.environ.get("EVALAPP_THROTTLE_API", "600/minute"),
    "submit": os.environ.get("EVALAPP_THROTTLE_SUBMIT", "120/minute"),
    # GETs of the HIT page per annotator: a worker reloads, answers without JavaScript (a GET
    # after each answer) or waits on "no work right now" (a GET every 5 s), never 2 a second.
    "page": os.environ.get("EVALAPP_THROTTLE_PAGE", "120/minute"),
    "crowd_start": os.environ.get("EVALAPP_THROTTLE_CROWD_START", "30/minute"),
    # New crowd workers (worker id + platform session) one client address may start.
    "crowd_new": os.environ.get("EVALAPP_THROTTLE_CROWD_NEW", "20/hour"),
    "login": os.environ.get("EVALAPP_THROTTLE_LOGIN", "10/minute"),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "evalapp API",
    "DESCRIPTION": "Import studies, serve and answer HITs, steer the budgeted protocol and read its "
                   "decisions, judgements and metric report. Errors are {\"detail\", \"code\"} (docs/api.md).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI from the vendored sidecar package: the docs page loads nothing from a CDN.
    # (No Redoc page: Redoc itself fetches web fonts and a logo from the internet.)
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema states what the serializers refuse (annotation/api_schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "annotation.api_schema.strings_refuse_nul"],
    "ENUM_NAME_OVERRIDES": {"StudyStatusEnum": "annotation.models.Study.Status",
                            "ItemChoiceEnum": "annotation.models.Study.ItemChoice"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"forbidden_one_line": {"()": "annotation.log_filters.ForbiddenWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"filters": ["forbidden_one_line"]},
                # a judge run's HTTP clients: one INFO line per call otherwise (10,000 for a study)
                **{name: {"level": "WARNING"} for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2")}},
}
