"""The budgeted protocol (correction-of-errors §4, Alg. 2; docs/formulas.md §5) as a resumable state machine.

This module is the public facade: it re-exports the protocol's data (``protocol.state``:
settings, pair and protocol states, their codecs), its decision rules (``protocol.rules``)
and its state machine (``protocol.machine``). The docstring below describes all three.

Judgements trickle in from many annotators, so the protocol is data that advances one
judgement at a time and that the web app persists (``ProtocolState.to_dict`` gives JSON-able
dicts, one per pair for PairState). The cycle for every system pair is

    waiting --open_rounds--> open --record_judgement x quota--> filled --close_rounds--> ...

and ``close_rounds`` runs the decision function on all filled pairs at once (one batched
``decide_many`` call), then marks each pair ``decided`` (±1), ``exhausted`` (no human label
left to collect), ``futile`` (adaptive policy: a ± decision has become unlikely) or puts it
back to ``waiting`` for another round. Rounds are per pair, so the app can close a pair as
soon as its round fills; a replay that opens, fills and closes all pairs together is exactly
Algorithm 2.

Counts are sums and the judged items a set, so the order in which the judgements of a round
arrive does not matter. Everything random is seeded from ``ProtocolSettings.seed``: the
decision sampler per pair by (seed, the pair's counts), the budget order in a tight round and
the futility simulation by (seed, closes so far); a state restored from its dict continues
exactly as the uninterrupted one.
How items are chosen is not this module's business (the app uses ``protocol.allocation``;
the replay in ``protocol.simulate`` draws them).

Policies
--------
``paper``     Algorithm 2: every undecided pair gets ``batch`` new judgements per round; a pair
              stops only on a ± decision or when its items run out; all stop when the budget is
              spent. When the budget cannot fund every pair's round, the pairs that get it are
              drawn at random (seeded).
``adaptive``  ours; the same decision function, three rules on top (defaults in brackets):
              * futility stop — a pair that closes a round undecided with at least
                ``futility_min_judgements`` (20) judgements is stopped with decision 0 when the
                posterior predictive probability that the human-only decision on ALL its
                labels is ±1 is below min(``futility`` (0.05), remaining /
                ``futility_labels_per_error`` (500)). The predictive draws p ~ Dir(n + 1)
                (``futility_sweeps`` > 0 first moves p towards the metric labels of the
                unjudged items by data-augmentation Gibbs sweeps), the remaining R labels
                ~ Multinomial(R, p), and takes theta in closed form. The second term of the
                threshold accepts less risk late, when stopping saves little. Ties under the
                full human evaluation (a quarter of SummEval pairs) otherwise take 100 % of
                their labels; among futility stops on SummEval ~4 % turn out to be omissions,
                within the 5 % the threshold allows.
              * round sizing — the first round asks ``first_round`` (5) labels: a clear winner
                is decided from 5 unanimous labels (theta = 1 - 2^-6). Later rounds ask the
                labels the pair is expected to need, between ``min_round`` (5) and ``batch``:
                z = Phi^-1(theta) grows like sqrt(n) along the current evidence, so reaching
                z* = Phi^-1(1 - level/2) takes about n ((z*/z)^2 - 1) more.
              * when the budget cannot fund every round, pairs closest to a decision
                (largest |theta - 1/2|) go first.
              Items stay the app's (or the replay's uniform) choice: a choice driven by the
              metric would bias the human counts that the decision function treats as a
              random sample of the pair's items.
              Measured on SummEval (4 criteria x {bert_score_f, rougel_f, none} x 5 seeds,
              batch 10): 0.79x the paper policy's annotations on average (at most 0.905x),
              correct 0.012 lower on average (at worst 0.042), no inversion in any run
              (docs/results.md, scripts/report/protocol_results.py).

Error control at the stated level (``rule="eprocess"``, the default)
--------------------------------------------------------------------
The defaults of ``ProtocolSettings`` (and so of ``protocol.simulate``, ``protocol.plan`` and
the app) are policy ``adaptive``, rule ``eprocess``, family ``ebh``; the paper's Algorithm 2
is ``ProtocolSettings.paper(budget)`` (policy ``paper``, rule ``bayes``: no error control, its
null false ± rate is 0.2-0.4, docs/results.md).

Every pair carries a betting e-process over its items: wealth K starts at 1 and every item's
first judgement is a step (PairState.steps: item, value s in {-1, 0, +1}, bet b, rho) that
multiplies K by (1 + b s rho). For uniform draws rho = 1 and the bet b in [-max_bet,
max_bet] is predictable: the Kelly bet 2 r - 1 for r = P(+ | not a tie) estimated from the
counts when the item's round opened (so the order within a round does not matter) and the
metric labels of the pair's OTHER items (paired confusion, +1 smoothed, imputes the human
labels of the metric-only items; the judged item's own metric label is left out, because
under a null its human and metric labels flip together). When the two systems are
exchangeable within items (the item-flipping null of ``protocol.simulate``), the sign of the
next item's human label is a fair coin independent of b, so K is a nonnegative martingale
and by Ville's inequality P(K ever reaches 1/gamma) <= gamma. The metric makes the bets sharp
early when it agrees with the humans and cannot make the test invalid, only weaker when it
misleads (measured: it saves no labels on SummEval relevance with bert_score_f; options
``confusion="pooled"``, ``metric_weight``, ``mixture`` are measured in docs/results.md).
That was the rule before issue 38 (``control_variate=False``). The default now
(``control_variate=True``) uses the metric as a control variate instead: a step multiplies K
by 1 + rho b (s - lam (m - c)), m the item's metric value (label, or calibrated prediction of
several metrics, ``calibrated``), c the metric's mean over the unjudged items when the round
opened, lam and b fixed then from past labels, b's direction from the human margin; lam = 0 is
the human-only rule exactly. Validity and formulas: ``protocol.control_variate`` and
docs/formulas.md §8; unequal draws keep lam = 0.

Unequal draws (items chosen by separability, protocol.allocation): a null can then put the
"+" labels on the items the choice favours, so the signs drawn are no fair coins. The step
of an item drawn with chance q, when the smallest chance among the draw's open candidates
was q_min, has rho = q_min / q in (0, 1] and a bet that is the same for every candidate
(``weighted_bet``: Kelly from the first-judgement values so far, so its sign is that of their
running sum S). Then E[step | past] = 1 + b q_min sum_open s_i: under a finite null (the
pair's items sum to 0 however they lie along separability) the open items sum to -S and
b S >= 0, so K is a supermartingale; under the item-flip null every step is fair. The app
passes q (``probabilities``) and q_min (``smallest``, protocol.allocation.
smallest_selection_probability) to ``record_judgements``; an unequal draw without q_min moves
nothing. Low temperatures make rho tiny for the favoured items (little evidence), so
``protocol.allocation.MIN_TEMPERATURE`` (0.1) refuses lower ones with the reason.

Rebuilds (``rebuild_pairs``) keep the steps: a rebuild with the same judgements leaves K
unchanged; after exclusions K is the product of the remaining steps with the bets made at the
time (inactive steps come back with their judgements), never a restart at 1.

Control across the pairs of a study (``family``): every pair's e-value (stopped pairs keep
theirs) enters ``family_thresholds`` at each close. ``ebh`` (default): e-BH, the k* pairs with
the largest e-values where k* = max{k : e_(k) >= m / (gamma k)}, m the study's pairs: the
false discovery rate over the study is <= gamma, so on a null study the chance of any false ±
is <= gamma. ``bonferroni``: e >= m / gamma (family-wise error <= gamma). ``none``: 1 / gamma
per pair. A decided pair keeps its e-value, so it stays in the e-BH set. Decided pairs get
the sign of their human margin; type S errors (a near-null pair decided against its margin on
all labels) are reported by the replay (``wrong_direction_near_null``).

Under the e-process theta (shown, and sizing the adaptive rounds) is the human-only closed
form: the metric model's sampler would cost seconds per close and decides nothing.

Options measured against the default (docs/results.md, "Candidates for power"): ``max_bet``;
``confusion="pooled"`` (the metric's confusion over every judged item of the study, stored in
round_basis after the 15 counts); ``metric_weight`` (the metric's imputed labels worth that
many labels); ``mixture=a`` (the uniform draws' evidence as a Beta(a, a) mixture of constant
bets); ``final_share=w`` (the pair's e-value (1 - w) K + w 1[exact sign test on all its labels
rejects at w gamma / 2] / (w gamma / 2), taken when its labels run out: more correct for a few
more labels on SummEval and PandaLM, worse on WMT21's 527-item pairs); ``rule="boundary"``
(an exact binomial constant boundary on the sign statistic, O'Brien-Fleming's shape, valid at
any looks up to the pair's capacity: ``boundary_critical``; per pair with family "none", at
gamma / m with "bonferroni", under "ebh" a crossing at gamma x ``boundary_share`` is the
e-value 1 / level; it refuses unequal draws). None beats the default on every bundle, so the
defaults stay.

Error control (``strict``)
--------------------------
Checking after every round is a group-sequential test: with K looks the chance of a false ±
decision on a pair without a difference is well above gamma (measured on null SummEval
pairs: 0.18 without, 0.22 with bert_score_f, at gamma = 0.05). ``strict=True`` splits gamma
over the pair's largest possible number of looks K (paper: ceil(capacity / batch);
adaptive: one ``first_round`` look, then rounds of ``batch``, as round sizing is switched
off under strict):
``spending="bonferroni"`` (default) decides at level gamma / K per look; by the union bound
the chance of any false ± is at most gamma whatever the dependence between looks (measured:
0.037 / 0.033 with bert_score_f). ``spending="pocock"`` uses Pocock's constant nominal level,
exact for the normal approximation of the sign statistic and cheaper (K = 10: 0.0106 instead
of 0.005); measured 0.05 without a metric but 0.065-0.073 with bert_score_f, so it is not the
default. Either costs annotations and omissions against the full evaluation at level gamma;
``protocol.simulate`` measures both.
"""
from __future__ import annotations

from dataclasses import replace

from .decision import closed_form_theta as theta_closed_form
from .decision import decision_from_theta as decision_at
from .machine import (
    DecideMany,
    calibrated,
    close_rounds,
    needed,
    open_rounds,
    rebuild_pairs,
    record_judgement,
    record_judgements,
    run_rounds,
    start,
)
from .rules import (
    bet,
    boundary_critical,
    decide_closed_form,
    design_weighted,
    draw_rho,
    family_thresholds,
    eprocess_can_decide,
    eprocess_decision,
    final_decision_probabilities,
    look_level,
    pair_counts,
    pair_log_e_value,
    pocock_level,
    round_size,
    steps_log_evidence,
    weighted_bet,
)
from .state import (
    ADAPTIVE,
    BAYES,
    BOUNDARY,
    BONFERRONI,
    EBH,
    EPROCESS,
    FAMILIES,
    DECIDED,
    EXHAUSTED,
    FILLED,
    FUTILE,
    MAX_BET,
    METHODS,
    OPEN,
    PAPER,
    PARKED,
    POLICIES,
    RULES,
    SPENDING,
    STATUSES,
    STOPPED,
    WAITING,
    LazyLabels,
    Outside,
    PairState,
    ProtocolSettings,
    ProtocolState,
)

__all__ = [
    "BOUNDARY", "boundary_critical",
    "BAYES", "BONFERRONI", "EBH", "EPROCESS", "FAMILIES", "draw_rho", "family_thresholds",
    "steps_log_evidence", "weighted_bet",
    "calibrated", "ADAPTIVE", "DECIDED", "EXHAUSTED", "FILLED", "FUTILE", "MAX_BET", "METHODS", "OPEN", "PAPER",
    "PARKED", "POLICIES", "RULES", "SPENDING", "STATUSES", "STOPPED", "WAITING", "DecideMany", "LazyLabels", "Outside", "PairState",
    "ProtocolSettings", "ProtocolState", "bet", "close_rounds", "decide_closed_form", "decision_at",
    "design_weighted", "eprocess_can_decide", "eprocess_decision", "final_decision_probabilities",
    "look_level", "needed", "open_rounds", "pair_counts", "pocock_level", "rebuild_pairs",
    "record_judgement", "record_judgements", "replace", "round_size", "run_rounds", "start", "pair_log_e_value",
    "theta_closed_form",
]
