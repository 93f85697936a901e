"""The ranking design: a merge sort over the systems decides only the pairs it needs, each at
γ / C(k) (protocol.ranking_design, docs/ranking.md)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .. import ranking_design, rubric
from ..active_ranking import ActiveSettings
from ..rubric import RubricState
from ..state import PARKED, PairState
from .base import OrderingDesign
from .registry import register

GUARANTEE = ("across the ranking: any wrong pair in its order, decided or implied, ≤ γ "
             "(each pair the sort runs decided at γ / {planned})")


class Ranking(OrderingDesign):
    name = "ranking"
    label = "Ranking (a merge sort decides only the pairs it needs)"
    title = "ranking"
    family_control_text = "the ranking design"
    plan_replay = "ranking"
    plan_policy = "adaptive"
    plan_per_comparison = True

    def planned(self, order: Sequence[str], settings: ActiveSettings) -> int:
        return ranking_design.planned_decisions(len(order))

    def start(self, state: RubricState, order: Sequence[str], settings: ActiveSettings) -> RubricState:
        # raises on imported judgements: the design runs only the pairs its sort asks for
        return rubric.single(ranking_design.sort_start(state.primary, order, max_labels=settings.max_labels),
                             state.criteria[0])

    advances = True
    # the sort is replayed from the stopped pairs' outcomes, all of them pairs it ran (not
    # parked), and asks for parked pairs it names (ranking_design.sort_advance's ``more``)
    advances_from_labelled = True

    def advance(self, state: RubricState, order: Sequence[str], settings: ActiveSettings, *,
                kinds: Mapping[str, str] | None = None,
                more: Callable[[list[tuple[str, str]]], Sequence[PairState]] | None = None) -> RubricState:
        return rubric.single(ranking_design.sort_advance(state.primary, order, more), state.criteria[0])

    def guarantee(self, planned: int) -> str:
        return GUARANTEE.format(planned=planned)

    def summary(self, order: Sequence[str], settings: ActiveSettings) -> str:
        cap = (f"each comparison at most {settings.max_labels} judgements (its resolution)" if settings.max_labels
               else "each comparison may take all of its items")
        return (f"sort over {len(order)} systems starting from {', '.join(order)}; "
                f"each pair at γ / {self.planned(order, settings)}; {cap}")

    def section(self, pairs: Sequence[PairState], order: Sequence[str], settings: ActiveSettings,
                level: float, *, kinds: Mapping[str, str] | None = None) -> dict:
        """The sort's progress and, once it is complete, the ranking (docs/ranking.md)."""
        progress = ranking_design.sort_progress(pairs, order, level)
        result = progress.result
        decisions = [(a, b, d) for (a, b), d in sorted(result.decisions().items())] if result else []
        return {
            "design": self.name,
            "complete": progress.complete,
            "order": list(result.order) if result else [],
            "tiers": [list(tier) for tier in result.tiers] if result else [],
            "decisions": decisions,
            "decided": result.decided if result else int(sum(1 for p in pairs if p.decision)),
            "implied": result.implied - result.decided if result else 0,
            "runs": progress.runs,
            "planned": progress.planned,
            "running": len(progress.running),
            "parked": sum(1 for p in pairs if p.status == PARKED),
            "labels": progress.labels,
            "level": progress.level,
            "gamma": settings.gamma,
            "bound": progress.error_bound,
        }

    def partial_order(self, section: dict, decided: dict) -> dict | None:
        # the ranking's partial order, once the sort is complete: its decisions and the pairs
        # they imply by transitivity
        return {(a, b): d for a, b, d in section["decisions"]} if section["complete"] else None

    def implied(self, pair: dict, partial: dict) -> bool:
        return pair["status"] == PARKED and partial[(pair["first"], pair["second"])]


RANKING = register(Ranking())
