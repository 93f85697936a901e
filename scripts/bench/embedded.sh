#!/usr/bin/env bash
# The embedded-default load measurement in one command (README "Scale"): a fresh SQLite
# database, the demo's server (gunicorn --preload, 3 processes x 4 threads, round closes in a
# background thread, no broker, no Redis), the SummEval relevance study, then
# scripts/bench/load_annotators.py --scenario embedded; the server is stopped and the database
# removed at the end. Prints the harness's JSON (last line).
#
#   scripts/bench/embedded.sh [PORT] [load_annotators.py options...]
#   scripts/bench/embedded.sh 8150
#   scripts/bench/embedded.sh 8150 --scenario burst --max-seconds 30
#
# Environment: PYTHON (default .venv/bin/python, else python3), KEEP=1 keeps the database and logs;
# BUNDLE, SLUG and METRIC choose another study (a chat study:
# BUNDLE=data/bundles/pandalm_chat.jsonl.gz SLUG=pandalm-chat METRIC=gpt35 scripts/bench/embedded.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${1:-8150}
shift $(( $# > 0 ? 1 : 0 ))
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/evalapp-bench-embedded.XXXXXX")

export DJANGO_SETTINGS_MODULE=evalapp.settings.dev DJANGO_DEBUG=0 DJANGO_LOG_LEVEL=WARNING
export EVALAPP_VAR_DIR="$LOGS/var"
unset DATABASE_URL CELERY_BROKER_URL EVALAPP_CACHE_URL
# One load generator on one IP stands for 20 workers: raise the per-IP and per-session limits.
export EVALAPP_THROTTLE_SUBMIT=${EVALAPP_THROTTLE_SUBMIT:-100000/minute}
export EVALAPP_THROTTLE_CROWD_START=${EVALAPP_THROTTLE_CROWD_START:-100000/minute}
export EVALAPP_THROTTLE_CROWD_NEW=${EVALAPP_THROTTLE_CROWD_NEW:-100000/minute}

server=""
cleanup() {
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$LOGS"; else echo "kept database and logs in $LOGS" >&2; fi
}
trap cleanup EXIT

"$PYTHON" manage.py migrate --noinput -v 0
BUNDLE=${BUNDLE:-data/bundles/summeval_relevance.jsonl.gz}
SLUG=${SLUG:-summeval-relevance}
METRIC=${METRIC:-bert_score_f}
"$PYTHON" manage.py import_study "$BUNDLE" --slug "$SLUG" --metric "$METRIC" -v 0
"$PYTHON" -m gunicorn evalapp.wsgi --preload --bind "127.0.0.1:$PORT" --workers 3 --worker-class gthread \
  --threads 4 --keep-alive 5 --log-level warning >"$LOGS/gunicorn.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
  sleep 0.2
done

status=0
"$PYTHON" scripts/bench/load_annotators.py "http://127.0.0.1:$PORT" "$SLUG" --scenario embedded "$@" || status=$?
if grep -q -E "Traceback|ERROR" "$LOGS/gunicorn.log"; then
  echo "the server logged errors:" >&2
  grep -h -E -A3 "Traceback|ERROR" "$LOGS/gunicorn.log" | tail -20 >&2
fi
exit $status
