"""evalapp's statistics: pure functions over arrays, no Django (docs/formulas.md defines every
number; docs/architecture.md places this package under the app).

Modules
-------
bundle        read, validate and write study bundles (JSON Lines, optionally gzipped)
preferences   preferences from scalar scores (§1), per-pair label tables from a bundle
favi          Favi-Score and sign accuracy (§2)
ranking       sign tests, significance DAGs, decision-set comparison (§3, §5)
decision      the Bayesian decision function: NUTS reference and fast exact samplers (§4)
adaptive      the budgeted protocol (§5), the public facade of the three modules below:
state         its settings (the error-controlled default: adaptive policy, e-process, e-BH),
              the pair and protocol states and their codecs
rules         the decision rules: Bayesian thresholds, e-process bets and evidence, the exact
              binomial boundary, looks and futility, family control across pairs
machine       the state machine: start, open_rounds, record_judgement(s), close_rounds,
              rebuild_pairs, run_rounds
rubric        several criteria answered in one HIT: one lane (a protocol) per criterion sharing
              the HITs and the budget
allocation    which items of a pair to judge next: uniform, separability-weighted, stratified
spa           soft pairwise accuracy and pairwise accuracy (§6)
separability  separability of comparisons (§7), from the text similarities of ``similarity``
similarity    ROUGE-1, sentence BLEU, length-adjusted and embedding similarities (§7)
rating        rating consistency, preference strength, separability-weighted Elo (§7)
agreement     inter-annotator agreement (Krippendorff's α, percent agreement)
quality       per-annotator quality statistics and flags (too fast, failed checks, low agreement)
leaderboard   Bradley–Terry leaderboard with bootstrap intervals
projection    judgements a study is still expected to need
plan          the planner: replays of the protocol on a study's labels for a grid of settings
judges        an LLM judge's position bias, flip rate, agreement, Cohen's κ and savings bound against
              the humans
judge_prompts the judge's prompt (MT-Bench's pairwise by default), its verdict, the cache key of a call
arena         deterministic synthetic arenas (systems with known strengths, a noisy judge)
arena_replay  the known-truth replay: all pairs, the ranking design, random pairs + Bradley–Terry
ranking_design  a ranking of many systems from O(k log k) pairs (merge sort on decided pairs)
designs       the pair designs (all_pairs, ranking, active), one module each, in one registry
scales        the answer scales of a rubric's criteria (points, texts, keys, strength words), in one registry
simulate      offline replay of the protocol on a bundle with complete human labels (command line)
report        a metric against a bundle's human labels (command line)
savings       the least share of human labels any metric-assisted rule needs (efficiency bound)
bench         timing of the decision function and SPA (command line; _bench_decision, _bench_spa)

Section numbers (§n) are those of docs/formulas.md. A researcher can use every module from a
notebook; the web app turns database rows into the same arrays.
"""

# The pair designs register themselves here, once, before any module of the package reads the
# registry (the study settings' pair_design choices; protocol.designs).
from . import designs  # noqa: E402,F401
