"""The active ranking design: labels where a Bradley–Terry fit of every judgement is least
sure of the order, until its neighbours are resolved (protocol.active_ranking, docs/ranking.md)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import active_ranking, fragility, rubric
from ..active_ranking import ActiveSettings
from ..rubric import RubricState
from ..state import PairState
from .base import OrderingDesign, Prepare
from .registry import register

GUARANTEE = ("across the study's pairs: any false ± decision, direct or implied, ≤ γ (each pair decided "
             "at γ / {planned}); the fitted order's neighbours carry a posterior probability, not a decision")


class Active(OrderingDesign):
    name = "active"
    label = "Active ranking (labels where the fitted order is least sure)"
    title = "active ranking"
    level_text = "γ / (k (k − 1) / 2)"
    # the planner replays the design itself (protocol.plan.replay_active), under the study's
    # budget (the most labels in all), and reports what it states about the order too
    plan_replay = "active"
    plan_policy = "adaptive"
    plan_states_order = True
    # with kinds of prompt, a pair's items take turns over them and the fit states the kinds'
    # uncertainty (active_ranking.fit_by_kind, docs/ranking.md)
    uses_prompt_kinds = True

    def planned(self, order: Sequence[str], settings: ActiveSettings) -> int:
        return settings.pair_limit(len(order)) if order else 0

    def start(self, state: RubricState, order: Sequence[str], settings: ActiveSettings, *,
              prepare: Prepare | None = None) -> RubricState:
        # raises on imported judgements too: the design funds every label it uses
        return rubric.single(active_ranking.active_start(state.primary, order, settings,
                                                         _lane_prepare(prepare, state.criteria[0])),
                             state.criteria[0])

    advances = True
    # active_ranking.open_pairs opens the rounds it funds
    opens_rounds = True
    # each step fits every label: the app keeps the last fit to start the next from
    keeps_last_fit = True
    # the fit reads the pairs with labels, the step the fitted order's neighbours besides
    # (active_ranking.active_advance's ``more``)
    advances_from_labelled = True

    def advance(self, state: RubricState, order: Sequence[str], settings: ActiveSettings, *,
                kinds: Mapping[str, str] | None = None,
                more: Callable[[list[tuple[str, str]]], Sequence[PairState]] | None = None,
                prepare: Prepare | None = None,
                last_fit: active_ranking.LastFit | None = None) -> RubricState:
        return rubric.single(active_ranking.active_advance(state.primary, order, settings, kinds, more,
                                                           _lane_prepare(prepare, state.criteria[0]), last_fit),
                             state.criteria[0])

    def guarantee(self, planned: int) -> str:
        return GUARANTEE.format(planned=planned)

    def summary(self, order: Sequence[str], settings: ActiveSettings) -> str:
        start = ", ".join(order) if order else "the metric's order (or a seeded shuffle)"
        cap = f", each pair at most {settings.max_labels} judgements" if settings.max_labels else ""
        return (f"from {start}; until every pair of neighbours is resolved to {settings.resolution:g} in "
                f"log-strength at confidence {settings.confidence:g} (a neighbour ordered at a posterior of "
                f"{1 - settings.order_misorder:g}){cap}")

    def section(self, pairs: Sequence[PairState], order: Sequence[str], settings: ActiveSettings,
                level: float, *, kinds: Mapping[str, str] | None = None) -> dict:
        """The fitted order with each neighbour's posterior probability of being misordered (at
        all, and by more than the resolution), its tiers and its decisions (docs/ranking.md)."""
        progress = active_ranking.active_progress(pairs, order, settings, level, kinds)
        step = progress.step
        names = progress.systems
        # how many labels each final claim rests on (issue 39): only once complete, the claims
        # are final then, and the count redoes the fit several times per claim
        claims = fragility.neighbour_fragility(pairs, names, step.neighbours, settings=settings,
                                               kinds=kinds) if progress.complete else {}
        # and the top-k claims at the tiers' ends: "the first k are above the rest"
        tops = fragility.tier_top_fragility(pairs, names, step.order, step.neighbours, settings=settings,
                                            kinds=kinds) if progress.complete else {}

        def rests_on(n) -> dict:
            claim = claims.get((n.upper, n.lower))
            return {"removals": claim.removals if claim else None, "fragile": bool(claim and claim.fragile)}

        # the posterior bound each claim is made at: an ordered claim's P(reversed), a close
        # one's P(reversed by more than the resolution); none for a neighbour that claims nothing
        bars = {active_ranking.ORDERED: round(settings.order_misorder, 9),
                active_ranking.CLOSE: round(1 - settings.confidence, 9)}

        decisions = sorted((a, b, d) for (a, b), d in progress.decisions().items())
        direct = sum(1 for p in pairs if p.decision)
        return {
            "design": self.name,
            "complete": progress.complete,
            "order": list(progress.order),
            "tiers": [list(tier) for tier in progress.tiers],
            "neighbours": [{"upper": names[n.upper], "lower": names[n.lower], "misorder": n.misorder,
                            "misorder_beyond": n.misorder_beyond_resolution, "status": n.status, "bar": bars.get(n.status), **rests_on(n)}
                           for n in step.neighbours],
            "top_claims": [{"k": k, "top": [names[s] for s in step.order[:k]], "statistic": t.statistic,
                            "weakest": [names[s] for s in t.weakest], "removals": t.removals,
                            "undone_by": [names[s] for s in t.undone_by] if t.undone_by else None,
                            "fragile": t.fragile} for k, t in sorted(tops.items())],
            "fragile_claims": sum(1 for claim in claims.values() if claim.fragile),
            # the prompt-kind model (docs/ranking.md): kinds of prompt fitted, a system's effect
            # on a kind (its sd, log-strength)
            "kinds": step.kinds,
            "kind_sd": float(np.sqrt(step.kind_variance)),
            "expected_misordered": step.expected_misordered,
            "ordered": sum(1 for n in step.neighbours if n.status == active_ranking.ORDERED),
            "close": sum(1 for n in step.neighbours if n.status == active_ranking.CLOSE),
            "open": sum(1 for n in step.neighbours if n.status == active_ranking.OPEN),
            "confidence": settings.confidence,
            "one_minus_confidence": round(1 - settings.confidence, 9),
            # the ordered claim's bar (ActiveSettings.order_misorder): every text that explains
            # an ordered claim states this number, not the confidence's
            "order_misorder": bars[active_ranking.ORDERED],
            "order_posterior": round(1 - settings.order_misorder, 9),
            # a close claim by kind takes the kinds' part of its uncertainty at this tail
            # (ActiveSettings.kinds_close_misorder); its misorder_beyond is Phi(-margin), the
            # stop's statistic with that part so weighted
            "kinds_close_misorder": round(settings.kinds_close_misorder, 9),
            "width": settings.width,
            "resolution": settings.resolution,
            "decisions": decisions,
            "decided": direct,
            "implied": len(decisions) - direct,
            "runs": sum(1 for p in pairs if p.judgements),
            "planned": self.planned(order, settings),
            "running": progress.in_flight,
            "labels": progress.labels,
            "level": progress.level,
            "gamma": settings.gamma,
        }

    def partial_order(self, section: dict, decided: dict) -> dict:
        # the decisions' partial order: the pairs decided and those they imply by transitivity
        return {**decided, **{(a, b): d for a, b, d in section["decisions"]}}

    def implied(self, pair: dict, partial: dict) -> bool:
        return (not pair["decision"]) and partial[(pair["first"], pair["second"])]


def _lane_prepare(prepare: Prepare | None, criterion: str):
    """The design's one lane's view of a caller's ``prepare`` (the design runs one criterion)."""
    if prepare is None:
        return None
    return lambda state, indices: prepare(rubric.single(state, criterion), (frozenset(indices),)).primary


ACTIVE = register(Active())
