"""Uploads that would exhaust a worker are refused while they stream in (issue 21, finding 5).

The bombs of the audit are rebuilt here (a gzip of many members: each member compresses one
repeated chunk once, so the file is small and quick to write) and imported in a fresh process,
as a web worker would read the upload (a file object); the process's peak RSS is measured
(``resource.getrusage``). The child's address space is capped at 1.5 GiB so that code which
does hold a bomb in memory fails the test without taking the machine with it.
"""
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from annotation.access import RESEARCHER_GROUP
from annotation.models import Study

ROOT = Path(__file__).resolve().parents[2]
PEAK_LIMIT_MB = 512
STUDY_LINE = b'{"kind": "study", "name": "Bomb"}\n'

IMPORT_IN_A_FRESH_PROCESS = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))
import django
django.setup()
from annotation import services
from protocol.bundle import BundleError
with open(sys.argv[1], "rb") as upload:
    try:
        services.studies.study_import(source=upload)
        outcome = "imported"
    except BundleError as exc:
        outcome = str(exc.problems[0])
# VmHWM, not getrusage's ru_maxrss: Linux keeps the larger of the parent's and the child's peak
# in ru_maxrss across fork and exec, so a child of a large test process reported its parent's.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"outcome": outcome, "peak_mb": peak_kb / 1024}))
"""


def write_members(path: Path, *parts: tuple[bytes, int]) -> int:
    """A gzip file of ``chunk`` repeated ``times`` for each (chunk, times), as gzip members."""
    with path.open("wb") as handle:
        for chunk, times in parts:
            member = gzip.compress(chunk, compresslevel=9)
            for _ in range(times):
                handle.write(member)
    return path.stat().st_size


def import_in_a_fresh_process(path: Path, tmp_path: Path) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.test", "EVALAPP_VAR_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    for variable in ("EVALAPP_MAX_BUNDLE_BYTES", "EVALAPP_MAX_BUNDLE_LINES", "EVALAPP_MAX_BUNDLE_LINE_BYTES",
                     "EVALAPP_MAX_BUNDLE_ROWS", "DATABASE_URL"):
        env.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", IMPORT_IN_A_FRESH_PROCESS, str(path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_gzip_of_131_million_empty_objects_is_refused_at_the_line_limit(tmp_path):
    """0.38 MB of gzip, 131 M lines of ``{}``: one worker reached 9.2 GB before the fix."""
    path = tmp_path / "objects.jsonl.gz"
    size = write_members(path, (STUDY_LINE, 1), (b"{}\n" * (1 << 22), 32))
    assert size < 500_000
    result = import_in_a_fresh_process(path, tmp_path)
    assert result["outcome"] == "line 1000001: file too large: more than 1000000 rows"
    print(result)
    assert result["peak_mb"] < PEAK_LIMIT_MB, result


def test_a_one_gib_gzip_bomb_is_refused_within_the_memory_limit(tmp_path):
    """1 GiB of blank lines in 1 MB of gzip (the audit's bomb made a 490 MB spike)."""
    path = tmp_path / "bomb.jsonl.gz"
    write_members(path, (STUDY_LINE, 1), ((b" " * 1023 + b"\n") * (1 << 14), 64))
    result = import_in_a_fresh_process(path, tmp_path)
    assert result["outcome"].startswith("line "), result
    assert result["outcome"].endswith("file too large: more than 268435456 bytes (decompressed)"), result
    print(result)
    assert result["peak_mb"] < PEAK_LIMIT_MB, result


def test_a_400_mb_line_is_refused_before_it_is_read_whole(tmp_path):
    path = tmp_path / "line.jsonl.gz"
    write_members(path, (STUDY_LINE + b'{"kind": "item", "id": "i1", "input": "', 1), (b"a" * (1 << 24), 25),
                  (b'"}\n', 1))
    result = import_in_a_fresh_process(path, tmp_path)
    assert result["outcome"] == "line 2: file too large: line longer than 8388608 bytes"
    print(result)
    assert result["peak_mb"] < PEAK_LIMIT_MB, result


DEEP = STUDY_LINE + b'{"kind": "item", "id": "i1", "input": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
DEEP_PROBLEM = "line 2: JSON nested deeper than 8 levels (bundle rows are flat objects)"


@pytest.mark.django_db
def test_deep_nesting_is_refused_with_its_line_on_the_api_and_the_upload_page(client):
    """200,000 levels of nesting gave a 500 (RecursionError) on both; now the API's invalid
    bundle answer (422, docs/api.md) and the upload page's 400, naming the line."""
    user = User.objects.create_user("r", password="pw-12345678")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    api = APIClient()
    api.force_authenticate(user)
    response = api.post("/api/studies/", {"bundle": named(DEEP)}, format="multipart")
    assert response.status_code == 422 and response.json()["problems"] == [{"line": 2, "message": DEEP_PROBLEM[8:]}]
    client.force_login(user)
    response = client.post("/studies/upload/", {"bundle": named(DEEP)})
    assert response.status_code == 400 and DEEP_PROBLEM in response.content.decode()
    assert Study.objects.count() == 0


def named(data: bytes) -> io.BytesIO:
    upload = io.BytesIO(gzip.compress(data))
    upload.name = "deep.jsonl.gz"
    return upload


def test_one_row_over_the_row_limit_is_refused_before_any_row_is_parsed(tmp_path):
    """A bundle of valid rows, one more than BundleLimits' 1,000,000 (issue 36, finding 5): the
    rows were parsed and held until the last one broke the limit (+329 MB of peak RSS and
    12-17 s, docs/bundle-format.md); now a first pass only counts, so the process stays near its
    baseline (84 MB with Django loaded)."""
    path = tmp_path / "rows.jsonl.gz"
    systems = [f"s{n}" for n in range(10)]
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write(STUDY_LINE.decode())
        out.writelines(f'{{"kind": "item", "id": "i{n}", "input": "Input {n}"}}\n' for n in range(1000))
        out.writelines(f'{{"kind": "output", "item": "i{n}", "system": "{s}", "text": "{s} {n}"}}\n'
                       for n in range(1000) for s in systems)
        rows = 1 + 1000 + 10_000
        metric = 0
        while rows <= 1_000_000:
            count = min(10_000, 1_000_001 - rows)
            out.writelines(f'{{"kind": "metric_score", "item": "i{k // 10}", "system": "s{k % 10}", '
                           f'"metric": "m{metric}", "score": 0.5}}\n' for k in range(count))
            rows += count
            metric += 1
    result = import_in_a_fresh_process(path, tmp_path)
    assert result["outcome"] == "line 1000001: file too large: more than 1000000 rows"
    print(result)
    assert result["peak_mb"] < 256, result
