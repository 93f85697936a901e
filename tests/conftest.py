import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUNDLES = REPO / "data" / "bundles"


def bundle_bytes(rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def bundle_slice(path, *, items: int, systems: int, **study_settings) -> bytes:
    """The study line of a shipped bundle with its first ``items`` items and the outputs of its
    first ``systems`` systems (by name), as bundle bytes; ``study_settings`` update the study line."""
    import gzip

    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    keep = {r["id"] for r in rows if r["kind"] == "item"}
    keep = set(sorted(keep, key=[r.get("id") for r in rows].index)[:items])
    names = sorted({r["system"] for r in rows if r["kind"] == "output"})[:systems]
    study = {**rows[0], **study_settings}
    return bundle_bytes([study] + [r for r in rows if r["kind"] == "item" and r["id"] in keep] + [
        r for r in rows if r["kind"] == "output" and r["item"] in keep and r["system"] in names
        and r.get("sample", 0) == 0])


@pytest.fixture
def toy_rows():
    """A valid 3-system, 2-item bundle with every kind of row."""
    rows = [{"kind": "study", "name": "Toy study", "criterion": "fluency", "instructions": "Pick the more fluent text.",
             "batch_size": 2, "metric": "rouge"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Source {n}", "reference": f"Ref {n}"} for n in (1, 2)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} on {n}", "sample": k}
             for n in (1, 2) for s in ("A", "B", "C") for k in (0, 1)]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "rouge", "score": v}
             for n in (1, 2) for s, v in zip("ABC", (0.5, 0.25 * n, 0.1))]
    rows += [{"kind": "metric_preference", "item": "i1", "first": "B", "second": "A", "metric": "judge",
              "preference": 1}]
    rows += [{"kind": "human_score", "item": "i1", "system": s, "score": v, "annotator": "e1"}
             for s, v in zip("ABC", (4, 3, 5))]
    rows += [{"kind": "human_preference", "item": "i2", "first": "C", "second": "A", "preference": -1,
              "annotator": "w1"},
             {"kind": "human_preference", "item": "i2", "first": "A", "second": "C", "preference": 0,
              "annotator": "w2"}]
    return rows


def _clear_cache_of_this_run() -> None:
    """Forget throttle counts: LocMem is cleared; on Redis only this run's prefixed keys go."""
    from django.conf import settings
    from django.core.cache import caches

    for alias in ("default", "throttle"):
        cache = caches[alias]
        if "locmem" in settings.CACHES[alias]["BACKEND"].lower():
            cache.clear()
            continue
        client = cache._cache.get_client(None, write=True)
        prefix = settings.CACHES[alias]["KEY_PREFIX"]
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)


@pytest.fixture(autouse=True)
def fresh_throttles(settings):
    """Each test starts with no request counted against any rate limit."""
    _clear_cache_of_this_run()
    yield
    _clear_cache_of_this_run()
