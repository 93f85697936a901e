#!/usr/bin/env bash
# The deployment-mode load measurement in one command (README "Scale"): a fresh PostgreSQL
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
# KEEP=1 keeps the database and the logs.
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${1:-8131}
DB=${2:-perf_deploy}
shift $(( $# > 2 ? 2 : $# ))
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS=${REDIS:-redis://127.0.0.1:6379/13}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/evalapp-bench-deploy.XXXXXX")

export DJANGO_SETTINGS_MODULE=evalapp.settings.dev DJANGO_DEBUG=0 DJANGO_LOG_LEVEL=WARNING
export DATABASE_URL="$PG/$DB" CELERY_BROKER_URL="$REDIS" EVALAPP_CACHE_URL="$REDIS"
export EVALAPP_CELERY_QUEUE="bench-$DB" EVALAPP_VAR_DIR="$LOGS/var"
# One load generator on one IP stands for 100 workers: raise the per-IP and per-session limits.
export EVALAPP_THROTTLE_SUBMIT=${EVALAPP_THROTTLE_SUBMIT:-100000/minute}
export EVALAPP_THROTTLE_CROWD_START=${EVALAPP_THROTTLE_CROWD_START:-100000/minute}
export EVALAPP_THROTTLE_CROWD_NEW=${EVALAPP_THROTTLE_CROWD_NEW:-100000/minute}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP:-0}" != 1 ]; then
    "$PYTHON" - "$PG" "$DB" <<'PY' || true
import sys, psycopg
with psycopg.connect(sys.argv[1] + "/postgres", autocommit=True) as c:
    c.execute(f'DROP DATABASE IF EXISTS "{sys.argv[2]}" WITH (FORCE)')
PY
    rm -rf "$LOGS"
  else
    echo "kept database $DB and logs in $LOGS" >&2
  fi
}
trap cleanup EXIT

"$PYTHON" - "$PG" "$DB" "$REDIS" <<'PY'
import sys, psycopg, redis
pg, db, url = sys.argv[1:]
if not db.replace("_", "").isalnum():
    raise SystemExit(f"database name {db!r}: letters, digits and _ only")
with psycopg.connect(pg + "/postgres", autocommit=True) as c:
    c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    c.execute(f'CREATE DATABASE "{db}"')
redis.Redis.from_url(url).flushdb()
PY
"$PYTHON" manage.py migrate --noinput -v 0
"$PYTHON" manage.py import_study data/bundles/summeval_relevance.jsonl.gz --slug summeval-relevance \
  --metric bert_score_f -v 0

nice -n "${CELERY_NICE:-10}" "$PYTHON" -m celery -A evalapp worker -B --concurrency "${CELERY_CONCURRENCY:-1}" -Q "$EVALAPP_CELERY_QUEUE" \
  --loglevel WARNING --schedule "$LOGS/celerybeat-schedule" >"$LOGS/celery.log" 2>&1 &
pids+=($!)
"$PYTHON" -m gunicorn evalapp.wsgi --preload --bind "127.0.0.1:$PORT" --workers "${WEB_WORKERS:-3}" \
  --worker-class gthread --threads "${WEB_THREADS:-4}" --keep-alive 5 --log-level warning \
  >"$LOGS/gunicorn.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
  sleep 0.2
done

status=0
"$PYTHON" scripts/bench/load_annotators.py "http://127.0.0.1:$PORT" summeval-relevance --scenario deployment "$@" || status=$?
if grep -q -E "Traceback|ERROR" "$LOGS/gunicorn.log" "$LOGS/celery.log"; then
  echo "server or worker logged errors:" >&2
  grep -h -E -A3 "Traceback|ERROR" "$LOGS/gunicorn.log" "$LOGS/celery.log" | tail -20 >&2
fi
exit $status
