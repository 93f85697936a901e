"""Study bundles: the one import format (JSON Lines, plain or gzipped).

One JSON object per line; its ``kind`` says what it is (docs/bundle-format.md)::

    {"kind":"study","name":"SummEval relevance","criterion":"relevance","instructions":"..."}
    {"kind":"item","id":"doc-1","input":"source text","reference":"optional"}
    {"kind":"item","id":"chat-1","input":[{"role":"user","content":"Explain *recursion*."}]}
    {"kind":"output","item":"doc-1","system":"M8","text":"...","sample":0}
    {"kind":"metric_score","item":"doc-1","system":"M8","metric":"rougeL","score":0.31}
    {"kind":"metric_preference","item":"doc-1","first":"M8","second":"M9","metric":"judge","preference":1}
    {"kind":"human_score","item":"doc-1","system":"M8","score":4.33,"annotator":"e1"}
    {"kind":"human_preference","item":"doc-1","first":"M8","second":"M9","preference":-1,"annotator":"w3"}
    {"kind":"check","id":"gold-1","input":"...","first":"a good text","second":"a broken one","expected":"first"}

:func:`read_bundle` validates the whole file before returning anything and raises
:class:`BundleError` listing every problem with its line number, so a caller that stores the
bundle (the web app's importer) can be all-or-nothing. A system exists when it has at least
one output; every other row must name existing items and systems. An output's ``text`` may
be empty: a system that generated nothing is real data (docs/bundle-format.md).
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .scales import PLAIN, SCALES, STRENGTH, AnswerScale
from .study_settings import BUNDLE, cross_problems, settings_for

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
MAX_REPORTED_PROBLEMS = 200

# The study settings a bundle may carry (protocol.study_settings, the one table): name -> Setting.
STUDY_SETTINGS = {setting.name: setting for setting in settings_for(BUNDLE)}
# Roles a conversation message may have; anything else is refused (a role is shown as a label).
MESSAGE_ROLES = ("system", "user", "assistant")
# Which output a judge saw in the first position: "AB" the row's first, "BA" its second.
JUDGE_ORDERS = ("AB", "BA")
# A rubric criterion's reason field: none, optional, or required with a preference (A or B
# better; optional with "about the same": annotation/rubrics.answers_from_screen).
REASON_MODES = ("off", "optional", "required")
MAX_CRITERIA = 8
# An item's kind of prompt (``prompt_kind``): the active design's prompt-kind model uses it
# (protocol.active_ranking.fit_by_kind); every item names one or none does.
MAX_PROMPT_KIND = 100
MAX_REASON_CHARS = 1000
_CRITERION_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# A check's expected answer -> the answers it accepts, in its own order (+1 = first better).
CHECK_EXPECTED = {"first": (1,), "second": (-1,), "tie": (0,), "either": (1, -1)}

# kind -> (required fields, optional fields)
SCHEMA: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "study": (frozenset({"name"}),
              frozenset({"criterion", "criteria", *STUDY_SETTINGS})),
    "item": (frozenset({"id", "input"}), frozenset({"reference", "prompt_kind"})),
    "output": (frozenset({"item", "system", "text"}), frozenset({"sample"})),
    "metric_score": (frozenset({"item", "system", "metric", "score"}), frozenset()),
    "metric_preference": (
        frozenset({"item", "first", "second", "metric", "preference"}),
        frozenset({"judge", "prompt", "order"}),
    ),
    "human_score": (frozenset({"item", "system", "score"}), frozenset({"annotator"})),
    "human_preference": (
        frozenset({"item", "first", "second", "preference"}),
        frozenset({"annotator", "criterion", "strength", "reason"}),
    ),
    # An attention or gold check: an input, two output texts and the expected answer. Not an
    # item of the study: no system, no pair, never counted by the protocol.
    "check": (frozenset({"id", "input", "first", "second", "expected"}), frozenset({"reference"})),
}
KIND_ORDER = tuple(SCHEMA)


Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True, slots=True)
class Criterion:
    """One question of a rubric: its answers are those of its answer scale (protocol.scales):
    A / tie / B, or with ``strength`` the STRENGTH scale (much / slightly better), or the
    registered scale named by ``scale``; with a short reason "off", "optional" or "required";
    ``metric`` names the bundle metric whose labels this criterion's protocol uses (None: the
    study's metric for the first criterion, none for the others)."""

    name: str
    label: str
    strength: bool = False
    reason: str = "off"
    metric: str | None = None
    scale: str = ""

    @property
    def answer_scale(self) -> AnswerScale:
        """The answers it offers: its named scale, else STRENGTH or PLAIN by ``strength``."""
        return SCALES[self.scale] if self.scale else STRENGTH if self.strength else PLAIN

    def as_dict(self) -> dict:
        row = {"name": self.name, "label": self.label, "strength": self.strength, "reason": self.reason}
        if self.metric:
            row["metric"] = self.metric
        if self.scale:
            row["scale"] = self.scale
        return row


def parse_criteria(value) -> tuple[tuple[Criterion, ...], list[str]]:
    """A rubric's criteria from their JSON (the study line's ``criteria``, Study.criteria):
    (criteria, problems); every problem names the criterion and field at fault."""
    problems: list[str] = []
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_CRITERIA:
        return (), [f"'criteria' must be a list of 1 to {MAX_CRITERIA} criteria, got {json.dumps(value)[:80]}"]
    criteria: list[Criterion] = []
    for position, row in enumerate(value, 1):
        where = f"criterion {position}"
        if not isinstance(row, dict):
            problems.append(f"{where} must be an object with a 'name', got {json.dumps(row)[:60]}")
            continue
        unknown = sorted(set(row) - {"name", "label", "strength", "reason", "metric", "scale"})
        if unknown:
            problems.append(f"{where}: unknown field(s) {', '.join(unknown)}")
        name = row.get("name")
        if not isinstance(name, str) or not _CRITERION_NAME.fullmatch(name):
            problems.append(f"{where}: 'name' must be lower-case letters, digits and _ (at most 40, starting "
                            f"with a letter), got {json.dumps(name)}")
            continue
        where = f"criterion {name!r}"
        label = row.get("label", name)
        if not isinstance(label, str) or not label.strip() or len(label) > 200:
            problems.append(f"{where}: 'label' must be a non-empty string of at most 200 characters")
            label = name
        strength = row.get("strength", False)
        if not isinstance(strength, bool):
            problems.append(f"{where}: 'strength' must be true or false, got {json.dumps(strength)}")
        scale = row.get("scale", "")
        if scale and scale not in SCALES:
            problems.append(f"{where}: 'scale' must be one of {', '.join(map(json.dumps, SCALES))}, "
                            f"got {json.dumps(scale)}")
            scale = ""
        elif scale and "strength" in row and strength is not SCALES[scale].graded:
            problems.append(f"{where}: 'strength' is {json.dumps(strength)} but scale {scale!r} "
                            f"{'has' if SCALES[scale].graded else 'has no'} strength: leave 'strength' out")
        if scale:
            strength = SCALES[scale].graded
        reason = row.get("reason", "off")
        if reason not in REASON_MODES:
            problems.append(f"{where}: 'reason' must be one of {', '.join(map(json.dumps, REASON_MODES))}, "
                            f"got {json.dumps(reason)}")
        metric = row.get("metric")
        if metric is not None and (not isinstance(metric, str) or not metric.strip()):
            problems.append(f"{where}: 'metric' must be a metric's name, got {json.dumps(metric)}")
        if any(c.name == name for c in criteria):
            problems.append(f"{where} appears twice")
        criteria.append(Criterion(name, label.strip(), strength is True, reason if reason in REASON_MODES else "off",
                                  metric if isinstance(metric, str) and metric.strip() else None, scale))
    return tuple(criteria), problems


def messages_text(messages: tuple[Message, ...]) -> str:
    """A conversation as one plain text ("role: content" turns, blank-line separated): what
    metrics, searches and plain views use; the messages themselves are kept alongside."""
    return "\n\n".join(f"{role}: {content}" for role, content in messages)


def messages_rows(messages: tuple[Message, ...]) -> list[dict]:
    return [{"role": role, "content": content} for role, content in messages]


@dataclass(frozen=True, slots=True)
class Item:
    id: str
    input: str  # the input text; for a conversation its messages_text
    reference: str = ""
    line: int = 0
    messages: tuple[Message, ...] | None = None  # the input as a conversation, when it is one
    prompt_kind: str = ""  # the kind of prompt it is (docs/ranking.md, "Kinds of prompt"); "" none


@dataclass(frozen=True, slots=True)
class Output:
    item: str
    system: str
    text: str  # for a conversation continuation its messages_text
    sample: int = 0
    line: int = 0
    messages: tuple[Message, ...] | None = None  # the system's turns, when the output is a conversation


@dataclass(frozen=True, slots=True)
class MetricScore:
    item: str
    system: str
    metric: str
    score: float
    line: int = 0


@dataclass(frozen=True, slots=True)
class MetricPreference:
    item: str
    first: str
    second: str
    metric: str
    preference: int
    line: int = 0
    judge: str = ""   # the judge model, e.g. "gpt-3.5-turbo"
    prompt: str = ""  # the judge's prompt (its name or its text)
    order: str = ""   # "AB" / "BA": which output the judge saw first; "" unknown


@dataclass(frozen=True, slots=True)
class HumanScore:
    item: str
    system: str
    score: float
    annotator: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class HumanPreference:
    item: str
    first: str
    second: str
    preference: int
    annotator: str = ""
    line: int = 0
    criterion: str = ""     # a rubric study: which criterion (one line per criterion)
    strength: int = 0       # with a strength scale: 1 slightly, 2 much better (0: not given / tie)
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    input: str
    first: str
    second: str
    expected: str  # a key of CHECK_EXPECTED
    reference: str = ""
    line: int = 0

    @property
    def accepted(self) -> tuple[int, ...]:
        return CHECK_EXPECTED[self.expected]


@dataclass(frozen=True, slots=True)
class BundleProblem:
    line: int  # 1-based; 0 for problems of the file as a whole
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class BundleError(ValueError):
    """The bundle is invalid; ``problems`` lists every problem found, in line order."""

    def __init__(self, problems: list[BundleProblem], total: int | None = None):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        shown = "\n".join(str(p) for p in problems)
        more = self.total - len(problems)
        suffix = f"\n... and {more} more problems" if more > 0 else ""
        # The files may be a table or a tool's output, not a bundle: say what failed, not what they are.
        counted = "1 problem" if self.total == 1 else f"{self.total} problems"
        super().__init__(f"cannot import the study ({counted}):\n{shown}{suffix}")


@dataclass(frozen=True)
class Bundle:
    """A validated study bundle. Row tuples keep file order; ``line`` fields point into it."""

    study: dict
    items: tuple[Item, ...]
    outputs: tuple[Output, ...]
    metric_scores: tuple[MetricScore, ...] = ()
    metric_preferences: tuple[MetricPreference, ...] = ()
    human_scores: tuple[HumanScore, ...] = ()
    human_preferences: tuple[HumanPreference, ...] = ()
    checks: tuple[Check, ...] = ()
    _systems: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def systems(self) -> tuple[str, ...]:
        return self._systems or tuple(sorted({o.system for o in self.outputs}))

    def with_systems(self, systems: Iterable[str]) -> Bundle:
        """This bundle listing ``systems`` (sorted) as its systems: a study's bundle cut down to
        some of its items still lists every system of the study. They must include every system
        with an output here (ValueError naming those left out)."""
        listed = tuple(sorted(set(systems)))
        left_out = sorted({o.system for o in self.outputs} - set(listed))
        if left_out:
            raise ValueError(f"systems with outputs in the bundle are not listed: {', '.join(left_out)}")
        return dataclasses.replace(self, _systems=listed)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(
            sorted({r.metric for r in self.metric_scores} | {r.metric for r in self.metric_preferences})
        )

    def metric_kind(self, metric: str) -> str:
        """``"score"`` or ``"preference"``; ValueError naming the known metrics otherwise."""
        if any(r.metric == metric for r in self.metric_scores):
            return "score"
        if any(r.metric == metric for r in self.metric_preferences):
            return "preference"
        raise ValueError(f"unknown metric {metric!r}; the bundle has: {', '.join(self.metrics) or 'none'}")

    def line_count(self) -> int:
        return 1 + sum(
            len(rows)
            for rows in (
                self.items,
                self.outputs,
                self.metric_scores,
                self.metric_preferences,
                self.human_scores,
                self.human_preferences,
                self.checks,
            )
        )


@dataclass(frozen=True)
class BundleLimits:
    """What a bundle may hold, checked while it is read as a stream (nothing larger than one
    line is ever held before these are checked), so a small gzip cannot exhaust a process.

    ``max_bytes``: the file, compressed and decompressed; ``max_lines``: physical lines, blank
    ones included; ``max_line_bytes``: one line; ``max_rows``: rows (non-blank lines), what the
    parsed bundle keeps in memory; ``max_depth``: JSON nesting of a line (bundle rows are flat
    objects: 1; a deeper value is refused before ``json.loads`` could recurse into it).
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = 2_000_000
    max_line_bytes: int = 8 * 1024 * 1024
    max_rows: int = 1_000_000
    max_depth: int = 8


def _too_large(what: str, line: int = 0) -> BundleError:
    return BundleError([BundleProblem(line, f"file too large: {what}")])


class _CountingReader(io.RawIOBase):
    """The raw file, refusing to be read past ``limit`` bytes (the compressed size limit)."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.stream, self.limit, self.count = stream, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise _too_large(f"more than {self.limit} bytes")
        buffer[:len(data)] = data
        return len(data)


def _open(source: str | os.PathLike | bytes | BinaryIO) -> tuple[BinaryIO, bool]:
    """A binary stream of ``source`` and whether it is ours to close."""
    if isinstance(source, (bytes, bytearray)):
        return io.BytesIO(source), True
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise BundleError([BundleProblem(0, f"no such file: {path}")])
        return path.open("rb"), True
    return source, False


def _nested_deeper_than(text: str, limit: int) -> bool:
    """Whether a JSON line nests arrays or objects deeper than ``limit`` (strings skipped).

    Fast in the usual case: a line with at most ``limit`` opening brackets cannot be deeper."""
    if text.count("{") + text.count("[") <= limit:
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')  # possessive: no backtracking on a long line
_BRACKETS = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _unstorable(value: str) -> str | None:
    """What in ``value`` no database text can hold, named for a problem, else None: a NUL
    character (PostgreSQL's text and jsonb refuse it) or a lone surrogate (not Unicode text:
    it cannot be encoded as UTF-8 for any database). json.loads makes them only from escapes."""
    if "\x00" in value:
        return "a NUL character (\\u0000), which no text can store"
    surrogate = _SURROGATE.search(value)
    if surrogate:
        return f"a lone surrogate (\\u{ord(surrogate.group()):04x}), which is not Unicode text"
    return None


def _unstorable_field(obj) -> tuple[str | None, bool]:
    """The problem of the first string of a parsed line (a field name, or a field's value at any
    depth) that no database can store (``_unstorable``), else None; and whether it is a field
    name (the line is then read no further: no schema field has such a name)."""
    def inner(value) -> str | None:
        if isinstance(value, str):
            return _unstorable(value)
        if isinstance(value, dict):
            return next(filter(None, (inner(k) or inner(v) for k, v in value.items())), None)
        if isinstance(value, list):
            return next(filter(None, map(inner, value)), None)
        return None

    if not isinstance(obj, dict):
        found = inner(obj)
        return (found and f"the line holds {found}; remove it"), True
    for key, value in obj.items():
        if _unstorable(key):
            return f"a field name ({json.dumps(key)}) holds {_unstorable(key)}; remove it", True
        found = inner(value)
        if found:
            return f"field {key!r} holds {found}; remove it", False
    return None, False


class _Checker:
    """Collects problems while rows are parsed; stops recording (but keeps counting) at a cap."""

    def __init__(self) -> None:
        self.problems: list[BundleProblem] = []
        self.total = 0

    def add(self, line: int, message: str) -> None:
        self.total += 1
        # A problem of the file as a whole (line 0: no study line, ...) is always kept: it is
        # often the one that explains the others.
        if len(self.problems) < MAX_REPORTED_PROBLEMS or line == 0:
            self.problems.append(BundleProblem(line, message))


def _text(obj: dict, key: str, line: int, check: _Checker, *, allow_empty: bool = False,
          allow_null: bool = True) -> str | None:
    """The string field ``key``; empty (or blank) only when ``allow_empty``, and then ``null``
    reads as "" unless ``allow_null`` is False."""
    value = obj.get(key)
    if value is None and allow_empty and allow_null:
        return ""
    if not isinstance(value, str):
        check.add(line, f"field {key!r} must be a string, got {type(value).__name__}")
        return None
    if not allow_empty and not value.strip():
        check.add(line, f"field {key!r} is empty")
        return None
    return value


def _prompt_kind(obj: dict, line: int, check: _Checker) -> str:
    """An item's optional ``prompt_kind``: a non-blank string of at most MAX_PROMPT_KIND
    characters ("" when the line has none)."""
    if "prompt_kind" not in obj:
        return ""
    value = _text(obj, "prompt_kind", line, check)
    if value is not None and len(value) > MAX_PROMPT_KIND:
        check.add(line, f"field 'prompt_kind' is {len(value)} characters long, at most {MAX_PROMPT_KIND}")
        return ""
    return value or ""


def _name(obj: dict, key: str, line: int, check: _Checker) -> str | None:
    """A name field (an item's id, a system, a metric), as ``_text``, interned: one string per
    name, not one per row that repeats it (800,000 rows name 2,200 items and systems at 200
    systems x 2,000 items: about 100 MB of copies)."""
    value = _text(obj, key, line, check)
    return None if value is None else sys.intern(value)


def _number(obj: dict, key: str, line: int, check: _Checker) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        check.add(line, f"field {key!r} must be a number, got {json.dumps(value)}")
        return None
    if not math.isfinite(value):
        check.add(line, f"field {key!r} is not a finite number ({value})")
        return None
    return float(value)


def _preference(obj: dict, line: int, check: _Checker) -> int | None:
    value = obj.get("preference")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in (-1, 0, 1):
        check.add(line, f"field 'preference' must be -1, 0 or 1, got {json.dumps(value)}")
        return None
    return int(value)


def _parse_study(obj: dict, line: int, check: _Checker) -> dict:
    study: dict = {}
    name = _text(obj, "name", line, check)
    if name is not None:
        study["name"] = name
    if "criterion" in obj:
        value = _text(obj, "criterion", line, check, allow_empty=True)
        if value is not None:
            study["criterion"] = value
    if "criteria" in obj:
        criteria, problems = parse_criteria(obj["criteria"])
        for problem in problems:
            check.add(line, f"study: {problem}")
        if not problems:
            study["criteria"] = [c.as_dict() for c in criteria]
    for key, setting in STUDY_SETTINGS.items():
        if key not in obj:
            continue
        problem = setting.problem(obj[key], subject=f"study setting {key!r}")
        if problem:
            check.add(line, problem)
        else:
            study[key] = obj[key]
    for problem in cross_problems(study).values():
        check.add(line, f"study: {problem}")
    return study


def parse_bundle_lines(lines: Iterable[tuple[int, str]]) -> Bundle:
    """Validate ``(line_number, text)`` pairs into a :class:`Bundle` or raise BundleError."""
    check = _Checker()
    study: dict | None = None
    study_line = 0
    rows: dict[str, list] = {kind: [] for kind in KIND_ORDER if kind != "study"}
    for number, text in lines:
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            check.add(number, f"not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            check.add(number, f"not valid JSON ({exc})")
            continue
        # NUL and lone surrogates reach a string only as \u escapes: most lines skip the walk. A
        # line with one is read on (its references checked) but the bundle is refused.
        unstorable, skip = _unstorable_field(obj) if "\\u" in text else (None, False)
        if unstorable:
            check.add(number, unstorable)
            if skip:
                continue
        if not isinstance(obj, dict):
            check.add(number, f"expected a JSON object, got {type(obj).__name__}")
            continue
        kind = obj.get("kind")
        if kind not in SCHEMA:
            known = ", ".join(KIND_ORDER)
            if "kind" not in obj:
                check.add(number, f"no field 'kind' (each line says what it is: one of {known})")
            else:
                check.add(number, f"unknown kind {json.dumps(kind)} (expected one of: {known})")
            continue
        fast = _FAST_ROWS.get(kind)
        if fast is not None:
            parsed = fast(obj, number)
            if parsed is not None:
                rows[kind].append(parsed)
                continue
        required, optional = SCHEMA[kind]
        present = set(obj) - {"kind"}
        missing = sorted(required - present)
        unknown = sorted(present - required - optional)
        if missing:
            check.add(number, f"{kind}: missing field(s) {', '.join(missing)}")
        if unknown:
            check.add(number, f"{kind}: unknown field(s) {', '.join(unknown)}")
        if missing:
            continue
        if kind == "study":
            if study is not None:
                check.add(number, f"second study line (the first is on line {study_line})")
                continue
            study, study_line = _parse_study(obj, number, check), number
            continue
        parsed = _parse_row(kind, obj, number, check)
        if parsed is not None:
            # Kept even when a field was bad, so its references are checked too; a bundle
            # with any problem is never returned.
            rows[kind].append(parsed)
    if study is None:
        check.add(0, "no study line ({\"kind\":\"study\", \"name\": ...})")
    bundle = Bundle(
        study=study or {},
        items=tuple(rows["item"]),
        outputs=tuple(rows["output"]),
        metric_scores=tuple(rows["metric_score"]),
        metric_preferences=tuple(rows["metric_preference"]),
        human_scores=tuple(rows["human_score"]),
        human_preferences=tuple(rows["human_preference"]),
        checks=tuple(rows["check"]),
    )
    _check_references(bundle, check)
    if check.total:
        check.problems.sort(key=lambda p: p.line)
        raise BundleError(check.problems, check.total)
    return Bundle(**{**bundle.__dict__, "_systems": tuple(sorted({o.system for o in bundle.outputs}))})


def _fast_output(obj: dict, line: int) -> Output | None:
    """A valid plain output line's row, read without the per-field checks' calls (outputs and
    metric scores are most of a large bundle's rows: 800,000 at 200 systems x 2,000 items);
    None when the line needs them (anything else, or anything wrong: ``_parse_row`` reads it and
    names its problems)."""
    item, system, text = obj.get("item"), obj.get("system"), obj.get("text")
    sample = obj.get("sample", 0)
    if (type(item) is str and type(system) is str and type(text) is str and type(sample) is int and sample >= 0
            and item.strip() and system.strip() and obj.keys() <= _OUTPUT_FIELDS):
        return Output(sys.intern(item), sys.intern(system), text, sample, line)
    return None


def _fast_metric_score(obj: dict, line: int) -> MetricScore | None:
    """A valid metric_score line's row, as ``_fast_output`` (a float score; an integer one, which
    may be too large for a float, takes ``_parse_row``)."""
    item, system, metric, score = obj.get("item"), obj.get("system"), obj.get("metric"), obj.get("score")
    if (type(item) is str and type(system) is str and type(metric) is str and type(score) is float
            and math.isfinite(score) and item.strip() and system.strip() and metric.strip()
            and len(obj) == 5):  # kind, item, system, metric, score: nothing else
        return MetricScore(sys.intern(item), sys.intern(system), sys.intern(metric), score, line)
    return None


_OUTPUT_FIELDS = frozenset({"kind", *SCHEMA["output"][0], *SCHEMA["output"][1]})
_FAST_ROWS = {"output": _fast_output, "metric_score": _fast_metric_score}


def _parse_row(kind: str, obj: dict, line: int, check: _Checker):
    if kind == "check":
        expected = obj.get("expected")
        if expected not in CHECK_EXPECTED:
            check.add(line, f"field 'expected' must be one of {', '.join(map(json.dumps, CHECK_EXPECTED))}, "
                            f"got {json.dumps(expected)}")
        return Check(_text(obj, "id", line, check), _text(obj, "input", line, check),
                     _text(obj, "first", line, check, allow_empty=True, allow_null=False),
                     _text(obj, "second", line, check, allow_empty=True, allow_null=False),
                     expected if expected in CHECK_EXPECTED else "first",
                     _text(obj, "reference", line, check, allow_empty=True) or "", line)
    item = _name(obj, "item" if kind != "item" else "id", line, check)
    if kind == "item":
        messages = None
        if isinstance(obj.get("input"), list):
            messages = _messages(obj, "input", line, check)
            text = messages_text(messages) if messages is not None else None
            if messages is not None and not any(content.strip() for _, content in messages):
                check.add(line, "field 'input' is a conversation with no content")
        else:
            text = _text(obj, "input", line, check)
        reference = _text(obj, "reference", line, check, allow_empty=True)
        return Item(item, text, reference or "", line, messages, _prompt_kind(obj, line, check))
    if kind == "output":
        system = _name(obj, "system", line, check)
        messages = None
        if isinstance(obj.get("text"), list):
            messages = _messages(obj, "text", line, check)
            text = messages_text(messages) if messages is not None else None
        else:
            # An empty generation is real data (a system that answered nothing), so it may be
            # judged; it must still be a string, so a missing text (null) is not mistaken for one.
            text = _text(obj, "text", line, check, allow_empty=True, allow_null=False)
        sample = obj.get("sample", 0)
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            check.add(line, f"field 'sample' must be a whole number >= 0, got {json.dumps(sample)}")
            return None
        return Output(item, system, text, sample, line, messages)
    if kind in ("metric_score", "human_score"):
        system = _name(obj, "system", line, check)
        score = _number(obj, "score", line, check)
        if kind == "metric_score":
            return MetricScore(item, system, _name(obj, "metric", line, check), score, line)
        return HumanScore(item, system, score, _annotator(obj, line, check), line)
    first = _name(obj, "first", line, check)
    second = _name(obj, "second", line, check)
    preference = _preference(obj, line, check)
    if first is not None and first == second:
        check.add(line, f"first and second are the same system {first!r}")
    if kind == "metric_preference":
        judge = _text(obj, "judge", line, check) if "judge" in obj else ""
        prompt = _text(obj, "prompt", line, check) if "prompt" in obj else ""
        order = obj.get("order", "")
        if "order" in obj and order not in JUDGE_ORDERS:
            check.add(line, f"field 'order' must be one of {', '.join(map(json.dumps, JUDGE_ORDERS))} "
                            f"(which output the judge saw first), got {json.dumps(order)}")
            order = ""
        return MetricPreference(item, first, second, _name(obj, "metric", line, check), preference, line,
                                judge or "", prompt or "", order)
    criterion = _text(obj, "criterion", line, check) if "criterion" in obj else ""
    strength = obj.get("strength", 0)
    if "strength" in obj and (isinstance(strength, bool) or not isinstance(strength, int) or strength < 1
                              or preference == 0):
        check.add(line, f"field 'strength' must be 1 (slightly) or more (its criterion's scale says how far it "
                        f"goes) on a preference of -1 or 1, got {json.dumps(strength)}"
                        + (" on a tie" if preference == 0 else ""))
        strength = 0
    reason = obj.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        check.add(line, f"field 'reason' must be a string of at most {MAX_REASON_CHARS} characters")
        reason = ""
    return HumanPreference(item, first, second, preference, _annotator(obj, line, check), line,
                           criterion or "", int(strength), reason.strip())


def _messages(obj: dict, key: str, line: int, check: _Checker) -> tuple[Message, ...] | None:
    """A conversation field: a non-empty list of {"role", "content"} objects, each role one of
    MESSAGE_ROLES and each content a string; None (and a problem recorded) otherwise."""
    value = obj[key]
    if not value:
        check.add(line, f"field {key!r} is an empty conversation (a list needs at least one message)")
        return None
    messages: list[Message] = []
    ok = True
    for n, message in enumerate(value, 1):
        where = f"field {key!r} message {n}"
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            got = sorted(message) if isinstance(message, dict) else type(message).__name__
            check.add(line, f"{where}: must be an object with exactly 'role' and 'content', got {got}")
            ok = False
            continue
        role, content = message["role"], message["content"]
        if role not in MESSAGE_ROLES:
            check.add(line, f"{where}: role must be one of {', '.join(MESSAGE_ROLES)}, got {json.dumps(role)}")
            ok = False
        if not isinstance(content, str):
            check.add(line, f"{where}: content must be a string, got {type(content).__name__}")
            ok = False
        if ok:
            messages.append((role, content))
    return tuple(messages) if ok else None


def _annotator(obj: dict, line: int, check: _Checker) -> str:
    if "annotator" not in obj:
        return ""
    value = obj["annotator"]
    if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).strip():
        return str(value)
    check.add(line, f"field 'annotator' must be a non-empty string, got {json.dumps(value)}")
    return ""


class _Codes:
    """Names (item ids, systems, samples, metrics: anything hashable, None for a field that was
    bad) -> dense integer codes, in the order first seen."""

    def __init__(self) -> None:
        self.code: dict = {}

    def of(self, values: Iterable) -> np.ndarray:
        code = self.code
        return np.fromiter((code.setdefault(value, len(code)) for value in values), np.int64)

    def codes(self, values: Iterable) -> Iterator[int]:
        return (self.code[value] for value in values)

    def names(self, codes: np.ndarray) -> list:
        by_code = list(self.code)
        return [by_code[c] for c in codes.tolist()]

    def known(self, codes: np.ndarray, names) -> np.ndarray:
        """Whether each code's name is in ``names``."""
        mask = np.zeros(len(self.code), bool)
        mask[[c for name, c in self.code.items() if name in names]] = True
        return mask[codes]


def _pair_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One integer per (first, second) of codes (each below 2**31: a bundle has far fewer rows);
    ``is_shown`` in ``_check_references`` computes the same for one pair."""
    return first * (1 << 31) + second


def _repeats(lines: np.ndarray, *columns: np.ndarray) -> Iterator[tuple[int, int]]:
    """(index, line of its key's first row) of every row whose key (its values in ``columns``)
    an earlier row has; sorted once, no set of keys."""
    if not len(lines):
        return iter(())
    order = np.lexsort((lines, *reversed(columns)))
    same = np.ones(len(order), bool)
    same[0] = False
    for column in columns:
        ordered = column[order]
        same[1:] &= ordered[1:] == ordered[:-1]
    group = np.cumsum(~same) - 1
    first_lines = lines[order][~same][group]
    return zip(order[same].tolist(), first_lines[same].tolist())


def _add_in_line_order(check: _Checker, found: list[tuple[int, str]]) -> None:
    """Record ``found`` (line, message) as a row-by-row walk would have: in line order, a line's
    problems in the order found (what the problems' cap keeps depends on it)."""
    for line, message in sorted(found, key=lambda problem: problem[0]):
        check.add(line, message)


def _check_references(bundle: Bundle, check: _Checker) -> None:
    def unique(row, key: tuple | str, seen: dict, what: str) -> None:
        if key in seen:
            check.add(row.line, f"duplicate {what} (first on line {seen[key]})")
        else:
            seen[key] = row.line

    items: dict[str, int] = {}
    for row in bundle.items:
        if row.id is not None:
            unique(row, row.id, items, f"item id {row.id!r}")
    kinded = next((row for row in bundle.items if row.prompt_kind), None)
    if kinded is not None:
        for row in bundle.items:
            if not row.prompt_kind:
                check.add(row.line, f"item {row.id!r} has no 'prompt_kind' while item {kinded.id!r} (line "
                                    f"{kinded.line}) has one: every item names its kind of prompt or none does")
    checks: dict[str, int] = {}
    for row in bundle.checks:
        if row.id is not None:
            unique(row, row.id, checks, f"check id {row.id!r}")
    # The outputs' and metric scores' keys as integer codes in numpy arrays (the rows of a large
    # bundle are mostly these: 400,000 of each at 200 systems x 2,000 items, whose sets of
    # tuples added about 115 MB to the parse's peak: docs/benchmarks.md, "Import").
    names = _Codes()
    outputs = bundle.outputs
    output_lines = np.fromiter((row.line for row in outputs), np.int64, len(outputs))
    item_codes = names.of(row.item for row in outputs)
    system_codes = names.of(row.system for row in outputs)
    samples = _Codes().of(row.sample for row in outputs)
    systems = set(names.names(np.unique(system_codes)))
    found: list[tuple[int, str]] = []
    for index in np.flatnonzero(~names.known(item_codes, items)).tolist():
        row = outputs[index]
        if isinstance(row.item, str):
            found.append((row.line, f"output refers to unknown item {row.item!r}"))
    for index, first in _repeats(output_lines, item_codes, system_codes, samples):
        row = outputs[index]
        found.append((row.line, f"duplicate output for item {row.item!r}, system {row.system!r}, sample "
                                f"{row.sample} (first on line {first})"))
    shown = np.unique(_pair_codes(item_codes, system_codes))  # (item, system) of every output
    _add_in_line_order(check, found)

    # The rows of the other kinds are checked one by one: a set of the outputs' codes (Python
    # ints, no tuples) when there are any, as a search in ``shown`` per row costs microseconds.
    others = len(bundle.metric_preferences) + len(bundle.human_scores) + len(bundle.human_preferences)
    shown_codes = set(shown.tolist()) if others else set()

    def is_shown(item: str, system: str) -> bool:
        code = names.code
        return item in code and system in code and code[item] * (1 << 31) + code[system] in shown_codes

    def refs(row, fields: tuple[str, ...]) -> bool:
        ok = True
        if isinstance(row.item, str) and row.item not in items:
            check.add(row.line, f"refers to unknown item {row.item!r}")
            ok = False
        for name in fields:
            system = getattr(row, name)
            if not isinstance(system, str):
                continue
            if system not in systems:
                check.add(row.line, f"system {system!r} has no outputs (field {name!r})")
                ok = False
            elif ok and not is_shown(row.item, system):
                # A rating of an output that does not exist cannot be shown or checked.
                check.add(row.line, f"system {system!r} has no output for item {row.item!r} (field {name!r})")
                ok = False
        return ok

    # Metric scores: the same checks as ``refs`` and their duplicates, over the arrays.
    scores = bundle.metric_scores
    score_lines = np.fromiter((row.line for row in scores), np.int64, len(scores))
    score_items = names.of(row.item for row in scores)
    score_systems = names.of(row.system for row in scores)
    metric_codes = _Codes().of(row.metric for row in scores)
    known_item = names.known(score_items, items)
    has_outputs = np.isin(score_systems, np.fromiter(names.codes(systems), np.int64, len(systems)))
    codes = _pair_codes(score_items, score_systems)
    position = np.minimum(np.searchsorted(shown, codes), max(len(shown) - 1, 0))
    has_output = (shown[position] == codes) if len(shown) else np.zeros(len(scores), bool)
    found = []
    for index in np.flatnonzero(~(known_item & has_outputs & has_output)).tolist():
        row = scores[index]
        if isinstance(row.item, str) and not known_item[index]:
            found.append((row.line, f"refers to unknown item {row.item!r}"))
        if not isinstance(row.system, str):
            continue
        if not has_outputs[index]:
            found.append((row.line, f"system {row.system!r} has no outputs (field 'system')"))
        elif (known_item[index] or not isinstance(row.item, str)) and not has_output[index]:
            found.append((row.line, f"system {row.system!r} has no output for item {row.item!r} (field 'system')"))
    for index, first in _repeats(score_lines, score_items, score_systems, metric_codes):
        row = scores[index]
        found.append((row.line, f"duplicate metric_score for item {row.item!r}, system {row.system!r}, metric "
                                f"{row.metric!r} (first on line {first})"))
    _add_in_line_order(check, found)
    seen: dict = {}
    score_metrics: dict[str, int] = {}
    for row in scores:
        score_metrics.setdefault(row.metric, row.line)
    for row in bundle.metric_preferences:
        refs(row, ("first", "second"))
        if row.metric in score_metrics:
            check.add(
                row.line,
                f"metric {row.metric!r} has metric_score rows (line {score_metrics[row.metric]}) "
                "and metric_preference rows; a metric is one or the other",
            )
        pair = tuple(sorted((row.first, row.second)))
        # Both orders of a judge may be given: the position the judge saw is part of the key.
        shown_first = "" if not row.order else (row.first if row.order == "AB" else row.second)
        unique(row, ("mp", row.item, pair, row.metric, shown_first), seen,
               f"metric_preference for item {row.item!r}, pair {pair[0]!r}/{pair[1]!r}, metric {row.metric!r}"
               + (f", {shown_first!r} shown first" if shown_first else ""))
    for row in bundle.human_scores:
        refs(row, ("system",))
        if row.annotator:
            unique(row, ("hs", row.item, row.system, row.annotator), seen,
                   f"human_score for item {row.item!r}, system {row.system!r}, annotator {row.annotator!r}")
    criteria = {c.name: c for c in parse_criteria(bundle.study["criteria"])[0]} if bundle.study.get("criteria") else {}
    answered: dict[tuple, set] = {}
    for row in bundle.human_preferences:
        refs(row, ("first", "second"))
        pair = tuple(sorted((row.first, row.second)))
        if criteria:
            if row.criterion not in criteria:
                check.add(row.line, f"human_preference: field 'criterion' must name one of the study's criteria "
                                    f"({', '.join(criteria)}), got {json.dumps(row.criterion or None)}")
            elif row.strength and not criteria[row.criterion].answer_scale.graded:
                check.add(row.line, f"human_preference: criterion {row.criterion!r} has no strength scale")
            elif row.strength and row.strength not in criteria[row.criterion].answer_scale.strengths:
                strengths = criteria[row.criterion].answer_scale.strengths
                check.add(row.line, f"human_preference: criterion {row.criterion!r} takes a strength of "
                                    f"{strengths[0]} to {strengths[-1]}, got {row.strength}")
            if not row.annotator:
                check.add(row.line, "human_preference: a rubric study's preferences need an 'annotator' "
                                    "(one judgement is one annotator's answers to every criterion)")
            answered.setdefault((row.item, pair, row.annotator), set()).add(row.criterion)
        elif row.criterion or row.strength or row.reason:
            check.add(row.line, "human_preference: 'criterion', 'strength' and 'reason' need the study's 'criteria'")
        if row.annotator:
            unique(row, ("hp", row.item, pair, row.annotator, row.criterion), seen,
                   f"human_preference for item {row.item!r}, pair {pair[0]!r}/{pair[1]!r}, "
                   f"annotator {row.annotator!r}" + (f", criterion {row.criterion!r}" if row.criterion else ""))
    if criteria:
        lines = {}
        for row in bundle.human_preferences:
            lines.setdefault((row.item, tuple(sorted((row.first, row.second))), row.annotator), row.line)
        for key, names in answered.items():
            missing = [name for name in criteria if name not in names]
            if missing:
                check.add(lines[key], f"human_preference: annotator {key[2]!r} on item {key[0]!r}, pair "
                                      f"{key[1][0]!r}/{key[1][1]!r} answers no criterion {', '.join(missing)} "
                                      "(a rubric judgement answers every criterion)")
        metrics = {r.metric for r in bundle.metric_scores} | {r.metric for r in bundle.metric_preferences}
        for c in criteria.values():
            if c.metric and c.metric not in metrics:
                check.add(0, f"study: criterion {c.name!r} names metric {c.metric!r}, which no "
                             "metric_score or metric_preference line has")


def iter_bundle_lines(source: str | os.PathLike | bytes | BinaryIO, *, max_bytes: int | None = None,
                      limits: BundleLimits | None = None) -> Iterator[tuple[int, str]]:
    """Decompress if gzipped and yield ``(line_number, text)`` as the file is read.

    BundleError when the file is unreadable or breaks ``limits`` (``max_bytes`` overrides
    theirs): too many bytes, lines or rows, a line too long or nested too deeply. Each line is
    read with a bounded ``readline``, so memory stays at one line whatever the file holds.
    """
    limits = limits or BundleLimits()
    if max_bytes is not None:
        limits = dataclasses.replace(limits, max_bytes=max_bytes)
    stream, ours = _open(source)
    try:
        raw = io.BufferedReader(_CountingReader(stream, limits.max_bytes))
        text_stream: BinaryIO = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
        yield from _lines(text_stream, limits)
    finally:
        if ours:
            stream.close()


def _lines(stream: BinaryIO, limits: BundleLimits) -> Iterator[tuple[int, str]]:
    total = rows = 0
    number = 0
    while True:
        try:
            data = stream.readline(limits.max_line_bytes + 2)
        except (OSError, EOFError, zlib.error) as exc:
            raise BundleError([BundleProblem(0, f"file is not valid gzip: {exc}")]) from None
        if not data:
            return
        number += 1
        total += len(data)
        if total > limits.max_bytes:
            raise _too_large(f"more than {limits.max_bytes} bytes (decompressed)", number)
        if number > limits.max_lines:
            raise _too_large(f"more than {limits.max_lines} lines", number)
        line = data.rstrip(b"\r\n") if data.endswith(b"\n") else data
        if len(line) > limits.max_line_bytes:
            raise _too_large(f"line longer than {limits.max_line_bytes} bytes", number)
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BundleError([BundleProblem(number, f"not UTF-8 text (byte {exc.start})")]) from None
        if text.strip():
            rows += 1
            if rows > limits.max_rows:
                raise _too_large(f"more than {limits.max_rows} rows", number)
            if _nested_deeper_than(text, limits.max_depth):
                raise BundleError([BundleProblem(number, f"JSON nested deeper than {limits.max_depth} levels "
                                                         "(bundle rows are flat objects)")])
        yield number, text


def read_bundle(source: str | os.PathLike | bytes | BinaryIO, *, max_bytes: int | None = None,
                limits: BundleLimits | None = None) -> Bundle:
    """Read and validate a study bundle from a path, bytes or a binary file object.

    Plain or gzipped (detected from the content, not the name), read as a stream within
    ``limits`` (:class:`BundleLimits`; ``max_bytes`` overrides theirs). Raises
    :class:`BundleError` with every problem found (each naming its line) when anything is
    wrong; a broken limit stops the reading at once and names the line.

    >>> bundle = read_bundle(b'''{"kind": "study", "name": "demo"}
    ... {"kind": "item", "id": "d1", "input": "A text."}
    ... {"kind": "output", "item": "d1", "system": "A", "text": "short"}
    ... {"kind": "output", "item": "d1", "system": "B", "text": "longer"}
    ... {"kind": "metric_score", "item": "d1", "system": "A", "metric": "len", "score": 1}
    ... {"kind": "metric_score", "item": "d1", "system": "B", "metric": "len", "score": 2}
    ... ''')
    >>> bundle.study, bundle.systems, bundle.metrics
    ({'name': 'demo'}, ('A', 'B'), ('len',))
    >>> read_bundle(b'{"kind": "study", "name": "x"}\\n{"kind": "colour"}\\n')
    Traceback (most recent call last):
    ...
    protocol.bundle.BundleError: cannot import the study (1 problem):
    line 2: unknown kind "colour" (expected one of: study, item, output, metric_score, metric_preference, human_score, human_preference, check)

    A source that can be read twice (a path, bytes, a seekable file) is read once first only
    to check the limits, parsing nothing and keeping one line at a time, so a bundle beyond a
    limit is refused before any of its rows is parsed: one row over the row limit was refused
    only after a million rows were parsed and held (docs/bundle-format.md, "Limits"). A stream
    that cannot be rewound is checked as it is parsed.
    """
    rewind = _rewind(source)
    if rewind is not None:
        for _ in iter_bundle_lines(source, max_bytes=max_bytes, limits=limits):
            pass
        rewind()
    return parse_bundle_lines(iter_bundle_lines(source, max_bytes=max_bytes, limits=limits))


def _rewind(source) -> Callable[[], None] | None:
    """How to read ``source`` again from where it is now, or None when it cannot be."""
    if isinstance(source, (bytes, bytearray, str, os.PathLike)):
        return lambda: None  # opened anew by each read
    try:
        if not source.seekable():
            return None
        start = source.tell()
    except (AttributeError, OSError, ValueError):
        return None
    return lambda: source.seek(start)


def bundle_rows(bundle: Bundle) -> Iterator[dict]:
    """The bundle as JSON-able dicts in canonical kind order (the inverse of reading)."""
    yield {"kind": "study", **bundle.study}
    for r in bundle.items:
        row = {"kind": "item", "id": r.id, "input": r.input if r.messages is None else messages_rows(r.messages)}
        if r.reference:
            row["reference"] = r.reference
        if r.prompt_kind:
            row["prompt_kind"] = r.prompt_kind
        yield row
    for r in bundle.outputs:
        yield {"kind": "output", "item": r.item, "system": r.system,
               "text": r.text if r.messages is None else messages_rows(r.messages), "sample": r.sample}
    for r in bundle.metric_scores:
        yield {"kind": "metric_score", "item": r.item, "system": r.system, "metric": r.metric, "score": r.score}
    for r in bundle.metric_preferences:
        row = {"kind": "metric_preference", "item": r.item, "first": r.first, "second": r.second,
               "metric": r.metric, "preference": r.preference}
        row.update({k: v for k, v in (("judge", r.judge), ("prompt", r.prompt), ("order", r.order)) if v})
        yield row
    for r in bundle.human_scores:
        row = {"kind": "human_score", "item": r.item, "system": r.system, "score": r.score}
        if r.annotator:
            row["annotator"] = r.annotator
        yield row
    for r in bundle.human_preferences:
        row = {"kind": "human_preference", "item": r.item, "first": r.first, "second": r.second,
               "preference": r.preference}
        if r.annotator:
            row["annotator"] = r.annotator
        row.update({k: v for k, v in (("criterion", r.criterion), ("strength", r.strength), ("reason", r.reason)) if v})
        yield row
    for r in bundle.checks:
        row = {"kind": "check", "id": r.id, "input": r.input, "first": r.first, "second": r.second,
               "expected": r.expected}
        if r.reference:
            row["reference"] = r.reference
        yield row


def write_bundle_rows(rows: Iterable[dict], path: str | os.PathLike) -> int:
    """Write dict rows as JSON Lines (gzipped, deterministically, when the name ends in .gz)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "wb") as raw:
        # mtime=0 and no file name in the header: regenerating gives byte-identical files.
        handle = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if path.suffix == ".gz" else raw
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n")
            count += 1
        if handle is not raw:
            handle.close()
    return count


def write_bundle(bundle: Bundle, path: str | os.PathLike) -> int:
    """Write ``bundle`` to ``path``; returns the number of lines written."""
    return write_bundle_rows(bundle_rows(bundle), path)
