"""How many counted judgements each decided pair rests on (protocol/fragility.py, issue 39
part 3): read from the pairs' protocol state and their counted judgements."""
from __future__ import annotations

import math

from protocol import adaptive
from protocol.fragility import FRAGILE_SHARE, pair_fragility

from ..models import PairState, Study
from ..serving.protocol_state import protocol_settings
from .serving import protocol_pair_of

__all__ = ["FRAGILE_SHARE", "NO_CLAIM", "NO_FRAGILITY", "decision_bar", "order_claims", "pair_order_claims", "top_claims",
           "study_pair_fragility"]

# What an undecided pair carries: no decision, nothing to undo.
NO_FRAGILITY = {"fragility": None, "fragility_share": None, "fragile": False, "fragility_exact": None,
                "fragility_sign": None, "fragility_evidence": None}


def decision_bar(study: Study, pairs: int, decided: int) -> float | None:
    """The log wealth a pair's e-process had to reach for its decision: log(1 / level) per pair,
    log(m / level) under Bonferroni, log(m / (level k)) under e-BH with k the pairs decided
    (the other pairs' evidence held as it is); None for a rule that is not the betting e-process
    or an e-value not a product of its steps (mixture, final sign test)."""
    settings = protocol_settings(study)
    if settings.rule != adaptive.EPROCESS or settings.mixture is not None or settings.final_share:
        return None
    level = study.decision_level
    if settings.family == "bonferroni":
        return math.log(pairs / level)
    if settings.family == "ebh":
        return math.log(pairs / (level * max(decided, 1)))
    return math.log(1.0 / level)


def study_pair_fragility(*, study: Study, states: list[PairState] | None = None, pair: PairState | None = None,
                         labels: dict[tuple[str, str], list[tuple[str, int]]]) -> dict[tuple[str, str], dict]:
    """(first, second) -> the fragility of each decided pair as plain data (NO_FRAGILITY's
    keys): ``fragility`` the least number of counted judgements whose removal undoes the
    decision, its ``fragility_share`` of the pair's judgements, ``fragile`` (share ≤ 0.5 %),
    whether the count is exact, and its two parts (the margin's sign; the e-process's evidence,
    None when not computed). ``labels``: every counted judgement by pair, oldest first
    (selectors.studies.study_judgement_labels). ``states``: every pair row of the study, with
    its systems (read here when neither is given); ``pair``: only that row's fragility (its
    systems loaded), the other pairs only counted, in SQL, for the family's bar: a pair page
    of a study of 200 systems read 19,900 rows for it."""
    if pair is not None:
        rows = PairState.objects.filter(study=study)
        pairs = rows.count()
        decided_count = rows.exclude(decision=0).exclude(state={}).count()
        decided = [pair] if pair.decision and pair.state else []
    else:
        if states is None:
            states = list(PairState.objects.filter(study=study).select_related("first", "second"))
        decided = [s for s in states if s.decision and s.state]
        pairs, decided_count = len(states), len(decided)
    bar = decision_bar(study, pairs, decided_count)
    found = {}
    for row in decided:
        key = (row.first.name, row.second.name)
        item_values: dict[str, list[int]] = {}
        for item, value in labels.get(key, ()):
            item_values.setdefault(item, []).append(int(value))
        if not item_values:
            continue
        steps = protocol_pair_of(study, row).steps if bar is not None else None
        f = pair_fragility(item_values, int(row.decision), steps or None, bar if steps else None)
        found[key] = {"fragility": f.removals, "fragility_share": f.share, "fragile": f.fragile,
                      "fragility_exact": f.exact, "fragility_sign": f.sign_removals,
                      "fragility_evidence": f.evidence_removals}
    return found


# The fitted order's neighbour claims (the active design's section, protocol/designs/active.py):
# each neighbour of the order with its state and how many counted judgements, removed, would
# undo it (protocol.fragility.neighbour_fragility: an upper bound; only once the ranking is
# complete, None before and for a neighbour that claims nothing).
# ``bar``: the posterior bound the claim is made at (an ordered claim's P(reversed), a close
# one's P(reversed by more than the resolution), from the design's settings; None: no claim).
CLAIM_FIELDS = ("upper", "lower", "status", "bar", "misorder", "misorder_beyond", "removals", "fragile")
# What a pair that is no neighbour claim of the order carries in the decisions export.
NO_CLAIM = {"order_claim": "", "claim_bar": None, "claim_removals": None, "claim_fragile": False}


def order_claims(section: dict | None) -> list[dict]:
    """The neighbour claims of a design's dashboard section (``CLAIM_FIELDS`` each, in the
    order's order); [] for a design whose section states no neighbours."""
    return [{name: n.get(name) for name in CLAIM_FIELDS} for n in (section or {}).get("neighbours", ())]


def pair_order_claims(section: dict | None) -> dict[tuple[str, str], dict]:
    """(first, second), the pair in canonical order -> its neighbour claim as ``NO_CLAIM``'s
    keys: ``order_claim`` "UPPER above LOWER (status)", ``claim_bar``, ``claim_removals``,
    ``claim_fragile``."""
    return {tuple(sorted((n["upper"], n["lower"]))): {
        "order_claim": f"{n['upper']} above {n['lower']} ({n['status']})", "claim_bar": n["bar"],
        "claim_removals": n["removals"], "claim_fragile": bool(n["fragile"])} for n in order_claims(section)}


TOP_FIELDS = ("k", "top", "statistic", "weakest", "removals", "undone_by", "fragile")


def top_claims(section: dict | None) -> list[dict]:
    """The top-k claims of a design's dashboard section at its tiers' ends (``TOP_FIELDS``
    each, k ascending; protocol.fragility.tier_top_fragility); [] for a design without them or
    before the ranking is complete."""
    return [{name: t.get(name) for name in TOP_FIELDS} for t in (section or {}).get("top_claims", ())]
