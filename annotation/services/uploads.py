"""A validated bundle kept between its upload and the researcher's metric choice.

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
                os.unlink(path)
        except FileNotFoundError:  # another process removed it first
            pass
