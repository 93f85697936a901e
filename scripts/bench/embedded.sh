#!/usr/bin/env bash
# The embedded-default load measurement in one command (docs/benchmarks.md): a fresh SQLite
# database, the demo's server (gunicorn --preload, 3 processes x 4 threads, round closes in a
# background thread, no broker, no Redis), the SummEval relevance study, then
# scripts/bench/load_annotators.py --scenario embedded; the server is stopped and the database
# removed at the end. Prints the harness's JSON (last line).
#
#   scripts/bench/embedded.sh [PORT] [load_annotators.py options...]
#   scripts/bench/embedded.sh 8150
#   scripts/bench/embedded.sh 8150 --scenario burst --max-seconds 30
#
# Environment: PYTHON (default .venv/bin/python, else python3), WEB_WORKERS x WEB_THREADS (default
# 3 x 4), KEEP=1 keeps the database and logs;
# BUNDLE, SLUG and METRIC choose another study (a chat study:
# BUNDLE=data/bundles/pandalm_chat.jsonl.gz SLUG=pandalm-chat METRIC=gpt35 scripts/bench/embedded.sh);
# LONG_WORDS="800 2000" serves long LLM answers (lib.sh bench_study).
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${1:-8150}
shift $(( $# > 0 ? 1 : 0 ))
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/evalapp-bench-embedded.XXXXXX")
. scripts/bench/lib.sh
bench_settings
unset DATABASE_URL CELERY_BROKER_URL EVALAPP_CACHE_URL

cleanup() {
  server_stop
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$LOGS"; else echo "kept database and logs in $LOGS" >&2; fi
}
trap cleanup EXIT

"$PYTHON" manage.py migrate --noinput -v 0
bench_study
"$PYTHON" manage.py import_study "$BUNDLE" --slug "$SLUG" --metric "$METRIC" -v 0
server_start "$PORT" "$LOGS/gunicorn.log"

status=0
"$PYTHON" scripts/bench/load_annotators.py "http://127.0.0.1:$PORT" "$SLUG" --scenario embedded "$@" || status=$?
logs_errors "$LOGS/gunicorn.log"
exit $status
