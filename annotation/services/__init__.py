"""Writes, one module per responsibility:

studies          import, export, separability, settings, API tokens, demo accounts
members          who belongs to a study, in which role; inviting new users
uploads          a validated bundle kept between its upload and the researcher's metric choice
crowd            a crowd worker's identity, bound to the platform session of its first entry
hits             serving: leases and submits (lock-light)
rounds           the protocol's rounds: start, close off the hot path, sweep
protocol_state   the one codec between PairState rows and protocol.adaptive state
transactions     retrying a unit of database work after a transient failure
"""
from .studies import *  # noqa: F401,F403
from .studies import __all__ as _studies_all
from .members import *  # noqa: F401,F403
from .members import __all__ as _members_all

__all__ = [*_studies_all, *_members_all]
from .crowd import CrowdEntryRefused, crowd_session_enter  # noqa: F401,E402
