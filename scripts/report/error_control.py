"""Generate the "Error control by default" section that leads docs/results.md (issue 19).

One table: four bundles (SummEval relevance with bert_score_f; the same with its strongest
metric, llm_gpt4_rts, on the 12 abstractive systems it covers; PandaLM with gpt35; WMT21
en-de with sentence chrF) x {the paper's policy, the new default (adaptive + e-process +
e-BH across the pairs), the same rule human only, PPI++ at the default's budget} x seeds
0..S-1, batch 10, gamma 0.05. *Real*: each pair's decision against the human-only decision
on all its labels. *Null*: the replay after swapping the two systems within each item with
probability 1/2 (``protocol.simulate.null_labels``), where every ± decision is false.

Then the candidates for power, side by side on SummEval relevance and PandaLM, and the
one-look sign test at fixed budgets (the trade-off any valid test faces).

Last, the bound on what any metric-assisted rule can save (``protocol.savings``): why a label
target below it is out of reach on that data.

    .venv/bin/python scripts/report/error_control.py [--seeds 10] [--part table|candidates|bound] [--dry-run]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from protocol.favi import paired_labels  # noqa: E402
from protocol.savings import study_label_savings  # noqa: E402
from protocol.simulate import baselines, load, null_labels, replay  # noqa: E402
from scripts.report.results_md import replace_section  # noqa: E402

SECTION = "error_control"
BATCH, GAMMA = 10, 0.05
CASES = [
    ("SummEval relevance", "summeval_relevance", "bert_score_f", False),
    ("SummEval relevance, 12 abstractive systems", "summeval_relevance", "llm_gpt4_rts", True),
    ("PandaLM", "pandalm", "gpt35", False),
    ("WMT21 en-de", "wmt21_ende", "sentence_chrf", False),
]
PAPER = dict(policy="paper", rule="bayes")
DEFAULT: dict = {}
ROWS = [
    ("paper policy (Alg. 2, Bayesian θ at every look)", "metric", PAPER),
    ("**default: adaptive + e-process + e-BH**", "metric", DEFAULT),
    ("same rule, human only", "none", DEFAULT),
]
CANDIDATES = [
    ("default (e-BH across pairs, max bet 0.6)", "metric", DEFAULT),
    ("no control across pairs [family none]", "metric", dict(family="none")),
    ("Bonferroni across pairs, family-wise [family]", "metric", dict(family="bonferroni")),
    ("max bet 0.9 [max_bet]", "metric", dict(max_bet=0.9)),
    ("confusion pooled over the study's pairs [confusion]", "metric", dict(confusion="pooled")),
    ("metric imputation worth 10 labels [metric_weight]", "metric", dict(metric_weight=10.0)),
    ("Beta(2, 2) mixture of constant bets [mixture]", "metric", dict(mixture=2.0)),
    ("no futility stop [futility 0]", "metric", dict(futility=0.0)),
    ("half the error spent on a sign test when a pair's labels run out [final_share 0.5]", "metric",
     dict(final_share=0.5)),
    ("exact binomial boundary, e-BH over crossings at γ/2 [rule boundary]", "metric", dict(rule="boundary")),
    ("exact binomial boundary per pair, no control across pairs [rule boundary, family none]", "metric",
     dict(rule="boundary", family="none")),
    ("human only", "none", DEFAULT),
    ("Bayesian θ, Bonferroni over the looks (--strict)", "metric", dict(policy="paper", rule="bayes", strict=True)),
    ("Bayesian θ, Pocock over the looks", "metric",
     dict(policy="paper", rule="bayes", strict=True, spending="pocock")),
]
FRACTIONS = (0.3, 0.45, 0.6, 0.8, 1.0)
BOUND_READING = (
    "Reading the bound: the issue's label target for a judge of sample accuracy >= 0.7 (PandaLM gpt35: "
    "<= 0.70x the labels of the human-only rule at the same correctness and error) is out of reach on this "
    "data, for any rule valid without assuming that the metric errs alike on every pair. gpt35's label "
    "explains a third of a pair's label variance (mean η² 0.31), and a pair has about 100 items, so even "
    "at one look, with the oracle's moments and items drawn where the metric is least reliable, a "
    "metric-assisted rule needs 0.82x the labels where the human-only rule spends 0.6 of the items (it "
    "spends 0.62 in the table above); 0.70x would need η² of about 0.5 at that budget. The other "
    "metrics here (bert_score_f, llm_gpt4_rts on relevance, chrF) explain 1-7 % of the variance: they can "
    "save at most 1-8 % of the labels, which is why no "
    "candidate above saves any. Pooling the metric's confusion over the study's pairs is the one way "
    "past the bound, and it is biased exactly when a metric favours some systems (the candidate "
    "[confusion] costs labels on both bundles).")
READING = ("Reading the candidates: no betting variant moves the e-process much (max bet, mixture, metric weight within ±0.02 of the default; the confusion pooled over the study makes the metric's imputed labels weigh more and costs labels). The one-look trade-off bounds what any per-pair test reaches with a given share of the labels: at 0.45 of them the sign test is 0.82 correct and PPI++ 0.84 on SummEval relevance, so the issue's target (0.90 correct at <= 0.45 of the labels with the null <= γ) is out of reach of a valid test on this data, sequential or not; 0.90 needs about 0.6-0.8 of the labels. The sequential rule pays twice more: for looking at every round (anytime validity: log(1/γ) of evidence instead of z²/2) and for the study (e-BH: the bar is m / (γ k) for the k-th pair). Spending half the error on an exact sign test when a pair's labels run out (`final_share 0.5`) is the best trade-off measured for the e-process (more correct for a few more labels); the Bayesian rule with γ spent over the planned looks is more correct still but per pair only (every null study has false ± across its pairs). On PandaLM (gpt35, sample accuracy 0.729) the metric saves no labels against the human-only run of the same rule (target 0.70x: missed, and out of reach: the bound below): its imputed labels predict a margin shrunk towards the pooled one, so they sharpen the bets no more than the pair's own human labels. "
           "The exact binomial boundary (constant on the sum scale, O'Brien-Fleming's shape, valid at any looks "
           "up to a pair's capacity) is the most correct per pair, but under e-BH its crossing is a weak e-value "
           "(at γ/2 it is worth 2/γ, decided only once half the study's pairs have crossed).")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def mean_sd(values, digits=3) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def tables(bundle: str, metric: str, restrict: bool):
    path = str(ROOT / "data" / "bundles" / f"{bundle}.jsonl.gz")
    human, metric_table = load(path, metric)
    if restrict:   # the systems the metric covers
        human = {k: v for k, v in human.items() if k in metric_table}
    return human, metric_table


def run_rows(human, metric_table, rows, seeds, bayes_seeds=None):
    """label -> (real results, null results) over seeds (the Bayesian rule's rows over the
    first ``bayes_seeds`` of them when given: its sampler costs seconds per close)."""
    out = {}
    nulls = {seed: null_labels(human, metric_table, seed=seed) for seed in seeds}
    for label, which, options in rows:
        began = time.perf_counter()
        table = metric_table if which == "metric" else None
        real, null = [], []
        chosen = seeds[:bayes_seeds] if bayes_seeds and options.get("rule") == "bayes" else seeds
        for seed in chosen:
            real.append(replay(human, table, batch=BATCH, gamma=GAMMA, seed=seed, **options))
            null_human, null_metric = nulls[seed]
            null.append(replay(null_human, null_metric if which == "metric" else None, batch=BATCH, gamma=GAMMA,
                               seed=seed, **options))
        out[label] = (real, null)
        log(f"  {label}: {time.perf_counter() - began:.0f} s")
    return out


def ppi_rows(human, metric_table, reference_runs, seeds):
    """PPI++ (and the sign test) at the default's annotation fraction of the same seed, one look."""
    found = {"ppi++": ([], []), "sign_test": ([], [])}
    for seed, reference in zip(seeds, reference_runs):
        fraction = reference.annotation_fraction
        real = baselines(human, metric_table, fraction=fraction, gamma=GAMMA, seed=seed)
        null_human, null_metric = null_labels(human, metric_table, seed=seed)
        null = baselines(null_human, null_metric, fraction=fraction, gamma=GAMMA, seed=seed)
        for name in found:
            found[name][0].append(real[name])
            found[name][1].append(null[name])
    return found


def false_rate(decisions) -> float:
    return float(np.mean([d != 0 for d in decisions.values()]))


def cells(real, null) -> list[str]:
    return [
        mean_sd([r.annotation_fraction for r in real]),
        mean_sd([r.correct for r in real]),
        mean_sd([r.omission for r in real]),
        mean_sd([r.inversion for r in real]),
        mean_sd([getattr(r, "wrong_direction_near_null", 0.0) for r in real]),
        mean_sd([false_rate(r.decisions) for r in null]),
        f"{np.mean([false_rate(r.decisions) > 0 for r in null]):.1f}",
    ]


HEADER = ("| bundle (pairs) | rule | annotations (fraction) | correct | omission | inversion | "
          "type S, near-null pairs | null false ± rate | null studies with any false ± |")


def main_table(seeds, measured) -> list[str]:
    lines = [HEADER, "|---|---|---|---|---|---|---|---|---|"]
    for name, bundle, metric, _ in CASES:
        results, ppi, pairs = measured[(bundle, metric)]
        for label, which, _ in ROWS:
            real, null = results[label]
            shown = metric if which == "metric" else "none"
            lines.append(f"| {name}, {metric} ({pairs}) | {label} [{shown}] | " + " | ".join(cells(real, null)) + " |")
        real, null = ppi["ppi++"]
        lines.append(f"| {name}, {metric} ({pairs}) | PPI++ ({metric} as predictor), default's budget, one look | "
                     + " | ".join(cells(real, null)) + " |")
    return lines


def tradeoff(human, metric_table, seeds) -> list[str]:
    lines = ["| fraction of labels | sign test correct | sign test null false ± | PPI++ correct | PPI++ null false ± |",
             "|---|---|---|---|---|"]
    for fraction in FRACTIONS:
        row = {"sign_test": ([], []), "ppi++": ([], [])}
        for seed in seeds:
            real = baselines(human, metric_table, fraction=fraction, gamma=GAMMA, seed=seed)
            null_human, null_metric = null_labels(human, metric_table, seed=seed)
            null = baselines(null_human, null_metric, fraction=fraction, gamma=GAMMA, seed=seed)
            for name in row:
                row[name][0].append(real[name].correct)
                row[name][1].append(false_rate(null[name].decisions))
        lines.append(f"| {fraction:.2f} | {mean_sd(row['sign_test'][0])} | {mean_sd(row['sign_test'][1])} | "
                     f"{mean_sd(row['ppi++'][0])} | {mean_sd(row['ppi++'][1])} |")
    return lines


def candidate_table(results) -> list[str]:
    lines = ["| candidate | annotations (fraction) | correct | omission | inversion | type S, near-null | "
             "null false ± rate | null studies with any false ± |", "|---|---|---|---|---|---|---|---|"]
    for label, (real, null) in results.items():
        lines.append(f"| {label} | " + " | ".join(cells(real, null)[:1] + cells(real, null)[1:]) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--dry-run", action="store_true", help="print the section instead of writing it")
    parser.add_argument("--part", choices=("table", "candidates", "bound"), default="table",
                        help="the one table (section error_control), the candidates for power "
                             "(section error_control_candidates) or the bound on a metric's savings "
                             "(section error_control_bound)")
    parser.add_argument("--bayes-seeds", type=int, default=3,
                        help="seeds of the rows with the Bayesian rule (their sampler is slow; default 3)")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    began = time.perf_counter()
    if args.part == "candidates":
        return candidates(seeds, args.dry_run, began, args.bayes_seeds)
    if args.part == "bound":
        return bound(args.dry_run, began)
    measured = {}
    for name, bundle, metric, restrict in CASES:
        log(f"{name} {metric}")
        human, metric_table = tables(bundle, metric, restrict)
        results = run_rows(human, metric_table, ROWS, seeds, args.bayes_seeds)
        default_real = results["**default: adaptive + e-process + e-BH**"][0]
        measured[(bundle, metric)] = (results, ppi_rows(human, metric_table, default_real, seeds), len(human))
    lines = [
        "## Error control by default (issue 19)",
        "",
        f"Generated by `scripts/report/error_control.py --seeds {len(seeds)} --bayes-seeds {args.bayes_seeds}` "
        f"(batch {BATCH}, γ = {GAMMA}; mean ± sd over seeds 0..{len(seeds) - 1}, the paper policy's rows over "
        f"seeds 0..{args.bayes_seeds - 1}: its metric model's sampler costs seconds per close). *Real*: the replay on the human labels, each pair's "
        "decision against the human-only decision on all its labels (correct / omission / inversion; type S: "
        "pairs the full evaluation leaves undecided that the rule decides against the sign of their full "
        "margin). *Null*: the same replay after swapping the two systems of every pair within each item with "
        "probability 1/2 (human and metric labels flip together), so every ± decision is false; `python -m "
        "protocol.simulate BUNDLE --metric M --null --json` prints the rate as `null_false_decision_rate`; "
        "*any false ±* is the share of null studies with at least one. The default is what `ProtocolSettings`, "
        "`python -m protocol.simulate` and `python -m protocol.plan` use without flags: adaptive policy, "
        "betting e-process per pair, e-BH across the study's pairs (false discovery rate ≤ γ). The paper's "
        "Algorithm 2 is `--policy paper --rule bayes`.",
        "",
        *main_table(seeds, measured),
        "",
        "Reading the table: the default keeps every null study free of false ± decisions (the paper policy "
        "decides a fifth to a third of the null pairs, every null study has some); the price is omissions: "
        "an anytime-valid rule needs more evidence than one look at γ, so pairs that the full evaluation "
        "decides narrowly stay undecided. The metric does not earn its keep under this rule on any bundle: "
        "its imputed labels sharpen the bets no more than the humans' own labels do, and it costs a few "
        "labels more than the human-only run of the same rule. PPI++ at the same budget is more correct but "
        "one look with a normal approximation, per pair, with no control across the study (every null "
        "study has false ±). The candidates below and the one-look trade-off show where the targets of "
        "issue 19 stand.",
        "",
    ]
    lines.append(f"({time.perf_counter() - began:.0f} s on this machine.)")
    write(SECTION, "\n".join(lines), args.dry_run)
    return 0


def candidates(seeds, dry_run: bool, began: float, bayes_seeds: int) -> int:
    lines = ["### Candidates for power, side by side (issue 19 items 2-4)", "",
             f"Generated by `scripts/report/error_control.py --part candidates --seeds {len(seeds)} --bayes-seeds "
             f"{bayes_seeds}` (columns as in the table above; the Bayesian rows over the first {bayes_seeds} seeds). "
             "Every e-process row is the default with one setting changed (`ProtocolSettings` field in "
             "brackets); the Bayesian rows spend γ over each pair's planned looks (`strict`), per pair, "
             "without control across pairs.", ""]
    for name, bundle, metric, restrict in (CASES[0], CASES[2]):
        log(f"candidates {name} {metric}")
        human, metric_table = tables(bundle, metric, restrict)
        results = run_rows(human, metric_table, CANDIDATES, seeds, bayes_seeds)
        lines += [f"#### {name}, {metric}", "", *candidate_table(results), "",
                  "One look at a fixed budget (every pair the same fraction of its labels; no sequential "
                  "looks, no control across pairs): what a test can reach with that many labels.", "",
                  *tradeoff(human, metric_table, seeds), ""]
    lines += [READING, ""]
    lines.append(f"({time.perf_counter() - began:.0f} s on this machine.)")
    write(SECTION + "_candidates", "\n".join(lines), dry_run)
    return 0


def paired_labels_by_pair(human, metric_table):
    """(human, metric) label arrays of each pair on the items both labelled (the item is the unit)."""
    for key in sorted(set(human) & set(metric_table)):
        pair = paired_labels(human[key].items, human[key].values, metric_table[key].items, metric_table[key].values)
        if len(pair[0]):
            yield pair


def bound(dry_run: bool, began: float) -> int:
    fractions = (0.3, 0.45, 0.6, 0.8)
    lines = ["### How many labels a metric can save at best (issue 19 items 3-4)", "",
             "Generated by `scripts/report/error_control.py --part bound` (`protocol.savings`, no replay). "
             "For each pair, the least share of a human-only rule's labels with which any rule that also reads "
             "the metric's label of every item reaches the same precision, at one look: the semiparametric "
             "efficiency bound, reached asymptotically by the estimator post-stratified by the metric's label "
             "(PPI++ reaches it only where E[h | m] is linear in m); a sequential, anytime-valid rule needs more. η² is the share of a pair's human-label "
             "variance that the metric's label explains (the correlation ratio); *uniform*: items drawn "
             "uniformly, *by metric label*: drawn more where the metric is least reliable (Neyman allocation). "
             "The moments come from the pair's full human labels, an oracle no rule has, so the real figure "
             "can only be higher. Ratios are over the study's labels (each pair weighted by its labels).", "",
             "| bundle, metric | pairs | sample acc | mean η² | "
             + " | ".join(f"uniform / by metric label at {f:.2f} of the items" for f in fractions) + " |",
             "|---|---|---|---|" + "---|" * len(fractions)]
    for name, bundle, metric, restrict in CASES:
        human, metric_table = tables(bundle, metric, restrict)
        pairs = list(paired_labels_by_pair(human, metric_table))
        accuracy = float(np.mean(np.concatenate([h == m for h, m in pairs])))
        found = [study_label_savings(pairs, fraction=f) for f in fractions]
        note = f" ({found[0]['pairs_constant']} with constant labels left out)" if found[0]["pairs_constant"] else ""
        lines.append(f"| {name}, {metric} | {found[0]['pairs']}{note} | {accuracy:.3f} | {found[0]['eta2']:.3f} | "
                     + " | ".join(f"{r['uniform_ratio']:.2f} / {r['active_ratio']:.2f}" for r in found) + " |")
    lines += ["", BOUND_READING, "", f"({time.perf_counter() - began:.0f} s on this machine.)"]
    write(SECTION + "_bound", "\n".join(lines), dry_run)
    return 0


def write(section: str, text: str, dry_run: bool) -> None:
    if dry_run:
        print(text)
    else:
        replace_section(section, text)


if __name__ == "__main__":
    sys.exit(main())
