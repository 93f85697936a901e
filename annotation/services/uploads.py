"""A validated bundle kept between its upload and the researcher's metric choice (and the
files a researcher has, tables and tools' outputs, kept between their upload and the column step).

The upload page works in two posts, without JavaScript: the first validates the bundle and
stages its bytes on disk under a random token, named with the uploader's user id, so that
only the uploader can import it; the second names the metric (or "human-only") and imports
the staged file. Staged files are removed when imported and, when older than
``STAGED_MAX_AGE_SECONDS``, at the next staging. The directory is
``settings.EVALAPP_STAGED_UPLOAD_DIR`` (default: the system's temporary directory): with
several web hosts, point it at a shared one.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from protocol.bundle import Bundle

STAGED_MAX_AGE_SECONDS = 24 * 3600
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{32,64}$")


def staged_dir() -> Path:
    path = Path(settings.EVALAPP_STAGED_UPLOAD_DIR)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _paths(user_id: int, token: str) -> tuple[Path, Path]:
    base = staged_dir() / f"{user_id}-{token}"
    return base.with_suffix(".bundle"), base.with_suffix(".json")


def bundle_summary(bundle: Bundle) -> dict:
    """What the researcher sees before choosing: counts and every metric with its kind."""
    systems_of_item: dict[str, set[str]] = {}
    for row in bundle.outputs:
        systems_of_item.setdefault(row.item, set()).add(row.system)
    comparisons = sum(len(list(itertools.combinations(s, 2))) for s in systems_of_item.values())
    rows_of_metric: dict[str, int] = {}
    for row in itertools.chain(bundle.metric_scores, bundle.metric_preferences):
        rows_of_metric[row.metric] = rows_of_metric.get(row.metric, 0) + 1
    return {
        "name": bundle.study["name"],
        "criterion": bundle.study.get("criterion", ""),
        "systems": len(bundle.systems),
        "items": len(bundle.items),
        "comparisons": comparisons,
        "human_judgements": len(bundle.human_preferences),
        "metrics": [{"name": m, "kind": bundle.metric_kind(m), "rows": rows_of_metric[m]} for m in bundle.metrics],
        "bundle_metric": bundle.study.get("metric"),
    }


def staged_upload_create(*, source: BinaryIO, summary: dict, user) -> str:
    """Keep the file ``source`` (a bundle already validated, described by ``summary``) for
    ``user``, copied as a stream from its start; returns the token that names it. Also removes
    staged files older than STAGED_MAX_AGE_SECONDS."""
    _remove_stale()
    token = secrets.token_urlsafe(32)
    bundle_path, summary_path = _paths(user.pk, token)
    source.seek(0)
    with bundle_path.open("wb") as staged:
        shutil.copyfileobj(source, staged)
    summary_path.write_text(json.dumps(summary))
    return token


def staged_upload_get(*, token: str, user) -> tuple[Path, dict] | None:
    """The staged bundle's path and summary, or None when the token is malformed, unknown,
    another user's, or imported already. A read."""
    if not TOKEN_PATTERN.match(token or ""):
        return None
    bundle_path, summary_path = _paths(user.pk, token)
    if not bundle_path.is_file() or not summary_path.is_file():
        return None
    return bundle_path, json.loads(summary_path.read_text())


def staged_upload_discard(*, token: str, user) -> None:
    """Remove a staged upload (after its import); a missing one is no error."""
    if TOKEN_PATTERN.match(token or ""):
        for path in _paths(user.pk, token):
            path.unlink(missing_ok=True)


def _remove_stale() -> None:
    cutoff = time.time() - STAGED_MAX_AGE_SECONDS
    for path in staged_dir().iterdir():
        try:
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path) if path.is_dir() else os.unlink(path)
        except FileNotFoundError:  # another process removed it first
            pass


# Files that are no bundle (tables, tools' outputs: protocol/tables.py) wait for the column step
# in a folder of their own, under the same kind of token, named the same way.
def _files_dir(user_id: int, token: str) -> Path:
    return staged_dir() / f"{user_id}-{token}.files"


def staged_files_create(*, files: list[tuple[str, BinaryIO]], user) -> str:
    """Keep ``files`` (name, binary file) for ``user`` until the column step; returns the token.
    Names are reduced to their last component (a browser may send a path)."""
    _remove_stale()
    token = secrets.token_urlsafe(32)
    folder = _files_dir(user.pk, token)
    folder.mkdir(mode=0o700)
    for position, (name, source) in enumerate(files):
        safe = Path(name).name.replace("\x00", "") or f"file-{position}"
        source.seek(0)
        with (folder / f"{position:02d}-{safe}").open("wb") as staged:
            shutil.copyfileobj(source, staged)
    return token


def staged_files_get(*, token: str, user) -> list[tuple[str, Path]] | None:
    """The staged files as (name as uploaded, path), in upload order; None when the token is
    malformed, unknown, another user's or used already. A read."""
    if not TOKEN_PATTERN.match(token or ""):
        return None
    folder = _files_dir(user.pk, token)
    if not folder.is_dir():
        return None
    return [(path.name[3:], path) for path in sorted(folder.iterdir())]


def staged_files_discard(*, token: str, user) -> None:
    if TOKEN_PATTERN.match(token or ""):
        shutil.rmtree(_files_dir(user.pk, token), ignore_errors=True)
