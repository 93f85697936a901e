"""Writes, one module per responsibility:

studies          import, export, separability, settings, members, API tokens, demo accounts
crowd            a crowd worker's identity, bound to the platform session of its first entry
hits             serving: leases and submits (lock-light)
rounds           the protocol's rounds: start, close off the hot path, sweep
protocol_state   the one codec between PairState rows and protocol.adaptive state
transactions     retrying a unit of database work after a transient failure
"""
from .studies import *  # noqa: F401,F403
from .studies import __all__  # noqa: F401
from .crowd import CrowdEntryRefused, CrowdSessionTaken, crowd_session_enter  # noqa: F401,E402
