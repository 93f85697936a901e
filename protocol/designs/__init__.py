"""Pair designs: which pairs of systems a study decides, one module per design, picked by name
from one registry (the ``pair_design`` study setting's choices are the registry's).

A design is a ``PairDesign``: its name (the setting's value) and label, and what it does at the
variation points of a study — how it starts (``start``), what it asks for after every close
(``advance``), how many pair runs it plans (``planned``, the level's divisor), which other
settings it needs (``problems``), what it guarantees across pairs (``guarantee``), its
dashboard section (``section``, with ``partial_order`` and ``implied`` for the pair matrix),
its line on the settings page (``summary``) and how the planner replays it (``plan_replay``).
The app asks the study's design (``Study.design``) instead of comparing design names.

The built-in designs (all_pairs, ranking, active) register themselves when this package is
imported; a new design is one module that subclasses ``PairDesign`` and calls ``register``
(docs/tutorials/add-a-pair-design.md).
"""
from __future__ import annotations

from .registry import DESIGNS, design_choices, design_of, register, unregister  # noqa: I001 (first: it imports nothing)
from .base import PairDesign
# Each registers its design; the order here is the order of the choices.
from . import all_pairs  # noqa: F401,I001
from . import ranking  # noqa: F401
from . import active  # noqa: F401

__all__ = ["DESIGNS", "PairDesign", "design_choices", "design_of", "register", "unregister"]
