#!/usr/bin/env bash
# README command one: install, migrate, load the demo studies and accounts, serve on 127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh -r requirements.txt
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-evalapp.settings.dev}
# Debug off: a served study must not keep every SQL query in memory (DJANGO_DEBUG=1 for development).
export DJANGO_DEBUG=${DJANGO_DEBUG:-0}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py demo_setup
echo "Serving evalapp on http://127.0.0.1:${PORT:-8000}/ (Ctrl-C stops it)"
# gunicorn, 3 processes x 4 threads (measured best of 1x16, 2x4, 2x8, 3x4 on 2 cores): both cores serve, a request never waits behind a
# slow one (runserver is one process). Round closes run in a background thread of each
# process (no broker needed); see docs/deployment.md.
exec .venv/bin/gunicorn evalapp.wsgi -c python:evalapp.gunicorn_conf --preload --bind "127.0.0.1:${PORT:-8000}" --workers 3 --worker-class gthread \
  --threads 4 --log-level warning
