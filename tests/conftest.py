"""Fixtures every test folder shares; the builders they use live in tests/builders/ (one module per capability)."""
import os
from pathlib import Path

import pytest

# numpyro's MCMC.run compiles its sampling loop anew at every run (fori_collect jits a fresh
# closure), 5-10 s each: the NUTS reference tests paid it once per pair. JAX's persistent
# compilation cache finds the same program on disk instead (1 s a run after the first); it is
# keyed by the program and the jax version, so a stale entry is never used. Read by jax when
# it is first imported.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(
    Path(os.environ.get("EVALAPP_VAR_DIR") or Path(__file__).resolve().parents[1] / "var" / "test") / "jax-cache"))

from tests.builders.throttling import clear_throttle_counts


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


@pytest.fixture(autouse=True)
def fresh_throttles(settings):
    """Each test starts with no request counted against any rate limit."""
    clear_throttle_counts()
    yield
    clear_throttle_counts()
