"""What refusing a bundle one row over the row limit costs (docs/bundle-format.md, "Limits").

    python scripts/bench/bundle_row_limit.py [--rows N] [--runs 3] [--plain]

Writes a gzipped bundle of ``N`` rows (default BundleLimits().max_rows + 1): a study line, 1,000
items, 10 systems' outputs and metric_score rows of 100 metrics until the count is reached,
every row valid, so the only problem is the count. Then, ``runs`` times, in a fresh process (as
a web worker reads an upload: a file object), ``services.studies.study_import`` on it, and prints one
JSON object: the refusal, and per run the seconds until it and the process's peak RSS above its
RSS before the import (VmHWM - VmRSS, MB).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

IMPORT_IN_A_FRESH_PROCESS = """
import json, sys, time
import django
django.setup()
from annotation import services
from protocol.bundle import BundleError

def status(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field + ":"))

before = status("VmRSS")
started = time.perf_counter()
with open(sys.argv[1], "rb") as upload:
    try:
        services.studies.study_import(source=upload)
        outcome = "imported"
    except BundleError as exc:
        outcome = str(exc.problems[0])
seconds = time.perf_counter() - started
print(json.dumps({"outcome": outcome, "seconds": round(seconds, 2),
                  "peak_above_start_mb": round((status("VmHWM") - before) / 1024, 1)}))
"""


def write_bundle(path: Path, rows: int, plain: bool) -> None:
    systems = [f"sys{n}" for n in range(10)]
    opener = open if plain else gzip.open
    with opener(path, "wt") as out:
        out.write(json.dumps({"kind": "study", "name": "Row limit"}) + "\n")
        written = 1
        for n in range(1000):
            out.write(json.dumps({"kind": "item", "id": f"i{n}", "input": f"Input {n}"}) + "\n")
            written += 1
        for n in range(1000):
            for system in systems:
                out.write(json.dumps({"kind": "output", "item": f"i{n}", "system": system,
                                      "text": f"{system} on {n}"}) + "\n")
                written += 1
        metric = 0
        while written < rows:
            for n in range(1000):
                for k, system in enumerate(systems):
                    if written >= rows:
                        break
                    out.write(json.dumps({"kind": "metric_score", "item": f"i{n}", "system": system,
                                          "metric": f"m{metric}", "score": (n * 7 + k) % 13 / 13}) + "\n")
                    written += 1
            metric += 1


def main() -> None:
    from protocol.bundle import BundleLimits

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=BundleLimits().max_rows + 1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="write JSON Lines, not gzip")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalapp-row-limit-") as tmp:
        path = Path(tmp) / ("bundle.jsonl" if args.plain else "bundle.jsonl.gz")
        write_bundle(path, args.rows, args.plain)
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.test", "EVALAPP_VAR_DIR": tmp,
               "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
        for variable in ("EVALAPP_MAX_BUNDLE_BYTES", "EVALAPP_MAX_BUNDLE_LINES", "EVALAPP_MAX_BUNDLE_LINE_BYTES",
                         "EVALAPP_MAX_BUNDLE_ROWS", "DATABASE_URL"):
            env.pop(variable, None)
        runs = []
        for _ in range(args.runs):
            done = subprocess.run([sys.executable, "-c", IMPORT_IN_A_FRESH_PROCESS, str(path)], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=900, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps({"rows": args.rows, "file_mb": round(path.stat().st_size / 2**20, 1),
                          "outcome": runs[0]["outcome"],
                          "runs": [{k: r[k] for k in ("seconds", "peak_above_start_mb")} for r in runs]}))


if __name__ == "__main__":
    main()
