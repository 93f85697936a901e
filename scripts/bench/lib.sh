# Shared by the load benchmarks of this folder (embedded.sh, deployment.sh, scale.sh): sourced,
# never run, from the repository's root (each script cds there first). Each script sets LOGS (a
# temporary folder of its own) before calling these.

# The interpreter: PYTHON, else the repository's .venv, else python3.
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
server=""

# The server's settings for a benchmark: DEBUG off, warnings only, its files under $LOGS/var, and
# the per-IP and per-annotator limits raised (one load generator on one IP stands for every worker).
bench_settings() {
  export DJANGO_SETTINGS_MODULE=evalapp.settings.dev DJANGO_DEBUG=0 DJANGO_LOG_LEVEL=WARNING
  export EVALAPP_VAR_DIR="$LOGS/var"
  export EVALAPP_THROTTLE_SUBMIT=${EVALAPP_THROTTLE_SUBMIT:-100000/minute}
  export EVALAPP_THROTTLE_PAGE=${EVALAPP_THROTTLE_PAGE:-100000/minute}
  export EVALAPP_THROTTLE_CROWD_START=${EVALAPP_THROTTLE_CROWD_START:-100000/minute}
  export EVALAPP_THROTTLE_CROWD_NEW=${EVALAPP_THROTTLE_CROWD_NEW:-100000/minute}
}

# bench_study: the study a load benchmark serves, in BUNDLE, SLUG and METRIC (defaults: SummEval
# relevance). LONG_WORDS="MIN MAX" serves long LLM answers instead (issue 36): a chat study of
# LONG_SYSTEMS (6) x LONG_PROMPTS (300) markdown answers of MIN-MAX words made by
# scripts/bench/long_chat.py into $LOGS.
bench_study() {
  if [ -n "${LONG_WORDS:-}" ]; then
    BUNDLE="$LOGS/long_chat.jsonl.gz"
    SLUG=${SLUG:-long-chat}
    METRIC=${METRIC:-judge_score}
    # shellcheck disable=SC2086  # MIN MAX: two words
    "$PYTHON" scripts/bench/long_chat.py --systems "${LONG_SYSTEMS:-6}" --prompts "${LONG_PROMPTS:-300}" \
      --words $LONG_WORDS --out "$BUNDLE" >&2
  fi
  BUNDLE=${BUNDLE:-data/bundles/summeval_relevance.jsonl.gz}
  SLUG=${SLUG:-summeval-relevance}
  METRIC=${METRIC:-bert_score_f}
}

# pg_create SERVER_URL NAME: the database NAME afresh (dropped first) on a PostgreSQL server (a
# URL without a database); NAME is letters, digits and _ only.
pg_create() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, psycopg
pg, db = sys.argv[1:]
if not db.replace("_", "").isalnum():
    raise SystemExit(f"database name {db!r}: letters, digits and _ only")
with psycopg.connect(pg + "/postgres", autocommit=True) as c:
    c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    c.execute(f'CREATE DATABASE "{db}"')
PY
}

# pg_drop SERVER_URL NAME: drop the database NAME if it exists.
pg_drop() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, psycopg
with psycopg.connect(sys.argv[1] + "/postgres", autocommit=True) as c:
    c.execute(f'DROP DATABASE IF EXISTS "{sys.argv[2]}" WITH (FORCE)')
PY
}

# server_start PORT LOG: the web server in the background on 127.0.0.1:PORT (gunicorn --preload,
# WEB_WORKERS processes x WEB_THREADS gthread threads, default 3 x 4), its log in LOG, its pid in
# $server; returns once the port answers (or after 30 s).
server_start() {
  "$PYTHON" -m gunicorn evalapp.wsgi -c python:evalapp.gunicorn_conf --preload --bind "127.0.0.1:$1" --workers "${WEB_WORKERS:-3}" \
    --worker-class gthread --threads "${WEB_THREADS:-4}" --keep-alive 5 --log-level warning >"$2" 2>&1 &
  server=$!
  for _ in $(seq 150); do
    "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && break
    sleep 0.2
  done
}

# server_stop: stop the server that server_start started, if any.
server_stop() {
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
}

# logs_errors LOG...: the tracebacks and errors these logs hold, on stderr (nothing if none).
logs_errors() {
  if grep -q -E "Traceback|ERROR" "$@"; then
    echo "logged errors:" >&2
    grep -h -E -A3 "Traceback|ERROR" "$@" | tail -20 >&2
  fi
}
