"""What a decision of a study guarantees, in words: the one place every screen, export and the
API take them from (Study.guarantee, Study.policy_warning).

Plain functions of the study's protocol choices, so a page, a CSV and a JSON reader all see
the same sentence. The numbers are measured, not promised: docs/results.md, "Error control:
false ± decisions on null pairs".
"""
from __future__ import annotations

from dataclasses import fields

from protocol import adaptive

EPROCESS = "eprocess"
BAYES = "bayes"
PAPER = "paper"

ANYTIME = "false ± ≤ γ under any number of looks"
PLANNED_LOOKS = "false ± ≤ γ over the planned looks"
PER_LOOK = "false ± ≤ γ per look only"

# The paper's policy decides at level γ after every round, so over a study's looks it decides
# a pair without a difference far more often than γ (docs/results.md: 0.215 ± 0.023, 5 seeds).
PAPER_POLICY_WARNING = ("paper policy: decides about one truly null pair in five at γ = 0.05 "
                        "(measured 0.215 on SummEval relevance, docs/results.md)")

# Family control across pairs is the protocol's (ProtocolSettings.family, issue 19); until the
# protocol has that field the study's choice is stored and shown but not applied, and no
# screen claims what it would give. services/protocol_state.protocol_settings maps it.
FAMILY_APPLIED = "family" in {f.name for f in fields(adaptive.ProtocolSettings)}

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


def family_guarantee(*, rule: str, family: str) -> str:
    """What holds across the study's pairs; "" when nothing is claimed (the Bayesian rule, or a
    protocol that does not apply family control yet: FAMILY_APPLIED)."""
    if rule != EPROCESS or not FAMILY_APPLIED:
        return ""
    return FAMILY_TEXT.get(family, "")


def policy_warning(*, policy: str, rule: str, strict: bool) -> str:
    """The measured false-decision rate of the paper's procedure, shown wherever it is in use
    (its Algorithm 2 with the Bayesian rule at level γ per look); "" otherwise."""
    return PAPER_POLICY_WARNING if policy == PAPER and rule == BAYES and not strict else ""
