"""Every study setting, declared once (issue 40; docs/tutorials/add-a-study-setting.md).

A setting is one :class:`Setting` of :data:`SETTINGS`: its kind, bounds (minimum / maximum,
each inclusive or exclusive, or its choices, or a text's length), default, label and help,
where it may be set (:data:`SURFACES`) and whether it is a protocol parameter, fixed once the
protocol has started. Everything else reads this table: the bundle reader (``protocol.bundle``),
the model's defaults, help and validators (``annotation/models.py``), the forms, the API's
serializers, the update services, the export, the admin and the table of study settings in
docs/bundle-format.md (:func:`markdown_table`). One check, :meth:`Setting.problem`, says
whether a value is allowed, and every surface refuses a value with its message, which names
the setting and its bounds.

Pure Python, no Django: the bottom layer (docs/architecture.md).

    python -m protocol.study_settings            # the docs table
    python -m protocol.study_settings --write    # rewrite it in docs/bundle-format.md
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .allocation import MIN_TEMPERATURE, TEMPERATURE_REASON
from .designs.registry import design_choices
from .similarity import similarity_names
from .state import ProtocolSettings

# Where a setting may be set.
BUNDLE = "bundle"          # the study line of a bundle; the export writes it back
DRAFT = "draft"            # a draft's settings page (until the launch)
RUNNING = "running"        # a launched study's settings page
API_IMPORT = "api_import"  # the API's import, POST /api/studies/
API = "api"                # GET and PATCH /api/studies/<slug>/settings/
ADMIN = "admin"            # the Django admin's change form
SURFACES = (BUNDLE, DRAFT, RUNNING, API_IMPORT, API, ADMIN)
SURFACE_NAMES = {BUNDLE: "bundle", DRAFT: "draft page", RUNNING: "settings page", API_IMPORT: "API import",
                 API: "API settings", ADMIN: "admin"}

# What a value is.
INT, FLOAT, TEXT, BOOL, CHOICE, METRIC = "int", "float", "text", "bool", "choice", "metric"
KINDS = (INT, FLOAT, TEXT, BOOL, CHOICE, METRIC)

# The largest whole number a setting may take: a PositiveIntegerField's range on PostgreSQL.
INT_MAX = 2**31 - 1
METRIC_NAME_LENGTH = 200  # annotation.models.Metric.name



class LiveChoices:
    """A CHOICE's (value, label) pairs listed afresh each time they are read, from ``source``
    (a module-level function, so a migration can name it): the pair designs, say, which a
    module may register after the table was made (protocol.designs)."""

    def __init__(self, source) -> None:
        self.source = source

    def __iter__(self):
        return iter(self.source())


# Settings are grouped as the settings page and the docs show them.
GROUPS = {
    "protocol": "protocol parameters",
    "run": "running the study",
    "texts": "what annotators see",
    "crowd": "crowd sessions (docs/crowd.md)",
    "quality": "quality control (docs/quality.md)",
}


@dataclass(frozen=True)
class Setting:
    """One study setting.

    name         the Study field and the bundle key (one name everywhere)
    kind         INT, FLOAT, TEXT, BOOL, CHOICE or METRIC (the name of one of the study's metrics)
    default      the value of a study that does not set it (None: not set)
    help         what it means, shown by forms, the API schema, the admin and the docs
    label        a form's label and the model's verbose name (default: the name in words)
    group        a key of GROUPS
    surfaces     where it may be set, a subset of SURFACES
    fixed        a protocol parameter: fixed once the protocol has started
    minimum, maximum, min_exclusive, max_exclusive   a number's bounds
    choices      a CHOICE's (value, label) pairs, or LiveChoices
    max_length   a TEXT's most characters; blank: may a TEXT be empty
    optional     a form may leave it empty: then its default
    reason       why the bounds are what they are, told with a refusal
    """

    name: str
    kind: str
    default: object
    help: str
    label: str = ""
    group: str = "run"
    surfaces: frozenset = frozenset()
    fixed: bool = False
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple | LiveChoices = ()
    max_length: int | None = None
    blank: bool = False
    optional: bool = False
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", " "))
        object.__setattr__(self, "surfaces", frozenset(self.surfaces))
        problems = [why for why, bad in (
            (f"kind {self.kind!r} is none of {KINDS}", self.kind not in KINDS),
            (f"group {self.group!r} is none of {tuple(GROUPS)}", self.group not in GROUPS),
            (f"unknown surfaces {sorted(self.surfaces - set(SURFACES))}", bool(self.surfaces - set(SURFACES))),
            ("a number needs both bounds", self.kind in (INT, FLOAT) and None in (self.minimum, self.maximum)),
            ("a whole number's bounds are inclusive", self.kind == INT and (self.min_exclusive or self.max_exclusive)),
            ("a choice needs its choices", self.kind == CHOICE and not self.choices),
            ("a text needs its most characters", self.kind == TEXT and not self.max_length),
            # live choices may not be registered yet (tests/protocol/test_designs.py checks them)
            ("its default is out of its own bounds", self.default is not None and not isinstance(self.choices, LiveChoices)
             and self.problem(self.default)),
        ) if bad]
        if problems:
            raise ValueError(f"study setting {self.name!r}: " + "; ".join(problems))

    @property
    def field_choices(self):
        """The choices as a Django field takes them: a function that lists them afresh for live
        choices (Django calls it when it needs them), else the pairs."""
        return self.choices.source if isinstance(self.choices, LiveChoices) else list(self.choices)

    @property
    def values(self) -> tuple:
        """A CHOICE's values."""
        return tuple(value for value, _ in self.choices)

    @property
    def bounds(self) -> str:
        """What a value must be, in words: "a whole number at least 30 and at most 86400"."""
        if self.kind in (INT, FLOAT):
            low = f"{'above' if self.min_exclusive else 'at least'} {_number(self.minimum)}"
            high = f"{'below' if self.max_exclusive else 'at most'} {_number(self.maximum)}"
            return f"{'a whole number' if self.kind == INT else 'a number'} {low} and {high}"
        if self.kind == TEXT:
            return f"{'a' if self.blank else 'a non-empty'} text of at most {self.max_length} characters"
        if self.kind == METRIC:
            return f"the name of one of the bundle's metrics (at most {METRIC_NAME_LENGTH} characters)"
        if self.kind == BOOL:
            return "true or false"
        return "one of " + ", ".join(json.dumps(value) for value in self.values)

    @property
    def explained(self) -> str:
        """Its help with its bounds and their reason, as forms, the API schema and the admin say it."""
        bounds = "" if self.kind in (BOOL, CHOICE) else f"; {self.bounds}"
        return self.help + bounds + (f", because {self.reason}" if self.reason else "")

    def refusal(self, shown: str, subject: str | None = None) -> str:
        """The message refusing a value shown as ``shown``: it names the setting and its bounds."""
        return f"{subject or self.name} must be {self.bounds}, got {shown}" + (f": {self.reason}" if self.reason else "")

    def problem(self, value, subject: str | None = None) -> str | None:
        """None when ``value`` is allowed; else the refusal (``subject`` names the setting,
        default its name)."""
        if not self._allowed(value):
            return self.refusal(_shown(value), subject)
        if isinstance(value, str) and "\x00" in value:
            return f"{subject or self.name} must not contain a NUL character"
        return None

    def _allowed(self, value) -> bool:
        if self.kind == BOOL:
            return isinstance(value, bool)
        if self.kind == CHOICE:
            return isinstance(value, str) and value in self.values
        if self.kind in (TEXT, METRIC):
            longest = self.max_length if self.kind == TEXT else METRIC_NAME_LENGTH
            return isinstance(value, str) and len(value) <= longest and (
                (self.kind == TEXT and self.blank) or bool(value.strip()))
        number = (int,) if self.kind == INT else (int, float)
        if isinstance(value, bool) or not isinstance(value, number) or not math.isfinite(value):
            return False
        above = value > self.minimum if self.min_exclusive else value >= self.minimum
        below = value < self.maximum if self.max_exclusive else value <= self.maximum
        return above and below


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _shown(value) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


ANYWHERE = frozenset({BUNDLE, DRAFT, RUNNING, API, ADMIN})
RUN_SURFACES = frozenset({BUNDLE, RUNNING, API, ADMIN})
PROTOCOL_SURFACES = frozenset({BUNDLE, DRAFT, API_IMPORT, ADMIN})
COUNT_MAX = 100_000

# How much stricter than the confidence the bar of the active design's "ordered" claim is: the
# claim is made at posterior P(misordered) <= (1 - confidence) / ORDER_BAR_FACTOR and stated at
# the confidence (protocol.active_ranking's doc: at 1, tiers of equal systems had a quarter of
# their ordered claims wrong). Declared here, beside the confidence it divides, so that the
# setting's help states it (protocol.active_ranking.ActiveSettings.order_bar reads it).
ORDER_BAR_FACTOR = 10
# How much stricter the close claim's bar is on the part of a neighbour's uncertainty that the
# study's kinds of prompt add (protocol.active_ranking.fit_by_kind), which more labels do not
# shrink: a close claim needs d + r >= sqrt(z*^2 v_labels + z_k^2 v_kinds), z* = Phi^-1(confidence),
# z_k = Phi^-1(1 - (1 - confidence) / KINDS_CLOSE_BAR_FACTOR). At z_k = z* (factor 1) the close
# claims of designs told the kinds were made just past their bar and 3 % of them were reversed
# beyond the resolution on the population's prompts (docs/ranking-results.md, "When the model does
# not hold"); at factor 2 the close claims of 10 and 4 kinds over 120 seeds were reversed 1.2 % and
# 1.7 % of the time, at 10 0.8 % and 0 % for the same labels and tau where the kinds matter (the
# same section); without kinds the bar is z*'s. Declared here for the same reason as
# ORDER_BAR_FACTOR.
KINDS_CLOSE_BAR_FACTOR = 10
RANKING_CONFIDENCE_HELP = ("active design: posterior probability at which two neighbours of the order count as "
                           "close (misordered by no more than the resolution); an ordered claim is made at the "
                           f"stricter posterior 1 − (1 − confidence) / {ORDER_BAR_FACTOR} and stated at the "
                           "confidence; with kinds of prompt, a close claim takes the part of its uncertainty the "
                           f"kinds add at the stricter 1 − (1 − confidence) / {KINDS_CLOSE_BAR_FACTOR}")
RANKING_RESOLUTION_HELP = ("active design: the smallest difference of Bradley–Terry log-strengths the ranking must "
                           "get right; two neighbours are resolved once a reversal larger than this is unlikely "
                           "(0.05 is a 51.25 % win rate)")

_TABLE = (
    # -- protocol parameters: fixed once the protocol has started (Study.PROTOCOL_PARAMETERS) --
    Setting("metric", METRIC, None, "the metric whose labels the protocol combines with the human judgements; "
            "none: a human-only study", label="metric for the protocol", group="protocol",
            surfaces=PROTOCOL_SURFACES, fixed=True),
    Setting("combined_metrics", TEXT, "", "further metrics or judges of the study, names separated by commas, "
            "combined with the metric for the protocol into one prediction by a calibration cross-fitted on the other "
            "pairs' human labels (docs/formulas.md §8); empty: the metric alone. A rubric names a criterion's: "
            "'correctness: j2, j3; style: j4' (names without a criterion: the first criterion's). May change while "
            "the study runs: a judge named here enters the protocol at the next close", label="metrics combined with it",
            group="run", surfaces=ANYWHERE | {API_IMPORT}, max_length=1000, blank=True),
    Setting("gamma", FLOAT, 0.05, "e.g. 0.05; smaller = more judgements per decision",
            label="γ (error level per decision)", group="protocol", surfaces={BUNDLE, DRAFT, ADMIN}, fixed=True,
            minimum=0, maximum=0.5, min_exclusive=True),
    Setting("batch_size", INT, 10, "judgements per pair per round", group="protocol",
            surfaces={BUNDLE, DRAFT, ADMIN}, fixed=True, minimum=1, maximum=1000),
    Setting("ratings_per_item", INT, 1, "judgements one comparison may receive", group="protocol",
            surfaces={BUNDLE, DRAFT, ADMIN}, fixed=True, minimum=1, maximum=100),
    Setting("protocol_rule", CHOICE, "eprocess", "eprocess: false ± ≤ γ under any number of looks; bayes: the "
            "paper's θ thresholds, γ per look only", label="decision rule", group="protocol",
            surfaces=PROTOCOL_SURFACES, fixed=True,
            choices=(("eprocess", "Error-controlled (e-process)"), ("bayes", "Bayesian θ thresholds (the paper's rule)"))),
    Setting("allocation_policy", CHOICE, "adaptive", "adaptive: a pair stops when a decision has become "
            "unlikely (futile); paper: the paper's Algorithm 2", group="protocol", surfaces=PROTOCOL_SURFACES,
            fixed=True, choices=(("adaptive", "Adaptive"), ("paper", "Paper (Algorithm 2)"))),
    Setting("futility", FLOAT, ProtocolSettings.futility, "adaptive policy: a pair still undecided after "
            f"{ProtocolSettings.futility_min_judgements} judgements is given up "
            "(futile, no decision) once even an optimistic reading of its labels so far, the end of their (1 - this) "
            "credible interval, could not decide it on its remaining items. Higher: fewer labels spent on hard "
            "pairs (near-ties), fewer pairs decided; lower: more labels, more pairs decided; 0: no pair is given "
            "up. A futility stop never decides ±, so the error control holds at every level (docs/judges.md, "
            "\"Labels or correctness\")", label="futility level", group="protocol", surfaces=PROTOCOL_SURFACES,
            fixed=True, minimum=0, maximum=0.5, optional=True,
            reason="above 0.5 the optimistic reading passes the middle of the credible interval, so pairs more "
                   "likely than not to be decided would be given up"),
    Setting("futility_prior", BOOL, ProtocolSettings.futility_prior, "adaptive policy, decision rule eprocess, "
            "with a metric: also give a pair up when the metric's mean over all its items, as a prior of its human "
            "margin fitted on the other pairs (as sure as the level explains the other pairs' margins), says it "
            "could not be decided. Spends a judge's power on fewer labels rather than more pairs decided; no "
            "effect without a metric or with one that explains nothing. A futility stop never decides ±, so the "
            "error control holds either way (docs/formulas.md §8, docs/judges.md)",
            label="give near-ties up by the metric's level", group="protocol", surfaces=PROTOCOL_SURFACES,
            fixed=True),
    Setting("family_control", CHOICE, "ebh", "error control across the study's pairs (decision rule eprocess)",
            label="family control across pairs", group="protocol", surfaces=PROTOCOL_SURFACES, fixed=True,
            choices=(("ebh", "e-BH (false discovery rate over the study's pairs)"),
                     ("bonferroni", "Family-wise (any false ± over the study's pairs)"),
                     ("none", "None (each pair on its own)"))),
    Setting("pair_design", CHOICE, "all_pairs", "all_pairs: every pair decided; ranking (many systems): a merge "
            "sort decides the pairs it needs (≤ k log₂ k), each at γ / C(k); active: labels where the fitted order "
            "is least sure, until it is resolved; both need family control 'none' (docs/ranking.md)",
            label="pairs decided", group="protocol", surfaces=PROTOCOL_SURFACES, fixed=True,
            choices=LiveChoices(design_choices)),
    Setting("ranking_max_labels", INT, 0, "ranking designs: most judgements one pair may take, its resolution (a "
            "pair still undecided then is a tie); 0 = all of its items", label="labels per comparison",
            group="protocol", surfaces=PROTOCOL_SURFACES, fixed=True, minimum=0, maximum=INT_MAX, optional=True),
    Setting("ranking_confidence", FLOAT, 0.95, RANKING_CONFIDENCE_HELP, label="confidence",
            group="protocol", surfaces=PROTOCOL_SURFACES, fixed=True, minimum=0.5, maximum=1, max_exclusive=True,
            optional=True),
    Setting("ranking_resolution", FLOAT, 0.05, RANKING_RESOLUTION_HELP, label="resolution",
            group="protocol", surfaces=PROTOCOL_SURFACES, fixed=True, minimum=0, maximum=1, optional=True,
            reason="0 asks for every neighbour to be ordered (near-ties take every label they may), 1 already "
                   "leaves reversals up to a 73 % win rate unresolved, and more would stop the design before it "
                   "has ordered anything"),
    Setting("protocol_seed", INT, 0, "seed of everything random in the protocol", label="seed", group="protocol",
            surfaces={ADMIN}, fixed=True, minimum=0, maximum=INT_MAX),
    Setting("protocol_strict", BOOL, False, "Pocock-adjusted level per look (decision rule bayes)",
            label="strict", group="protocol", surfaces={ADMIN}, fixed=True),
    # -- running the study ---------------------------------------------------------------------
    Setting("status", CHOICE, "running", "paused: open leases stay, nothing new is leased; a draft is "
            "launched from its settings page", surfaces={RUNNING, API, ADMIN},
            choices=(("running", "Running"), ("paused", "Paused"), ("finished", "Finished"))),
    Setting("budget", INT, 0, "human judgements the protocol may spend (never below what is spent and asked "
            "for); 0 at import: what the pair design can spend (every comparison ratings_per_item times; under the "
            "ranking designs their planned pairs, each at most its labels per comparison)", surfaces=ANYWHERE,
            minimum=0,
            maximum=INT_MAX),
    Setting("lease_timeout_seconds", INT, 900, "seconds an annotator keeps a HIT (a page left gives it back at "
            "once); at import without one: twice the time to read a typical HIT at 240 words a minute, 3 to 30 "
            "minutes (lease_timeout_for)", label="lease timeout (seconds)", surfaces=RUN_SURFACES, minimum=30,
            maximum=86400),
    Setting("completion_code", TEXT, "", "shown to crowd workers when their work is done", surfaces=RUN_SURFACES,
            max_length=64, blank=True),
    Setting("instructions", TEXT, "", "what annotators are asked, shown with every HIT", surfaces=RUN_SURFACES,
            max_length=20000, blank=True),
    Setting("item_choice", CHOICE, "uniform", "how a pair's next item is drawn", surfaces={DRAFT, RUNNING, API, ADMIN},
            choices=(("uniform", "Uniform"), ("weighted", "Separability-weighted"),
                     ("stratified", "Stratified by separability"))),
    Setting("item_choice_temperature", FLOAT, 0.25, "weighted choice: lower = stronger preference for separable "
            "items", surfaces={RUNNING, API, ADMIN}, minimum=MIN_TEMPERATURE, maximum=10,
            reason=TEMPERATURE_REASON.format(minimum=MIN_TEMPERATURE, exponent=2 / MIN_TEMPERATURE)),
    # -- what annotators see ---------------------------------------------------------------------
    Setting("text_format", CHOICE, "plain", "how inputs and outputs are shown (annotation/rendering.py); fixed at "
            "import, where a markdown study's texts are rendered once", group="texts", surfaces={BUNDLE},
            choices=(("plain", "Plain text"), ("markdown", "Markdown"))),
    Setting("shown_sample", INT, 0, "the output sample annotators see and ratings rate (outputs with several "
            "samples)", group="texts", surfaces={BUNDLE, ADMIN}, minimum=0, maximum=INT_MAX),
    Setting("separability_similarity", CHOICE, "rouge1", "the text similarity separability is scored with at "
            "import (protocol/similarity.py; cosine needs requirements-embeddings.txt)", group="texts",
            surfaces={BUNDLE}, choices=tuple((name, name) for name in similarity_names())),
    # -- crowd sessions ----------------------------------------------------------------------------
    Setting("prolific_study_id", TEXT, "", "Prolific's STUDY_ID; a start link with another one is refused",
            group="crowd", surfaces={BUNDLE, ADMIN}, max_length=64, blank=True),
    Setting("session_hits_min", INT, 1, "judgements a worker needs for the completion code",
            label="comparisons for the completion code", group="crowd", surfaces=RUN_SURFACES, minimum=1,
            maximum=COUNT_MAX),
    Setting("session_hits_max", INT, 0, "most judgements one worker is served; 0 = no limit, else at least "
            "session_hits_min", label="most comparisons per worker", group="crowd", surfaces=RUN_SURFACES,
            minimum=0, maximum=COUNT_MAX),
    Setting("session_minutes", INT, 0, "minutes from a worker's first HIT after which no new HIT is served; "
            "0 = no limit", label="session time limit (minutes)", group="crowd", surfaces=RUN_SURFACES, minimum=0,
            maximum=1440),
    Setting("min_seconds_per_hit", INT, 0, "seconds a HIT must be on screen before it can be answered (the "
            "server refuses faster answers)", label="minimum seconds per comparison", group="crowd",
            surfaces=RUN_SURFACES, minimum=0, maximum=3600),
    # -- quality control ---------------------------------------------------------------------------
    Setting("check_every", INT, 0, "about one HIT in N + 1 is a check, never two in a row; 0 = none (needs "
            "check lines in the bundle)", label="a check every N comparisons", group="quality",
            surfaces=RUN_SURFACES, minimum=0, maximum=1000),
    Setting("onboarding_checks", INT, 0, "a worker's first HITs are this many checks; who fails them is thanked "
            "and not served more", group="quality", surfaces=RUN_SURFACES, minimum=0, maximum=50),
    Setting("repeat_every", INT, 0, "about one HIT in N repeats a comparison the worker judged, sides swapped "
            "(repeat consistency); 0 = none", label="a repeat every N comparisons", group="quality",
            surfaces=RUN_SURFACES, minimum=0, maximum=1000),
    Setting("exclude_too_fast", BOOL, False, "exclude workers flagged too_fast",
            label="exclude workers flagged too fast", group="quality", surfaces={RUNNING, API, ADMIN}),
    Setting("exclude_failed_checks", BOOL, False, "exclude workers flagged failed_checks",
            label="exclude workers who fail checks", group="quality", surfaces={RUNNING, API, ADMIN}),
    Setting("exclude_low_agreement", BOOL, False, "exclude workers flagged low_agreement",
            label="exclude workers with low agreement", group="quality", surfaces={RUNNING, API, ADMIN}),
)

# The table: name -> Setting, in the order forms and docs show them.
SETTINGS: dict[str, Setting] = {setting.name: setting for setting in _TABLE}
assert len(SETTINGS) == len(_TABLE), "a study setting is declared twice"

# Names of the protocol parameters (fixed once the protocol has started).
FIXED = tuple(name for name, setting in SETTINGS.items() if setting.fixed)


def settings_for(surface: str, *, group: str | None = None) -> tuple[Setting, ...]:
    """The settings that may be set on ``surface`` (of ``group``), in table order."""
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}; one of {SURFACES}")
    return tuple(s for s in SETTINGS.values() if surface in s.surfaces and (group is None or s.group == group))


def defaults() -> dict[str, object]:
    """Every setting's default."""
    return {name: setting.default for name, setting in SETTINGS.items()}


def combined_by_criterion(value: str, criteria: Sequence[str] = ()) -> dict[str, tuple[str, ...]]:
    """The metrics a ``combined_metrics`` value combines, per criterion of a rubric, in the
    order of ``criteria`` (a study's criterion names, the first the study's own): parts
    separated by ";", each "criterion: a, b" (a name of ``criteria`` before the first colon)
    or "a, b" (the first criterion's); names in order, without blanks or repeats; a criterion
    that combines none is left out. Without ``criteria`` every part is the first criterion's
    (key "").

    >>> combined_by_criterion("j2; correctness: c1, c2", ("helpfulness", "correctness"))
    {'helpfulness': ('j2',), 'correctness': ('c1', 'c2')}
    >>> combined_by_criterion("j2, j3")
    {'': ('j2', 'j3')}
    """
    first = criteria[0] if criteria else ""
    found: dict[str, list[str]] = {}
    for part in str(value or "").split(";"):
        head, colon, tail = part.partition(":")
        criterion, names = (head.strip(), tail) if colon and head.strip() in criteria else (first, part)
        found.setdefault(criterion, []).extend(name.strip() for name in names.split(","))
    out = {c: tuple(dict.fromkeys(n for n in found.get(c, ()) if n)) for c in (criteria or ("",))}
    return {c: names for c, names in out.items() if names}


def metric_names(value: str, criteria: Sequence[str] = ()) -> tuple[str, ...]:
    """Every metric name of a ``combined_metrics`` value (``combined_by_criterion``), in order,
    without blanks or repeats."""
    return tuple(dict.fromkeys(n for names in combined_by_criterion(value, criteria).values() for n in names))


def cross_problems(values: Mapping[str, object]) -> dict[str, str]:
    """Problems of settings taken together, name -> message; a setting not in ``values``
    takes its default. (A rule that needs the study's rows, such as checks needing check
    lines, is its surface's.)"""
    problems = {}
    low = values.get("session_hits_min", SETTINGS["session_hits_min"].default)
    high = values.get("session_hits_max", SETTINGS["session_hits_max"].default)
    if isinstance(low, int) and isinstance(high, int) and high and high < low:
        problems["session_hits_max"] = (f"session_hits_max ({high}) is below session_hits_min ({low}): it must be "
                                        f"0 or at least {low} (0: no maximum)")
    # A Prolific study pays a worker who comes back with its completion code: without one its
    # workers could finish and not be paid (issue 36).
    if str(values.get("prolific_study_id") or "").strip() and not str(values.get("completion_code") or "").strip():
        problems["completion_code"] = ("a Prolific study (prolific_study_id is set) needs a completion_code: "
                                       "Prolific pays a worker who returns with it")
    return problems


# -- the docs table -----------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "bundle-format.md"
DOCS_START = "<!-- study settings: generated by `python -m protocol.study_settings --write`; do not edit -->"
DOCS_END = "<!-- end of the generated study settings -->"


def markdown_table(settings: Iterable[Setting] | None = None) -> str:
    """The table of study settings for docs/bundle-format.md, one row per setting."""
    rows = ["| setting | value | default | where it may be set | fixed once started | meaning |",
            "|---|---|---|---|---|---|"]
    group = None
    for s in settings if settings is not None else SETTINGS.values():
        if s.group != group:
            group = s.group
            rows.append(f"| **{GROUPS[group]}** | | | | | |")
        where = ", ".join(SURFACE_NAMES[surface] for surface in SURFACES if surface in s.surfaces)
        default = "none" if s.default is None else ('`""`' if s.default == "" else f"`{_shown(s.default)}`")
        meaning = s.help + (f" ({s.reason})" if s.reason else "")
        rows.append(f"| `{s.name}` | {s.bounds} | {default} | {where} | {'yes' if s.fixed else ''} | "
                    f"{meaning.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def docs_block() -> str:
    return f"{DOCS_START}\n\n{markdown_table()}\n{DOCS_END}"


def docs_with_table(text: str) -> str:
    """``text`` (docs/bundle-format.md) with its generated table replaced by the current one."""
    start, end = text.index(DOCS_START), text.index(DOCS_END) + len(DOCS_END)
    return text[:start] + docs_block() + text[end:]


# A lease that fits a HIT (issue 36): long enough to read both answers twice over at a reading
# speed of 240 words a minute, so a worker is rarely cut off, short enough that an idle tab gives
# its comparison back within minutes (a closed one gives it back at once).
READING_WORDS_PER_MINUTE = 240
LEASE_SECONDS_RANGE = (180, 1800)


def lease_timeout_for(words_per_hit: float) -> int:
    """The lease timeout (seconds) that fits a HIT of ``words_per_hit`` words (input and both
    outputs): twice its reading time, within LEASE_SECONDS_RANGE.

    >>> lease_timeout_for(600)    # a news article and two summaries: 150 s to read
    300
    >>> lease_timeout_for(2850)   # a question and two 1,400-word answers
    1425
    >>> lease_timeout_for(40)
    180
    """
    seconds = 2 * 60 * words_per_hit / READING_WORDS_PER_MINUTE
    low, high = LEASE_SECONDS_RANGE
    return int(min(max(round(seconds), low), high))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The table of study settings (docs/bundle-format.md).")
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/bundle-format.md")
    args = parser.parse_args(argv)
    if args.write:
        DOCS.write_text(docs_with_table(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(markdown_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
