"""The style-controlled leaderboard of a study (protocol/style_control.py, issue 39): every
counted human judgement as a vote with the style of the two answers shown and the side the
first system's answer was on, fitted with the Arena's Bradley–Terry model with covariates."""
from __future__ import annotations

import numpy as np

from protocol.style_control import (
    ARENA_SCALE,
    DEFAULT_LEVEL,
    FEATURE_UNITS,
    STYLE_FEATURES,
    fit_style_leaderboard,
    style_counts,
    win_chance,
)

from ..models import Output, Study
from .quality import counted_judgements

__all__ = ["FEATURE_WORDS", "study_style_leaderboard", "study_style_votes", "style_leaderboard_bars", "style_penalty"]

# What each covariate is, for a reader: (name in the table, who wins more often when the
# effect is positive, when it is negative, the amount an effect is stated per).
FEATURE_WORDS = {
    "words": ("answer length", "Longer answers win", "Shorter answers win", "100 more words"),
    "headers": ("markdown headers", "Answers with more headers win", "Answers with fewer headers win",
                "one more header"),
    "list_items": ("list items", "Answers with more list items win", "Answers with fewer list items win",
                   "one more list item"),
    "bold": ("bold text", "Answers with more bold spans win", "Answers with fewer bold spans win",
             "one more bold span"),
    "position": ("position shown", "The answer shown on the left wins", "The answer shown on the right wins",
                 "being shown on the left"),
}

# The L2 penalty on the standardised effects, per vote: arena-rank's loss is a mean over votes,
# so its default 1.0 is a prior worth n votes and shrinks every effect about five-fold at any
# sample size (measured, tests/protocol/test_style_control.py); 1 / n is a standard normal
# prior on the effect of one standard deviation, negligible beside the data.
def style_penalty(votes: int) -> float:
    return 1.0 / votes


def study_style_votes(*, study: Study) -> dict:
    """Every counted judgement as a vote: ``first``, ``second`` (n,) system names in canonical
    order, ``outcome`` (n,) 1 first better / 0.5 tie / 0 second better, ``features`` (n, F)
    in STYLE_FEATURES order (the first's shown answer minus the second's; position +1 first
    shown on the left, −1 on the right, 0 unknown: an imported judgement), ``items`` (n,) the
    item of each vote (the sandwich's clusters)."""
    rows = list(counted_judgements(study=study).order_by("id").values_list(
        "comparison__first__name", "comparison__second__name", "comparison__item_id", "comparison__first_id",
        "comparison__second_id", "value", "assignment__shown_swapped"))
    texts: dict[tuple[int, int], tuple[int, ...]] = {}
    wanted = {(item, system) for _, _, item, a, b, _, _ in rows for system in (a, b)}
    shown: dict[tuple[int, int], int] = {}
    # The study's shown sample of each output, else its lowest sample (as the HIT shows it).
    for item, system, sample, text in Output.objects.filter(item_id__in={i for i, _ in wanted}).order_by(
            "-sample").values_list("item_id", "system_id", "sample", "text").iterator():
        if (item, system) in wanted and ((item, system) not in shown or sample == study.shown_sample):
            shown[(item, system)] = sample
            texts[(item, system)] = style_counts(text)
    none = (0, 0, 0, 0)
    features = np.zeros((len(rows), len(STYLE_FEATURES)))
    for k, (_, _, item, a, b, _, swapped) in enumerate(rows):
        features[k, :4] = np.subtract(texts.get((item, a), none), texts.get((item, b), none))
        features[k, 4] = 0.0 if swapped is None else (-1.0 if swapped else 1.0)
    return {"first": [r[0] for r in rows], "second": [r[1] for r in rows],
            "outcome": np.array([(r[5] + 1) / 2 for r in rows], dtype=float), "features": features,
            "items": np.array([r[2] for r in rows], dtype=np.int64)}


def study_style_leaderboard(*, study: Study, plain: list[dict] | None = None) -> dict:
    """The style-controlled leaderboard as plain data: ``rows`` best first (Arena-scale rating
    with its prompt-clustered sandwich interval, votes, and with ``plain`` — the dashboard's
    leaderboard rows — the system's place there), ``effects`` (each covariate per its unit:
    log-odds, Arena points and the chance of winning between equally strong systems, each
    with its interval, and a sentence), or ``available`` False with the ``reason``."""
    votes = study_style_votes(study=study)
    n = len(votes["outcome"])
    systems = sorted(set(votes["first"]) | set(votes["second"]))
    base = {"votes": n, "level": DEFAULT_LEVEL, "features": list(STYLE_FEATURES)}
    if len(systems) < 2:
        return {**base, "available": False, "reason": "no human judgements yet"}
    index = {s: k for k, s in enumerate(systems)}
    first = np.array([index[s] for s in votes["first"]])
    second = np.array([index[s] for s in votes["second"]])
    try:
        fit = fit_style_leaderboard(systems, first, second, votes["outcome"], votes["features"], STYLE_FEATURES,
                                    units=[FEATURE_UNITS[f] for f in STYLE_FEATURES], reg=style_penalty(n),
                                    clusters=votes["items"], center=False)
    except FloatingPointError:
        return {**base, "available": False,
                "reason": "not estimable yet: some systems won (or lost) every judgement against the others"}
    plain_place = {r["system"]: r["position"] for r in plain or ()}
    rows = []
    for place, k in enumerate(fit.order, start=1):
        name = systems[k]
        rows.append({"position": place, "system": name, "rating": float(fit.rating[k]),
                     "low": float(fit.rating_low[k]), "high": float(fit.rating_high[k]),
                     "se": float(fit.rating_se[k]), "votes": int(fit.votes[k]),
                     "plain_position": plain_place.get(name),
                     "moved": None if name not in plain_place else plain_place[name] - place})
    effects = []
    for j, feature in enumerate(STYLE_FEATURES):
        varies = bool(np.any(votes["features"][:, j] != votes["features"][0, j]))
        effects.append(_effect(feature, float(fit.per_unit[j]), float(fit.per_unit_low[j]),
                               float(fit.per_unit_high[j]), float(fit.coef[j]), varies, fit.level))
    return {**base, "available": True, "rows": rows, "effects": effects, "prompts": fit.clusters,
            "penalty": fit.reg, "scale": "arena"}


def _effect(feature: str, log_odds: float, low: float, high: float, coef: float, varies: bool, level: float) -> dict:
    label, more, less, unit = FEATURE_WORDS[feature]
    chance, chance_low, chance_high = (win_chance(x) for x in (log_odds, low, high))
    interval = f"{100 * level:.0f} % interval {100 * chance_low:.0f}–{100 * chance_high:.0f} %"
    if not varies:
        sentence = f"No {label} differences in these judgements: its effect cannot be measured."
    elif low <= 0 <= high:
        sentence = (f"No clear effect of {label}: {unit} changes the chance of winning between equally strong "
                    f"systems from 50 % to {100 * chance:.0f} % ({interval}).")
    else:
        who = more if log_odds > 0 else less
        sentence = (f"{who} more often: {unit} changes the chance of winning between equally strong "
                    f"systems from 50 % to {100 * chance:.0f} % ({interval}), "
                    f"{ARENA_SCALE * log_odds:+.0f} rating points.")
    return {"feature": feature, "label": label, "unit": unit, "log_odds": log_odds, "low": low, "high": high,
            "points": ARENA_SCALE * log_odds, "points_low": ARENA_SCALE * low, "points_high": ARENA_SCALE * high,
            "chance": chance, "chance_low": chance_low, "chance_high": chance_high, "coef": coef,
            "measured": varies, "clear": varies and not (low <= 0 <= high), "sentence": sentence}


def style_leaderboard_bars(board: dict | None) -> dict | None:
    """A copy of ``board`` whose rows carry the position of their interval on a common scale
    (percent of the cell width; ``bar_zero`` at 1000, the average system), for the table's bars."""
    if not board or not board.get("available"):
        return board
    rows = [dict(r) for r in board["rows"]]
    values = [v for r in rows for v in (r["low"], r["high"])] + [1000.0]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    for r in rows:
        r["bar_zero"] = round(100 * (1000.0 - lo) / span, 1)
        r["bar_left"] = round(100 * (r["low"] - lo) / span, 1)
        r["bar_width"] = max(round(100 * (r["high"] - r["low"]) / span, 1), 0.5)
        r["bar_point"] = round(100 * (r["rating"] - lo) / span, 1)
    return {**board, "rows": rows}
