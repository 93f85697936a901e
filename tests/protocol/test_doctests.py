"""The runnable examples in protocol/'s docstrings (issue 40; as scipy's stats/_binomtest.py):
every module's ``>>>`` examples run and give what they show, so an example cannot drift from
the function it documents. A few seconds in all: examples are small and deterministic."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import protocol

MODULES = sorted(info.name for info in pkgutil.iter_modules(protocol.__path__, "protocol."))
# The modules whose main public functions carry examples; a module listed here that loses them
# fails, so the examples are not dropped quietly.
WITH_EXAMPLES = {
    "protocol.bundle", "protocol.computed_metrics", "protocol.decision", "protocol.favi",
    "protocol.agreement", "protocol.judges", "protocol.leaderboard", "protocol.machine",
    "protocol.preferences", "protocol.rules",
    "protocol.ranking", "protocol.savings", "protocol.spa", "protocol.study_settings",
    "protocol.tables",
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             report=True, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (output above)"
    if name in WITH_EXAMPLES:
        assert result.attempted > 0, f"{name} lost its docstring examples"


def test_every_module_with_examples_exists():
    assert WITH_EXAMPLES <= set(MODULES)
