"""Synthetic arena studies with a known truth: many systems, many prompts, a noisy judge (issue 22).

A study of ``systems`` systems on ``prompts`` prompts is generated from a seed, so a replay can
measure how many human labels a design needs to recover the TRUE order. The model is
Thurstonian per item:

    strength   theta_s        known; adjacent systems (in the true order) differ by gaps drawn
                              from Gamma(2, gap / 2) (mean ``gap``): some neighbours are near
                              ties, as on a real leaderboard
    quality    q[s, t] = a_t theta_s + item_sd e[s, t]
                              a_t ~ Uniform(0, 2) is the item's discrimination (some prompts
                              separate systems, some barely do), e[s, t] ~ N(0, 1) the item x
                              system difficulty noise
    human      d = q[i, t] - q[j, t] + judge_sd h[i, j, t];  label +1 if d > tie, -1 if
                              d < -tie, else 0 (a tie)
    metric     metric_score[s, t] = q[s, t] + metric_bias[s] + metric_sd m[s, t]
                              (the automatic judge: item-level signal plus its own noise and a
                              per-system bias of sd ``metric_bias_sd``)

Departures from that model, each off by default (issue 39: does a ranking hold up when the
model's assumptions do not?):

    prompt types   ``prompt_types`` = K > 1 kinds of prompt (prompt t has kind g(t), the
                   kinds balanced: a seeded permutation of t mod K) and a system x kind effect
                   u[s, g] ~ N(0, type_sd^2): q[s, t] += u[s, g(t)]. Systems are strong on some
                   kinds and weak on others. The study's K kinds are a sample of the kinds of
                   prompt a population holds, over which the effects average 0, so the true
                   order is still that of ``strengths`` (the population's), while the order on
                   the study's own prompts is that of strengths + the mean of u over its kinds
                   (sd type_sd / sqrt(K) per system): a design that reads only the study's
                   prompts can order the population only as well as its K kinds allow.
    tiers          ``tier_size`` = m > 1: the ladder's gaps inside runs of m consecutive systems
                   are 0, so the systems of a tier are exactly equal (``truth`` 0): ties and
                   near-equal tiers, as on a crowded leaderboard
    cycle          ``cycle`` = c > 0: the three systems in the middle of the true order, a above
                   b above c', get an intransitive term: the human difference d of the pairs
                   (a, b), (b, c') and (c', a) gets + c in that direction, so with c larger than
                   their gaps the population prefers a to b, b to c' and c' to a
    link           ``link`` = "logistic": the judge's noise is logistic with the same sd
                   (judge_sd; a Bradley–Terry judge given the qualities) instead of normal
                   ("probit", Thurstone's)

All noise is standard normal from ``numpy.random.default_rng`` seeded by (seed, a stream
number, and for the human noise the pair's two system indices), so the labels of one pair do
not depend on which other pairs are asked for: ``Arena.human(i, j)`` is the same whether a
replay asks for one pair or writes all of them into a bundle. The true direction of every
pair is the sign of its strength difference (the noise is symmetric), so the true order is
the order of ``strengths``.

Systems are named ``S01``..``S50`` (zero padded: name order = index order = canonical pair
order of the protocol), prompts ``p0001``..; the true order is a seeded permutation of the
names, so it cannot be read off them.

``write_bundle`` streams the study in the repository's bundle format (docs/bundle-format.md),
rows in the order and with the conventions of ``scripts/convert/bundle_io.py`` (kind first, compact
JSON, sorted rows, gzip with mtime 0 and no file name: byte-identical for the same seed);
``python -m protocol.arena make --systems 50 --prompts 2000 --seed 0 --out FILE``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from scipy.special import ndtr

METRIC = "judge_score"
_STRENGTH, _ITEM, _QUALITY, _METRIC, _BIAS, _HUMAN, _TYPE = range(7)  # rng streams
LINKS = ("probit", "logistic")


@dataclass(frozen=True)
class ArenaSpec:
    """Parameters of a synthetic arena (see the module doc for the model).

    systems, prompts  sizes (systems >= 2, prompts >= 1)
    seed              seed of everything random
    gap               mean strength gap between neighbours in the true order (0 = a null
                      study: all systems equal, every decision is false)
    item_sd           sd of the item x system quality noise
    judge_sd          sd of the human judge's noise per comparison
    tie               |d| below this is a tie
    metric_sd         sd of the metric's own noise per output
    metric_bias_sd    sd of the metric's per-system bias
    prompt_types      kinds of prompt with a system x kind effect (0 or 1 = none)
    type_sd           sd of the system x kind effect
    tier_size         systems per tier of exactly equal strength (0 or 1 = none)
    cycle             size of the intransitive term of the middle three systems (0 = none)
    link              "probit" (normal judge noise, the default) or "logistic"
    """

    systems: int = 50
    prompts: int = 2000
    seed: int = 0
    gap: float = 0.3
    item_sd: float = 1.0
    judge_sd: float = 1.0
    tie: float = 0.3
    metric_sd: float = 1.0
    metric_bias_sd: float = 0.1
    prompt_types: int = 0
    type_sd: float = 0.0
    tier_size: int = 0
    cycle: float = 0.0
    link: str = "probit"

    def __post_init__(self) -> None:
        for name, low in (("systems", 2), ("prompts", 1), ("seed", 0), ("prompt_types", 0), ("tier_size", 0)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        for name in ("gap", "item_sd", "judge_sd", "tie", "metric_sd", "metric_bias_sd", "type_sd", "cycle"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}, got {self.link!r}")
        if self.cycle and self.systems < 3:
            raise ValueError(f"a cycle needs at least 3 systems, got {self.systems}")


@dataclass(frozen=True)
class Arena:
    """A generated study. Arrays are indexed by system index (name order) and prompt index.

    names      (S,) system names, name order
    items      (T,) prompt ids
    strengths  (S,) true strengths; the true order is ``true_order``
    quality    (S, T) latent quality of every output
    metric     (S, T) metric score of every output (rounded to 4 decimals, as written)
    kinds      (T,) kind of every prompt (all 0 without prompt types)
    type_effect (S, K) system x kind effect (zeros without prompt types)
    cycle      (a, b, c) the systems of the intransitive term (a above b above c in the true
               order; empty without one)
    """

    spec: ArenaSpec
    names: tuple[str, ...]
    items: tuple[str, ...]
    strengths: np.ndarray = field(repr=False)
    quality: np.ndarray = field(repr=False)
    metric: np.ndarray = field(repr=False)
    kinds: np.ndarray = field(default=None, repr=False)
    type_effect: np.ndarray = field(default=None, repr=False)
    cycle: tuple[int, ...] = ()

    @cached_property
    def true_order(self) -> tuple[int, ...]:
        """System indices, strongest first (ties in strength, only when gap = 0, by index)."""
        return tuple(int(i) for i in np.lexsort((np.arange(len(self.names)), -self.strengths)))

    def truth(self, i: int, j: int) -> int:
        """True direction of the pair: +1 when system i is stronger than j, -1 weaker, 0 equal."""
        return int(np.sign(self.strengths[i] - self.strengths[j]))

    def human(self, i: int, j: int) -> np.ndarray:
        """(T,) int8 human label of every prompt for the pair (i, j): +1 = i better.

        Generated in canonical order (smaller index first) from the pair's own stream, so
        ``human(j, i) == -human(i, j)`` and one pair's labels never depend on any other's."""
        if i == j:
            raise ValueError(f"a pair needs two different systems, got {i} twice")
        lo, hi = (i, j) if i < j else (j, i)
        spec = self.spec
        rng = np.random.default_rng([spec.seed, _HUMAN, lo, hi])
        if spec.link == "logistic":   # the logistic of scale sqrt(3) / pi has sd 1
            noise = rng.logistic(0.0, np.sqrt(3.0) / np.pi, len(self.items))
        else:
            noise = rng.standard_normal(len(self.items))
        d = self.quality[lo] - self.quality[hi] + spec.judge_sd * noise + self.intransitive(lo, hi)
        labels = (d > spec.tie).astype(np.int8) - (d < -spec.tie).astype(np.int8)
        return labels if i == lo else -labels

    def intransitive(self, i: int, j: int) -> float:
        """The cycle's term added to the human difference of i over j (0 off the cycle)."""
        if not self.cycle:
            return 0.0
        a, b, c = self.cycle
        ahead = {(a, b), (b, c), (c, a)}
        return self.spec.cycle if (i, j) in ahead else -self.spec.cycle if (j, i) in ahead else 0.0

    def population_wins(self, nodes: int = 400) -> np.ndarray:
        """(S, S) expected share of i's wins over j (a tie half a win) on the population of
        prompts the study's are drawn from: the discrimination a ~ U(0, 2) integrated out (the
        midpoint rule on ``nodes`` points), the item noise and the kinds' effects (population
        mean 0, so a pair's difference of effects is N(0, 2 type_sd^2)) folded into the normal
        noise of the difference, and the cycle's term. Exact for the probit link; for the
        logistic one the judge's noise is taken as normal of the same sd (what the population
        order is, up to a slight change of scale). Row i, column j; the diagonal is 0."""
        spec = self.spec
        a = (np.arange(nodes) + 0.5) * (2.0 / nodes)
        scale = np.sqrt(2 * spec.item_sd ** 2 + spec.judge_sd ** 2
                        + (2 * spec.type_sd ** 2 if spec.prompt_types > 1 else 0.0))
        size = len(self.names)
        wins = np.zeros((size, size))
        for i in range(size):
            for j in range(size):
                if i == j:
                    continue
                mean = a * (self.strengths[i] - self.strengths[j]) + self.intransitive(i, j)
                plus = ndtr((mean - spec.tie) / scale).mean() if scale > 0 else float(np.mean(mean > spec.tie))
                minus = ndtr((-mean - spec.tie) / scale).mean() if scale > 0 else float(np.mean(mean < -spec.tie))
                wins[i, j] = plus + (1 - plus - minus) / 2
        return wins

    def metric_labels(self, i: int, j: int) -> np.ndarray:
        """(T,) int8 metric preference of i over j per prompt: the sign of the score difference
        (as protocol.preferences.preferences_from_scores derives it from the bundle)."""
        return np.sign(self.metric[i] - self.metric[j]).astype(np.int8)

    def log_odds(self, i: int, j: int) -> float:
        """Log-odds of i over j on all of the pair's prompts (a tie half a win each): the
        difference of Bradley–Terry log-strengths that the pair's labels estimate, on this
        study's prompts (the population a design samples without replacement)."""
        labels = self.human(i, j)
        ties = np.count_nonzero(labels == 0) / 2
        return float(np.log((np.count_nonzero(labels > 0) + ties + 0.5) / (np.count_nonzero(labels < 0) + ties + 0.5)))

    def win_share(self, i: int, j: int) -> float:
        """Share of i's wins among the non-tied prompts of the pair (its empirical win rate)."""
        labels = self.human(i, j)
        decisive = np.count_nonzero(labels)
        return float(np.count_nonzero(labels > 0) / decisive) if decisive else 0.5


def make_arena(spec: ArenaSpec) -> Arena:
    """Generate the arena of ``spec`` (deterministic in the spec)."""
    size, prompts, seed = spec.systems, spec.prompts, spec.seed
    gaps = np.random.default_rng([seed, _STRENGTH]).gamma(2.0, spec.gap / 2, size - 1) if spec.gap > 0 \
        else np.zeros(size - 1)
    if spec.tier_size > 1:   # gap k - 1 joins ladder rungs k - 1 and k: inside a tier unless k % m == 0
        inside = np.arange(1, size) % spec.tier_size != 0
        gaps[inside] = 0.0
    ladder = np.concatenate([[0.0], np.cumsum(gaps)])     # ascending: ladder[-1] is the strongest
    ladder -= ladder.mean()
    who = np.random.default_rng([seed, _STRENGTH, 1]).permutation(size)
    strengths = np.empty(size)
    strengths[who] = ladder
    discrimination = np.random.default_rng([seed, _ITEM]).uniform(0.0, 2.0, prompts)
    quality = discrimination[None, :] * strengths[:, None] \
        + spec.item_sd * np.random.default_rng([seed, _QUALITY]).standard_normal((size, prompts))
    kinds = np.zeros(prompts, dtype=np.int64)
    type_effect = np.zeros((size, 1))
    if spec.prompt_types > 1:
        types = np.random.default_rng([seed, _TYPE])
        kinds = types.permutation(np.arange(prompts) % spec.prompt_types)
        type_effect = spec.type_sd * types.standard_normal((size, spec.prompt_types))
        quality = quality + type_effect[:, kinds]
    cycle: tuple[int, ...] = ()
    if spec.cycle > 0:
        middle = size // 2 - 1
        cycle = tuple(int(who[size - 1 - k]) for k in (middle, middle + 1, middle + 2))
    bias = spec.metric_bias_sd * np.random.default_rng([seed, _BIAS]).standard_normal(size)
    metric = np.round(quality + bias[:, None]
                      + spec.metric_sd * np.random.default_rng([seed, _METRIC]).standard_normal((size, prompts)), 4)
    width = max(2, len(str(size)))
    names = tuple(f"S{s + 1:0{width}d}" for s in range(size))
    items = tuple(f"p{t + 1:0{max(4, len(str(prompts)))}d}" for t in range(prompts))
    return Arena(spec=spec, names=names, items=items, strengths=strengths, quality=quality, metric=metric,
                 kinds=kinds, type_effect=type_effect, cycle=cycle)


def _line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def bundle_lines(arena: Arena, *, human: bool = True, study_settings: Mapping[str, object] | None = None):
    """The bundle's lines in file order (an iterator of str; nothing is held but one prompt's
    labels): study (with ``study_settings``, e.g. ``{"pair_design": "active"}``), items (with
    their ``prompt_kind`` when the arena has prompt types), outputs, metric scores, then one
    human preference per prompt and pair (all k (k - 1) / 2 pairs) when ``human``."""
    spec = arena.spec
    yield _line({
        "kind": "study",
        "name": f"Synthetic arena: {spec.systems} systems x {spec.prompts} prompts, seed {spec.seed}",
        "criterion": "overall quality",
        "instructions": "Which response answers the prompt better? Choose a tie when they are equally good.",
        "metric": METRIC,
        **dict(study_settings or {}),
    })
    # With prompt types every item states its kind (the bundle's prompt_kind), so that a study
    # of the arena can fit by kind (docs/ranking.md) as ``replay_active(by_kind=True)`` does.
    typed = spec.prompt_types > 1
    for t, item in enumerate(arena.items):
        yield _line({"kind": "item", "id": item, "input": f"prompt {item}",
                     **({"prompt_kind": f"kind-{int(arena.kinds[t])}"} if typed else {})})
    for item in arena.items:
        for name in arena.names:
            yield _line({"kind": "output", "item": item, "system": name, "text": f"response of {name} to {item}"})
    scores = arena.metric
    for t, item in enumerate(arena.items):
        yield "".join(
            f'{{"kind":"metric_score","item":"{item}","system":"{name}","metric":"{METRIC}","score":{_number(scores[s, t])}}}\n'
            for s, name in enumerate(arena.names))
    if not human:
        return
    size = len(arena.names)
    first, second = np.triu_indices(size, k=1)
    # (pairs, prompts) int8: 1,225 x 2,000 bytes at k = 50, one pair's stream at a time
    labels = np.stack([arena.human(int(i), int(j)) for i, j in zip(first, second)]) if len(first) else None
    heads = [f'","first":"{arena.names[i]}","second":"{arena.names[j]}","preference":' for i, j in zip(first, second)]
    for t, item in enumerate(arena.items):
        start = f'{{"kind":"human_preference","item":"{item}'
        column = labels[:, t].tolist()
        yield "".join(f"{start}{head}{value}}}\n" for head, value in zip(heads, column))


def _number(value: float) -> str:
    """A score as JSON writes it (json.dumps of the float)."""
    return json.dumps(float(value))


def write_bundle(arena: Arena, path: str | Path, *, human: bool = True, compresslevel: int = 6,
                 study_settings: Mapping[str, object] | None = None) -> dict:
    """Stream the arena's bundle to ``path`` (gzip, deterministic). Returns a summary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = 0
    with open(path, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel) as gz:
        for chunk in bundle_lines(arena, human=human, study_settings=study_settings):
            lines += chunk.count("\n")
            gz.write(chunk.encode("utf-8"))
    return {"path": str(path), "lines": lines, "bytes": path.stat().st_size, "systems": len(arena.names),
            "prompts": len(arena.items), "human_preferences": bool(human)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocol.arena",
                                     description="Synthetic arena studies with a known true order (issue 22).")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write a synthetic arena bundle")
    defaults = ArenaSpec()
    make.add_argument("--systems", type=int, default=defaults.systems)
    make.add_argument("--prompts", type=int, default=defaults.prompts)
    make.add_argument("--seed", type=int, default=defaults.seed)
    for name in ("gap", "item_sd", "judge_sd", "tie", "metric_sd", "metric_bias_sd", "type_sd", "cycle"):
        make.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float, default=getattr(defaults, name))
    for name in ("prompt_types", "tier_size"):
        make.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=getattr(defaults, name))
    make.add_argument("--link", choices=LINKS, default=defaults.link)
    make.add_argument("--no-human", action="store_true", help="leave the human preferences out")
    make.add_argument("--study-setting", action="append", default=[], metavar="KEY=VALUE",
                      help="a setting of the study line (docs/bundle-format.md), e.g. pair_design=active; "
                           "VALUE is read as JSON when it is (0.95, true), else as text; repeatable")
    make.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        spec = ArenaSpec(systems=args.systems, prompts=args.prompts, seed=args.seed, gap=args.gap,
                         item_sd=args.item_sd, judge_sd=args.judge_sd, tie=args.tie,
                         metric_sd=args.metric_sd, metric_bias_sd=args.metric_bias_sd,
                         prompt_types=args.prompt_types, type_sd=args.type_sd, tier_size=args.tier_size,
                         cycle=args.cycle, link=args.link)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = {}
    for setting in args.study_setting:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            print(f"error: --study-setting takes KEY=VALUE, got {setting!r}", file=sys.stderr)
            return 2
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    began = time.perf_counter()
    arena = make_arena(spec)
    summary = write_bundle(arena, args.out, human=not args.no_human, study_settings=settings)
    summary["seconds"] = round(time.perf_counter() - began, 2)
    summary["true_order"] = [arena.names[i] for i in arena.true_order]
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
