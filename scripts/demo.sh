#!/usr/bin/env bash
# README command one: install, migrate, load the demo studies and accounts, serve on 127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh -r requirements.txt
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-evalapp.settings.dev}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py demo_setup
echo "Serving evalapp on http://127.0.0.1:${PORT:-8000}/ (Ctrl-C stops it)"
exec .venv/bin/python manage.py runserver "127.0.0.1:${PORT:-8000}" --noreload
