"""Writes, one module per responsibility:

studies          import, separability, settings, API tokens, demo accounts
members          who belongs to a study, in which role; inviting new users
uploads          a validated bundle kept between its upload and the researcher's metric choice
crowd            a crowd worker's identity, bound to the platform session of its first entry
hits             serving: leases and submits (lock-light; statements in annotation/serving/store.py)
checks           attention and gold checks, repeats
quality          excluding and re-including workers; the rule that checks need check items
runtime          the protocol's runtime: start, round close, re-decision, sweep
planner          planner jobs
transactions     retrying a unit of database work after a transient failure

Services enqueue background work through annotation/jobs.py; their errors are annotation/errors.py.

A view reaches a write through its module, ``services.hits.judgement_submit(...)``, so the reader sees
where it lives (tests/test_import_layers.py holds the views to it); every module is imported here so
that ``services.<module>`` is bound. The names re-exported below serve management commands and tests.
"""
from . import (checks, common, crowd, hits, judges, members, planner, quality, runtime, studies,  # noqa: F401
               transactions, uploads)
from .studies import *  # noqa: F401,F403
from .studies import __all__ as _studies_all
from .members import *  # noqa: F401,F403
from .members import __all__ as _members_all
from .crowd import crowd_session_enter  # noqa: F401
from ..errors import CrowdEntryRefused  # noqa: F401

__all__ = [*_studies_all, *_members_all, "crowd_session_enter", "CrowdEntryRefused"]
