"""The pair design interface (protocol.designs); the registry is protocol.designs.registry."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..active_ranking import ActiveSettings
from ..rubric import RubricState
from ..state import ADAPTIVE, EPROCESS, PairState

# a caller's step before rounds open, for a design that opens them itself (``opens_rounds``):
# (state, each lane's pairs about to open by index, as rubric.opening gives them) -> the state
# with those pairs' predictions set, nothing else changed
Prepare = Callable[[RubricState, tuple[frozenset[int], ...]], RubricState]

class PairDesign:
    """How a study chooses the pairs it decides. Subclass it, set the class attributes, override
    the behaviours that differ, and ``register`` one instance.

    name            the ``pair_design`` value (at most registry.MAX_NAME_LENGTH characters)
    label           its choice's label in forms, the admin and the docs
    title           the design in a sentence: "the {title} design needs ..."
    orders_systems  does it start from an initial order of the systems (stored at the start as
                    the study's ``ranking_order``: the metric's order, or a seeded shuffle)?
    takes_imported_judgements  may a bundle bring human judgements to a study of this design?
    caps_labels     is the study's ``ranking_max_labels`` (labels per comparison) its setting?
    family_control_text  what the settings page shows for family control ("": the setting's own)
    plan_replay     the protocol.plan design that replays it (None: the planner cannot yet)
    plan_refusal    why the planner cannot replay it (with plan_replay None)
    plan_policy     the one allocation policy the planner may replay it with (None: any)
    plan_per_comparison  are the planner's budgets the most labels per comparison of its replay
                    (the study's ranking_max_labels), not a study's budget?
    plan_states_order  does its replay report what the design states about the order
                    (protocol.plan's ``Plan.order``), shown beside the decisions?
    uses_prompt_kinds  does it use the items' kinds of prompt (the bundle's ``prompt_kind``):
                    the app then serves a pair's items in turns over the kinds
                    (protocol.allocation.kind_turn) and passes ``kinds`` (item id -> kind) to
                    ``advance`` and ``section``?
    advances        does ``advance`` ask for pairs after a close (a sort replayed, an order
                    fitted)? A design that does not lets the app's round close read only the
                    pairs it closes or opens (issue 41)
    advances_from_labelled  does ``advance`` need, of the study's pairs, only those with a
                    judgement or a round (a partial state: the others parked with none, their
                    totals ``outside``), asking ``more`` for the few others it reads? Then the
                    app's round close reads no more (issue 41); otherwise an advancing design
                    reads the whole state
    opens_rounds    do ``start`` and ``advance`` open the rounds they fund themselves, rather
                    than leave the pairs waiting for rubric.open_rounds? Then both take
                    ``prepare`` (a ``Prepare``) and call it on those pairs just before opening
                    them: the app's calibration of the study's combined metrics
                    (runtime.metrics_combined), which finds no pair about to open afterwards
    keeps_last_fit  does ``advance`` fit a model to every label, whose solver a caller can start
                    from the last step's fit? Then it takes ``last_fit`` (an
                    active_ranking.LastFit the caller keeps per study between steps)

    ``settings`` below is the study's ActiveSettings (confidence, resolution, batch, labels per
    comparison, γ), ``order`` its initial order of system names.
    """

    name: str = ""
    label: str = ""
    title: str = ""
    orders_systems: bool = False
    takes_imported_judgements: bool = True
    caps_labels: bool = False
    family_control_text: str = ""
    plan_replay: str | None = "all_pairs"
    plan_refusal: str = ""
    plan_policy: str | None = None
    plan_per_comparison: bool = False
    plan_states_order: bool = False
    uses_prompt_kinds: bool = False
    advances: bool = False
    advances_from_labelled: bool = False
    opens_rounds: bool = False
    keeps_last_fit: bool = False

    def planned(self, order: Sequence[str], settings: ActiveSettings) -> int:
        """The most pair runs it plans over ``order``; each pair is decided at γ / this (0: γ)."""
        return 0

    def most_judgements(self, capacities: Mapping[tuple[str, str], int], settings: ActiveSettings) -> int:
        """The most human judgements the design can spend, ``capacities`` the judgements each
        pair of systems can take (its items x ratings): a study's budget when its bundle states
        none. Every item of every pair."""
        return sum(capacities.values())

    def start(self, state: RubricState, order: Sequence[str], settings: ActiveSettings) -> RubricState:
        """The state the study starts from, before its first rounds open."""
        return state

    def advance(self, state: RubricState, order: Sequence[str], settings: ActiveSettings, *,
                kinds: Mapping[str, str] | None = None,
                more: Callable[[list[tuple[str, str]]], Sequence[PairState]] | None = None) -> RubricState:
        """The state with the pairs the design asks for now; called after every close or
        re-decision, before rounds open. ``kinds``: item id -> kind of prompt, or None (the
        study's items have none, or the design does not use them). ``more``: for a partial
        state (``advances_from_labelled``), the pairs it leaves out that ``advance`` names."""
        return state

    def problems(self, *, rule: str, policy: str, family: str, criteria: int, max_labels: int) -> dict[str, str]:
        """Why the design cannot run with these other settings: setting name -> why."""
        if max_labels and not self.caps_labels:
            return {"ranking_max_labels": f"labels per comparison is the ranking design's resolution; the "
                                          f"{self.title} design takes every item of a pair (leave it 0)"}
        return {}

    def guarantee(self, planned: int) -> str:
        """What holds across the study's pairs under the e-process rule ("": the family control's)."""
        return ""

    def summary(self, order: Sequence[str], settings: ActiveSettings) -> str:
        """The design's settings in words, after its label on the settings page ("": none)."""
        return ""

    def section(self, pairs: Sequence[PairState], order: Sequence[str], settings: ActiveSettings,
                level: float, *, kinds: Mapping[str, str] | None = None) -> dict | None:
        """Its dashboard section's data (templates/annotation/designs/<name>.html shows it; None:
        no section). ``pairs`` are every pair's protocol state, ``level`` each pair's level."""
        return None

    def partial_order(self, section: dict, decided: dict) -> dict | None:
        """The study's partial order (pair -> ±1/0) from the section and the pairs ``decided``
        directly; None: the direct decisions alone."""
        return None

    def implied(self, pair: dict, partial: dict) -> bool:
        """Is the dashboard's ``pair`` (a row with first, second, decision, status) ordered only
        by the partial order, not by a decision of its own?"""
        return False


class OrderingDesign(PairDesign):
    """A design that orders the systems (a leaderboard): it starts from an initial order, runs
    only the pairs it asks for (so no imported judgements), caps labels per comparison, and
    controls the error over the order itself, each pair at γ / its planned runs."""

    orders_systems = True
    takes_imported_judgements = False
    caps_labels = True
    level_text = "γ / C(k)"  # each pair's level, in words

    def most_judgements(self, capacities: Mapping[tuple[str, str], int], settings: ActiveSettings) -> int:
        # its planned pair runs, each at most its labels per comparison: at 200 systems the sort
        # runs 1,416 of the 19,900 pairs (every pair's every item stated 39.8 M judgements)
        names = sorted({name for key in capacities for name in key})
        runs = self.planned(names, settings) or len(capacities)
        largest = sorted((settings.capacity(c) for c in capacities.values()), reverse=True)
        return sum(largest[:runs])

    def problems(self, *, rule: str, policy: str, family: str, criteria: int, max_labels: int) -> dict[str, str]:
        why = f"the {self.title} design needs "
        return {name: why + text for name, text, bad in (
            ("protocol_rule", "the e-process rule (its error statement is anytime-valid)", rule != EPROCESS),
            ("allocation_policy", "the adaptive policy (futile pairs stop; the sort goes on)", policy != ADAPTIVE),
            ("family_control", "family control 'none': it controls the error over the ranking itself, each pair "
                               f"at {self.level_text}", family != "none"),
            ("pair_design", "one criterion (its sort follows one decision per pair)", criteria > 1),
        ) if bad}
