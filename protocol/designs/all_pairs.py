"""The all-pairs design: every pair of systems decided (the paper's), each at γ under the
study's family control. Every behaviour is PairDesign's default."""
from __future__ import annotations

from .base import PairDesign
from .registry import register


class AllPairs(PairDesign):
    name = "all_pairs"
    label = "All pairs (every pair decided)"
    title = "all-pairs"


ALL_PAIRS = register(AllPairs())
