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
"""
from .studies import *  # noqa: F401,F403
from .studies import __all__ as _studies_all
from .members import *  # noqa: F401,F403
from .members import __all__ as _members_all
from .crowd import crowd_session_enter  # noqa: F401
from ..errors import CrowdEntryRefused  # noqa: F401

__all__ = [*_studies_all, *_members_all, "crowd_session_enter", "CrowdEntryRefused"]
