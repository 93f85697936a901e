"""What a decision of a study guarantees, in words: the one place every screen, export and the
API take them from (Study.guarantee, Study.policy_warning).

Plain functions of the study's protocol choices, so a page, a CSV and a JSON reader all see
the same sentence. The numbers are measured, not promised: docs/results.md, "Error control:
false ± decisions on null pairs".
"""
from __future__ import annotations

from protocol.designs import PairDesign
from protocol.designs.all_pairs import ALL_PAIRS
from protocol.state import BAYES, EPROCESS, PAPER

ANYTIME = "false ± ≤ γ under any number of looks"
PLANNED_LOOKS = "false ± ≤ γ over the planned looks"
PER_LOOK = "false ± ≤ γ per look only"

# The paper's policy decides at level γ after every round, so over a study's looks it decides
# a pair without a difference far more often than γ (docs/results.md, "Error control by
# default": 0.211 ± 0.017 of the null pairs on SummEval relevance, every null study some).
PAPER_POLICY_WARNING = ("paper policy: decides about one truly null pair in five at γ = 0.05 "
                        "(measured 0.21 on SummEval relevance, docs/results.md)")

FAMILY_TEXT = {
    "ebh": "across the study's pairs: false discovery rate ≤ γ (e-BH)",
    "bonferroni": "across the study's pairs: any false ± ≤ γ (family-wise)",
    "none": "each pair on its own (no control across pairs)",
}


def decision_guarantee(*, rule: str, strict: bool) -> str:
    """The guarantee one pair's ± decision carries under the study's rule.

    ``rule`` "eprocess": anytime-valid (Ville's inequality), whatever the looks; "bayes" with
    ``strict``: γ split over the pair's largest number of looks; "bayes" alone: each look is a
    test at γ, nothing holds over the looks.
    """
    if rule == EPROCESS:
        return ANYTIME
    return PLANNED_LOOKS if strict else PER_LOOK


def family_guarantee(*, rule: str, family: str, design: PairDesign = ALL_PAIRS, planned: int = 0) -> str:
    """What holds across the study's pairs (the protocol's ProtocolSettings.family, or the pair
    design's own statement over its ``planned`` pair runs, protocol.designs); "" under the
    Bayesian rule, which claims nothing across pairs."""
    if rule != EPROCESS:
        return ""
    return design.guarantee(planned) or FAMILY_TEXT.get(family, "")


def policy_warning(*, policy: str, rule: str, strict: bool) -> str:
    """The measured false-decision rate of the paper's procedure, shown wherever it is in use
    (its Algorithm 2 with the Bayesian rule at level γ per look); "" otherwise."""
    return PAPER_POLICY_WARNING if policy == PAPER and rule == BAYES and not strict else ""
