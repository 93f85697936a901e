"""A study's rubric: the criteria one HIT answers, the shape of a judgement's answers, and a
HIT's answer as the annotate page and the API send it.

Every study has a rubric: a study without ``Study.criteria`` has one criterion (its
``criterion`` label), decided by one protocol lane from ``Judgement.value``; a rubric study
has several, each decided by its own lane (protocol.rubric) from ``Judgement.answers``.
The criteria's JSON is validated by ``protocol.bundle.parse_criteria`` (bundle, admin, API).
"""
from __future__ import annotations

from collections.abc import Mapping

from protocol.bundle import MAX_REASON_CHARS, Criterion, parse_criteria

SINGLE = "overall"
#: a one-criterion HIT's answer as sent (page and API) -> its value as shown (+1 = left better)
SHOWN_ANSWERS = {"left": 1, "tie": 0, "right": -1}


def study_rubric(study) -> tuple[Criterion, ...]:
    """The study's criteria, in order (the first is the one its summary columns show)."""
    if study.criteria:
        criteria, problems = parse_criteria(study.criteria)
        if problems:
            raise ValueError(f"study {study.slug!r} has invalid criteria: {problems[0]}")
        return criteria
    return (Criterion(name=SINGLE, label=study.criterion or "Which output is better?"),)


def is_rubric(study) -> bool:
    return bool(study.criteria)


def criterion_metrics(study) -> dict[str, str | None]:
    """criterion -> the name of the metric its protocol uses: the first criterion's own, else the
    study's metric; every other criterion its own or None (human only)."""
    criteria = study_rubric(study)
    study_metric = study.metric.name if study.metric_id else None
    return {c.name: c.metric or (study_metric if k == 0 else None) for k, c in enumerate(criteria)}


def answer_row(*, value: int, strength: int = 0, reason: str = "") -> dict:
    """One criterion's answer as stored in ``Judgement.answers`` (canonical order)."""
    row: dict = {"value": int(value)}
    if strength:
        row["strength"] = int(strength)
    if reason:
        row["reason"] = reason
    return row


def answers_from_screen(*, study, shown: Mapping[str, Mapping], swapped: bool) -> dict:
    """Canonical ``Judgement.answers`` from what the annotator chose on screen.

    shown   criterion -> {"value": one of its answer scale's values (protocol.scales), as
            shown (+ = left better), "reason": str}
    ValueError naming the criterion when one is missing, out of range or lacks a required
    reason (a preference without one; a tie needs none), or when an unknown criterion is answered.
    """
    criteria = study_rubric(study)
    names = {c.name for c in criteria}
    unknown = sorted(set(shown) - names)
    if unknown:
        raise ValueError(f"unknown criterion {unknown[0]!r}; this study asks {', '.join(sorted(names))}")
    answers = {}
    for criterion in criteria:
        given = shown.get(criterion.name)
        if given is None or given.get("value") is None:
            raise ValueError(f"choose an answer for {criterion.label!r}")
        scale = criterion.answer_scale
        value = given["value"]
        if isinstance(value, bool) or value not in scale.values:
            raise ValueError(f"{criterion.label!r}: the answer must be one of "
                             f"{', '.join(map(str, sorted(scale.values)))}, got {value!r}")
        reason = str(given.get("reason") or "").strip()
        # A reason explains a preference: "required" asks for one when one output is better
        # (any strength), not with "About the same" (issue 36; docs/bundle-format.md).
        if criterion.reason == "required" and not reason and value != 0:
            raise ValueError(f"{criterion.label!r}: give a short reason (required when one answer is better)")
        if criterion.reason == "off":
            reason = ""
        if "\x00" in reason:
            raise ValueError(f"{criterion.label!r}: the reason holds a NUL character, which no answer may contain")
        if len(reason) > MAX_REASON_CHARS:
            raise ValueError(f"{criterion.label!r}: the reason is longer than {MAX_REASON_CHARS} characters")
        sign = (value > 0) - (value < 0)
        answers[criterion.name] = answer_row(value=-sign if swapped else sign,
                                             strength=scale.strength_of(value), reason=reason)
    return answers


def lane_values(*, criteria: tuple[Criterion, ...], value: int, answers: Mapping | None) -> dict[str, int]:
    """criterion -> canonical value of one judgement, for the protocol's lanes."""
    if answers is None:
        return {criteria[0].name: value}
    return {c.name: answers[c.name]["value"] for c in criteria if c.name in answers}


def rubric_screen(study) -> list[dict]:
    """What the HIT form shows of a rubric study: each criterion with its scale and reason
    field, each answer with its key (the scale's, protocol.scales); [] for a one-criterion
    study, whose form has three buttons."""
    if not is_rubric(study):
        return []
    return [{"name": c.name, "label": c.label, "reason": c.reason,
             "scale": [{"value": value, "text": text, "key": key}
                       for key, (value, text) in enumerate(c.answer_scale.points, 1)]}
            for c in study_rubric(study)]


def rubric_keys(screen: list[dict]) -> str:
    """The digits that answer a rubric's criteria on the HIT page (its ``data-keys``, which
    annotate.js reads): the keys of its longest scale."""
    return "".join(str(option["key"]) for option in max((c["scale"] for c in screen), key=len, default=()))


def form_field(data: Mapping[str, str], name: str) -> str:
    """The HIT form's field ``name`` ("" when absent); ValueError naming the field when it holds
    a NUL character, which no database text can store (PostgreSQL refuses it: a 500 before)."""
    value = data.get(name, "")
    if "\x00" in value:
        raise ValueError(f"the field {name!r} holds a NUL character, which no answer may contain: "
                         "remove it and answer again")
    return value


def answers_from_post(study, data: Mapping[str, str]) -> dict:
    """Screen-order answers (``answers_from_screen``'s ``shown``) from the HIT form's fields:
    ``criterion-<name>`` the chosen value, ``reason-<name>`` the reason. A value that is not
    a whole number counts as not given; ValueError for a field with a NUL (``form_field``)."""
    shown = {}
    for criterion in study_rubric(study):
        raw = form_field(data, f"criterion-{criterion.name}")
        try:
            value = int(raw)
        except ValueError:
            value = None
        shown[criterion.name] = {"value": value, "reason": form_field(data, f"reason-{criterion.name}")}
    return shown


def _client_time(raw: str | None, *, below: float) -> float | None:
    """A client's time measure, or None when absent, not a number or not in [0, below)."""
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value < below else None


def hit_answer_from_post(study, data: Mapping[str, str]) -> dict:
    """The annotate page's HIT form as ``services.hits.judgement_submit``'s keyword arguments
    (but the assignment and annotator): ``answer`` (left / tie / right) or, in a rubric study,
    the criteria's fields (``answers_from_post``); ``key``; the browser's ``seconds`` on task
    and ``read_ms`` to the first answer (absent or implausible: None). ValueError naming a
    field that holds a NUL character (``form_field``)."""
    read_ms = _client_time(form_field(data, "read_ms"), below=86_400_000)
    return {"shown_value": SHOWN_ANSWERS.get(form_field(data, "answer"), 99),
            "answers": answers_from_post(study, data) if is_rubric(study) else None,
            "idempotency_key": form_field(data, "key"),
            "seconds_on_task": _client_time(form_field(data, "seconds"), below=86_400),
            "read_seconds": None if read_ms is None else read_ms / 1000}
