"""Training-ready preference data from a study's judgements (issue 37): the dataset formats of
the TRL library, which every peer that exports pairwise data writes.

Formats (TRL's "Dataset formats and types"):

``trl``               standard preference: ``prompt``, ``chosen``, ``rejected`` (strings)
``trl-conversational`` conversational preference: the same three as lists of
                      ``{"role", "content"}`` messages (the prompt's turns; each answer's turns)
``kto``               unpaired preference: ``prompt``, ``completion``, ``label`` (True for the
                      preferred answer, False for the other), two rows per comparison

The rule for ties and disagreements (stated in every export's dataset card): a comparison's
counted human votes (+1 the first system better, −1 the second, 0 about the same) are merged
into one label by the sign of their mean, as every statistic of the study merges them; a
comparison whose mean is 0 (all ties, or as many votes each way) has no preferred answer and
is left out of the pairs. ``min_agreement`` leaves out comparisons whose majority has a smaller
share of the votes. Each row carries the votes (``votes_chosen``, ``votes_rejected``,
``votes_tie``), ``agreement`` (the majority's share of the votes), the two systems, the item
and, in a rubric study, the criterion. Pure functions, no Django.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FORMATS = ("trl", "trl-conversational", "kto")
Text = str | Sequence[dict]


@dataclass(frozen=True)
class ComparisonVotes:
    """One comparison of a study with its counted human votes, in canonical order (+1: the
    first system's answer is better). ``prompt``/``first_text``/``second_text``: a text, or a
    conversation's messages."""

    item: str
    prompt: Text
    first_system: str
    second_system: str
    first_text: Text
    second_text: Text
    votes: tuple[int, ...]
    criterion: str = ""


@dataclass(frozen=True)
class Verdict:
    winner: int        # +1 first, -1 second, 0 none
    chosen: int        # votes for the winner
    rejected: int      # votes for the other
    ties: int
    agreement: float   # the majority's share of every vote (ties included); 0 without a winner


def verdict(votes: Sequence[int]) -> Verdict:
    """The comparison's merged label (the sign of the votes' mean) and its support."""
    first, second = sum(v > 0 for v in votes), sum(v < 0 for v in votes)
    ties = len(votes) - first - second
    winner = (first > second) - (first < second)
    if winner == 0:
        return Verdict(0, 0, 0, ties, 0.0)
    chosen, rejected = (first, second) if winner > 0 else (second, first)
    return Verdict(winner, chosen, rejected, ties, chosen / len(votes))


def _text(value: Text) -> str:
    if isinstance(value, str):
        return value
    return "\n\n".join(m.get("content", "") for m in value if m.get("role") == "assistant") or \
        "\n\n".join(m.get("content", "") for m in value)


def _messages(value: Text, role: str) -> list[dict]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _prompt_text(value: Text) -> str:
    if isinstance(value, str):
        return value
    return "\n\n".join(m.get("content", "") for m in value if m.get("role") != "system") or \
        "\n\n".join(m.get("content", "") for m in value)


def preference_rows(comparisons: Iterable[ComparisonVotes], *, form: str = "trl",
                    min_agreement: float = 0.0) -> tuple[list[dict], dict]:
    """The rows of ``form`` (FORMATS) and a summary: comparisons seen, with a winner, left out
    as ties or even splits, left out below ``min_agreement``, rows written."""
    if form not in FORMATS:
        raise ValueError(f"unknown format {form!r}; one of {', '.join(FORMATS)}")
    rows: list[dict] = []
    seen = ties = weak = 0
    for c in comparisons:
        if not c.votes:
            continue
        seen += 1
        v = verdict(c.votes)
        if v.winner == 0:
            ties += 1
            continue
        if v.agreement < min_agreement:
            weak += 1
            continue
        (chosen, chosen_system), (rejected, rejected_system) = (
            ((c.first_text, c.first_system), (c.second_text, c.second_system)) if v.winner > 0
            else ((c.second_text, c.second_system), (c.first_text, c.first_system)))
        extra = {"item": c.item, **({"criterion": c.criterion} if c.criterion else {}),
                 "chosen_system": chosen_system, "rejected_system": rejected_system,
                 "votes_chosen": v.chosen, "votes_rejected": v.rejected, "votes_tie": v.ties,
                 "agreement": round(v.agreement, 6)}
        if form == "trl":
            rows.append({"prompt": _prompt_text(c.prompt), "chosen": _text(chosen), "rejected": _text(rejected),
                         **extra})
        elif form == "trl-conversational":
            rows.append({"prompt": _messages(c.prompt, "user"), "chosen": _messages(chosen, "assistant"),
                         "rejected": _messages(rejected, "assistant"), **extra})
        else:
            prompt = _prompt_text(c.prompt)
            rows.append({"prompt": prompt, "completion": _text(chosen), "label": True, **extra,
                         "system": chosen_system})
            rows.append({"prompt": prompt, "completion": _text(rejected), "label": False, **extra,
                         "system": rejected_system})
    return rows, {"comparisons": seen, "with_a_winner": seen - ties - weak, "left_out_ties": ties,
                  "left_out_below_agreement": weak, "rows": len(rows)}


RULE = ("Each comparison's counted human votes (+1 for one answer, −1 for the other, 0 for about the "
        "same) are merged by the sign of their mean; a comparison whose mean is 0 (ties, or as many votes "
        "each way) has no preferred answer and is left out.")
