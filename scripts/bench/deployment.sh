#!/usr/bin/env bash
# The deployment-mode load measurement in one command (docs/benchmarks.md): a fresh PostgreSQL
# database, gunicorn (--preload, gthread), a Celery worker with beat on Redis, the SummEval
# relevance study, then scripts/bench/load_annotators.py --scenario deployment; everything it started
# is stopped and the database dropped at the end. Prints the harness's JSON (last line).
#
#   scripts/bench/deployment.sh [PORT] [DATABASE_NAME] [load_annotators.py options...]
#   scripts/bench/deployment.sh 8131 perf_deploy
#   scripts/bench/deployment.sh 8131 perf_deploy --max-seconds 20          # a short check
#
# Environment: PYTHON (default .venv/bin/python, else python3), PG (server URL without a
# database, default postgres://postgres@127.0.0.1:5432), REDIS (a Redis database of its own,
# default redis://127.0.0.1:6379/13: the run's cache, sessions and queue live there and it is
# flushed first), WEB_WORKERS x WEB_THREADS (default 3 x 4), CELERY_CONCURRENCY (default 1),
# KEEP=1 keeps the database and the logs; BUNDLE, SLUG, METRIC or LONG_WORDS="800 2000" choose
# the study (lib.sh bench_study).
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${1:-8131}
DB=${2:-perf_deploy}
shift $(( $# > 2 ? 2 : $# ))
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS=${REDIS:-redis://127.0.0.1:6379/13}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/evalapp-bench-deploy.XXXXXX")
. scripts/bench/lib.sh
bench_settings
export DATABASE_URL="$PG/$DB" CELERY_BROKER_URL="$REDIS" EVALAPP_CACHE_URL="$REDIS"
export EVALAPP_CELERY_QUEUE="bench-$DB"

celery=""
cleanup() {
  if [ -n "$celery" ]; then kill -TERM "$celery" 2>/dev/null || true; fi
  server_stop
  if [ -n "$celery" ]; then wait "$celery" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" != 1 ]; then
    pg_drop "$PG" "$DB" || true
    rm -rf "$LOGS"
  else
    echo "kept database $DB and logs in $LOGS" >&2
  fi
}
trap cleanup EXIT

pg_create "$PG" "$DB"
"$PYTHON" -c "import sys, redis; redis.Redis.from_url(sys.argv[1]).flushdb()" "$REDIS"
"$PYTHON" manage.py migrate --noinput -v 0
bench_study
"$PYTHON" manage.py import_study "$BUNDLE" --slug "$SLUG" --metric "$METRIC" -v 0

nice -n "${CELERY_NICE:-10}" "$PYTHON" -m celery -A evalapp worker -B --concurrency "${CELERY_CONCURRENCY:-1}" -Q "$EVALAPP_CELERY_QUEUE" \
  --loglevel WARNING --schedule "$LOGS/celerybeat-schedule" >"$LOGS/celery.log" 2>&1 &
celery=$!
server_start "$PORT" "$LOGS/gunicorn.log"

status=0
"$PYTHON" scripts/bench/load_annotators.py "http://127.0.0.1:$PORT" "$SLUG" --scenario deployment "$@" || status=$?
logs_errors "$LOGS/gunicorn.log" "$LOGS/celery.log"
exit $status
