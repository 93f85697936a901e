"""Answer scales: the answers one criterion of a rubric offers, declared once and read by the
bundle reader (protocol.bundle), the HIT page and its keys (annotation/rubrics.py, the
template, annotate.js from the page's data attributes), the API's submit, the reader of a
judgement's answers and the export (issue 40).

A scale's points are in key order (key 1 first, A's strongest answer first): each a value as
shown (+ = the left output, A, better; 0 = about the same) and its text; a value's size is the
answer's strength, which its word names ("A much better"). A criterion picks a scale by name
(its ``scale``, or ``"strength": true`` for STRENGTH); a new scale is one ``register_scale``.

>>> STRENGTH.values
(2, 1, 0, -1, -2)
>>> STRENGTH.graded, PLAIN.graded
(True, False)
>>> STRENGTH.verdict(-1, "s1", "s2", strength=2)
's2 much better'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class AnswerScale:
    """One scale: ``name``, ``points`` ((value, text), key order) and ``words`` (strength ->
    word, for each positive value; empty for a scale without strength)."""

    name: str
    points: tuple[tuple[int, str], ...]
    words: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        values = [value for value, _ in self.points]
        strengths = sorted({abs(v) for v in values if v})
        problems = [why for why, bad in (
            ("it needs 3 to 9 points (keys 1 to 9)", not 3 <= len(values) <= 9),
            ("its values must run from A's strongest down to B's, symmetric about 0",
             values != sorted(values, reverse=True) or sorted(values) != sorted(-v for v in values) or 0 not in values),
            ("its strengths must be 1, 2, ... with a word each when it has more than one",
             strengths != list(range(1, len(strengths) + 1)) or (len(strengths) > 1 and set(self.words) != set(strengths))),
        ) if bad]
        if problems:
            raise ValueError(f"answer scale {self.name!r}: " + "; ".join(problems))
        object.__setattr__(self, "words", MappingProxyType(dict(self.words)))

    @property
    def values(self) -> tuple[int, ...]:
        """The values as shown, in key order."""
        return tuple(value for value, _ in self.points)

    @property
    def strengths(self) -> tuple[int, ...]:
        """The strengths an answer may have (() for a scale without strength)."""
        return tuple(sorted(self.words))

    @property
    def graded(self) -> bool:
        """Does an answer carry a strength (more than one step on each side)?"""
        return bool(self.words)

    def strength_of(self, value: int) -> int:
        """The strength stored with a shown answer (0 on a scale without strength)."""
        return abs(value) if self.graded else 0

    def verdict(self, value: int, first: str, second: str, strength: int = 0) -> str:
        """A canonical answer (+1: ``first`` better) with its strength, as a researcher reads it."""
        if value == 0:
            return "about the same"
        winner = first if value > 0 else second
        return f"{winner} {self.words[strength]} better" if strength in self.words else f"{winner} better"


PLAIN = AnswerScale("plain", ((1, "A is better"), (0, "About the same"), (-1, "B is better")))
STRENGTH = AnswerScale("strength", ((2, "A is much better"), (1, "A is slightly better"), (0, "About the same"),
                                    (-1, "B is slightly better"), (-2, "B is much better")),
                       words={2: "much", 1: "slightly"})

# Scale name -> AnswerScale, in the order they were registered.
SCALES: dict[str, AnswerScale] = {}


def register_scale(scale: AnswerScale) -> AnswerScale:
    """Add a scale (a name may be registered once); returns it."""
    if scale.name in SCALES:
        raise ValueError(f"answer scale {scale.name!r} is registered already")
    SCALES[scale.name] = scale
    return scale


def unregister_scale(name: str) -> None:
    """Take a scale out of the registry (a test's own scale, after the test)."""
    del SCALES[name]


register_scale(PLAIN)
register_scale(STRENGTH)
