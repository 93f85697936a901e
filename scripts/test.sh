#!/usr/bin/env bash
# README command two: install the test dependencies and run the whole suite on SQLite, and
# again (the database-backed tests) on PostgreSQL when a server answers on 127.0.0.1:5432.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh -r requirements-test.txt
bash scripts/setup_venv.sh --no-deps -r requirements-arena.txt
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # The browser tests drive Debian's Chromium (no browser download at run time).
  (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }) \
    || echo "warning: could not install chromium; browser tests will fail" >&2
fi
export EVALAPP_VAR_DIR=${EVALAPP_VAR_DIR:-$PWD/var/test}
# Test processes (pytest-xdist): each has its own test database, so they share nothing but
# Redis, where every test names its own queues and keys. 3 on two cores: the browser tests
# mostly wait (for Chromium's frames, the live server, htmx), so a third process fills the
# cores they leave idle (browser + API tests on a quiet 2-core machine: 465 s with 2, 348 s with 3,
# the same CPU). worksteal: a process that runs out of tests takes some of another's; the
# default share-out left one process idle for the last 7 of the suite's 20 minutes.
WORKERS=${TEST_WORKERS:-3}
echo "== test suite on SQLite ($WORKERS processes)"
.venv/bin/python -m pytest -q -n "$WORKERS" --dist worksteal "$@"
if [ -z "${DATABASE_URL:-}" ] && .venv/bin/python - <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(s.connect_ex(("127.0.0.1", 5432)))
PY
then
  # Again on PostgreSQL, the tests of what writes SQL of its own or leans on the database's
  # locks and constraints: the serving loop and its store, crowd entry, exclusions and
  # re-decisions, judge runs that resume, imports (executemany), the API's writes, NUL
  # characters (which PostgreSQL refuses), and the crowd's core flow in a real browser. The
  # rest (pages, statistics, the other browser flows) reads through the same services; on
  # PostgreSQL it repeated 20 minutes of the suite for no line of SQL of its own.
  echo "== database-backed tests on PostgreSQL (127.0.0.1:5432)"
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python -m pytest -q -n "$WORKERS" --dist worksteal \
    tests/serving tests/crowd tests/quality tests/judges \
    tests/cockpit/test_import_export.py tests/cockpit/test_import_statistics.py tests/cockpit/test_import_tables.py \
    tests/cockpit/test_conversations_import_export.py tests/cockpit/test_study_management.py \
    tests/api/test_api.py tests/api/test_api_end_to_end.py tests/security/test_nul_characters.py \
    tests/browser/test_annotate.py
elif [ -n "${DATABASE_URL:-}" ]; then
  echo "== (DATABASE_URL was set: the suite above ran on it)"
fi
