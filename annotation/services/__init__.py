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

A view, a command or a test reaches a write through its module — ``services.hits.judgement_submit(...)``
or ``from annotation.services.studies import study_import`` — so the reader sees where it lives;
this package re-exports nothing (tests/test_import_layers.py holds every caller to it). Every
module is imported here so that ``services.<module>`` is bound.
"""
from . import (checks, common, crowd, hits, judges, members, planner, quality, runtime, studies,  # noqa: F401
               transactions, uploads)
