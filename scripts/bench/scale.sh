#!/usr/bin/env bash
# The scale benchmark of issue 22 in one command (docs/benchmarks.md): builds the synthetic arena
# bundle (protocol.arena: systems with known strengths, one noisy judge score per output, no
# human labels) deterministically, imports it with manage.py import_study into a fresh
# database, timing it and its peak RSS, starts the embedded server (gunicorn --preload 3 x 4
# gthread, round closes in a background thread), times the first and the cached dashboard,
# a pair page, the metrics page, the decisions CSV and a crowd worker's first HIT
# (scripts/bench/scale_probe.py; it waits for the dashboard's first computation, which import_study
# leaves to the report job), then runs scripts/bench/load_annotators.py with 20 workers
# (scenario embedded, loopback only). Stops what it started, removes or drops the database, and
# prints one JSON object (last line).
#
#   scripts/bench/scale.sh [PORT] [SYSTEMS] [PROMPTS] [DATABASE_NAME] [load_annotators.py options...]
#   scripts/bench/scale.sh 8160                      # 50 x 2,000 on SQLite
#   scripts/bench/scale.sh 8160 10 200               # a quick check
#   scripts/bench/scale.sh 8160 50 2000 perf_scale   # on PostgreSQL (database perf_scale, dropped)
#   scripts/bench/scale.sh 8160 30 1000 - --max-seconds 20
#
# DATABASE_NAME "-" (the default) is SQLite. Environment: PYTHON (default .venv/bin/python, else
# python3), PG (server URL without a database, default postgres://postgres@127.0.0.1:5432),
# SEED (the arena's, default 0), NICE (niceness of the import, default 0), KEEP=1 keeps the
# database, the bundle and the logs, STUDY_SETTINGS settings of the bundle's study line
# (space-separated KEY=VALUE, e.g. "pair_design=active family_control=none batch_size=25": the
# active ranking design under the crowd load).
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${1:-8160}
SYSTEMS=${2:-50}
PROMPTS=${3:-2000}
DB=${4:--}
shift $(( $# > 4 ? 4 : $# ))
PG=${PG:-postgres://postgres@127.0.0.1:5432}
SLUG=arena-scale
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/evalapp-bench-scale.XXXXXX")
. scripts/bench/lib.sh
bench_settings
unset DATABASE_URL CELERY_BROKER_URL EVALAPP_CACHE_URL
if [ "$DB" != - ]; then
  export DATABASE_URL="$PG/$DB"
fi
export EVALAPP_THROTTLE_LOGIN=${EVALAPP_THROTTLE_LOGIN:-100000/minute}

cleanup() {
  server_stop
  if [ "${KEEP:-0}" != 1 ]; then
    if [ "$DB" != - ]; then pg_drop "$PG" "$DB" || true; fi
    rm -rf "$LOGS"
  else
    echo "kept the database ($DB), bundle and logs in $LOGS" >&2
  fi
}
trap cleanup EXIT

if [ "$DB" != - ]; then
  pg_create "$PG" "$DB"
fi

settings=()
for setting in ${STUDY_SETTINGS:-}; do settings+=(--study-setting "$setting"); done
"$PYTHON" -m protocol.arena make --systems "$SYSTEMS" --prompts "$PROMPTS" --seed "${SEED:-0}" --no-human \
  "${settings[@]}" --out "$LOGS/arena.jsonl.gz" >"$LOGS/arena.json"
"$PYTHON" manage.py migrate --noinput -v 0
/usr/bin/time -f '%e %M' -o "$LOGS/import.time" nice -n "${NICE:-0}" \
  "$PYTHON" manage.py import_study "$LOGS/arena.jsonl.gz" --slug "$SLUG" -v 0 >"$LOGS/import.log"
DJANGO_SUPERUSER_PASSWORD=scale-bench-pw "$PYTHON" manage.py createsuperuser --noinput \
  --username scale-bench --email scale@example.invalid >/dev/null
db_bytes=0
if [ "$DB" = - ]; then
  db_bytes=$(du -cb "$EVALAPP_VAR_DIR"/*.sqlite3* | tail -1 | cut -f1)
else
  db_bytes=$("$PYTHON" - "$PG" "$DB" <<'PY'
import sys, psycopg
with psycopg.connect(sys.argv[1] + "/postgres") as c:
    print(c.execute("SELECT pg_database_size(%s)", (sys.argv[2],)).fetchone()[0])
PY
)
fi

server_start "$PORT" "$LOGS/gunicorn.log"

"$PYTHON" scripts/bench/scale_probe.py "http://127.0.0.1:$PORT" "$SLUG" scale-bench scale-bench-pw >"$LOGS/probe.json"
status=0
"$PYTHON" scripts/bench/load_annotators.py "http://127.0.0.1:$PORT" "$SLUG" --scenario embedded "$@" \
  >"$LOGS/load.json" || status=$?
logs_errors "$LOGS/gunicorn.log"
"$PYTHON" - "$LOGS" "$SYSTEMS" "$PROMPTS" "$DB" "$db_bytes" <<'PY'
import json, sys
from pathlib import Path
logs, systems, prompts, db, db_bytes = sys.argv[1:]
logs = Path(logs)
seconds, rss_kb = (logs / "import.time").read_text().split()[-2:]
load = json.loads((logs / "load.json").read_text().strip().splitlines()[-1])
print(json.dumps({
    "systems": int(systems), "prompts": int(prompts), "database": "sqlite" if db == "-" else "postgresql",
    "import_seconds": float(seconds), "import_peak_rss_mb": round(int(rss_kb) / 1024),
    "import_summary": (logs / "import.log").read_text().strip().splitlines()[-1],
    "database_mb": round(int(db_bytes) / 2**20),
    **json.loads((logs / "probe.json").read_text()),
    "load_workers": 20,
    **{f"load_{k}": load.get(k) for k in ("submits_per_second", "submit_then_next_hit_ms_p50",
                                          "submit_then_next_hit_ms_p95", "first_hit_ms_p50", "first_hit_ms_p95",
                                          "errors", "refused", "duplicates", "lost", "protocol_consistent",
                                          "no_work_waits", "no_work_seconds")},
}))
PY
exit $status
