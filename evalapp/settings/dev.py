"""Embedded default: SQLite in var/, eager tasks, debug on, a fixed local secret."""
from .base import *  # noqa: F401,F403
from .base import SECRET_KEY, VAR_DIR, env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = SECRET_KEY or "dev-only-insecure-key-never-use-in-production"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
VAR_DIR.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = None  # static files come from static/ via finders; collectstatic is for prod
