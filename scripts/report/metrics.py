"""How the metrics of the real bundles compare with humans: the ``metrics_vs_humans`` section.

Usage: ``.venv/bin/python scripts/report/metrics.py [--permutations 1000] [--resamples 100]``

For every bundle in data/bundles (SummEval x 4 criteria, WMT21 en-de news, PandaLM) and every
metric in it, runs :func:`protocol.report.compare_metric` (Favi-Score, sample/system sign
accuracy, human-vs-metric sign-test DAG categories, SPA and PA), ranks the score metrics of a
bundle by SPA with greedy significance clusters (:func:`protocol.spa.rank_metrics`), writes
its section of docs/results.md through scripts.report.results_md.replace_section and the plotly
pages docs/plots/favi_<bundle>.html (per-system Favi-Score box plots) and
docs/plots/dag_<bundle>.html (human and metric DAGs, metric edges coloured by category).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol.bundle import read_bundle  # noqa: E402
from protocol.preferences import score_matrix  # noqa: E402
from protocol.ranking import dag_layout  # noqa: E402
from protocol.report import MetricReport, compare_metric  # noqa: E402
from protocol.spa import rank_metrics  # noqa: E402
from scripts.report.results_md import replace_section  # noqa: E402

SECTION = "metrics_vs_humans"
BUNDLES = (
    ("summeval_coherence", "SummEval coherence (expert Likert, 16 systems x 100 documents)"),
    ("summeval_consistency", "SummEval consistency"),
    ("summeval_fluency", "SummEval fluency"),
    ("summeval_relevance", "SummEval relevance"),
    ("wmt21_ende", "WMT21 en-de news (MQM vs sentence BLEU / chrF, 8 systems x 527 segments)"),
    ("pandalm", "PandaLM (3 human annotators per item; GPT-3.5 and PandaLM-7B verdicts as metrics)"),
)
PLOTS = ROOT / "docs" / "plots"
CATEGORY_COLOURS = {"Correct": "#2b8a3e", "Inversion": "#c92a2a", "Insertion": "#e67700", "Omission": "#868e96"}


def fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def favoured(report: MetricReport) -> str:
    """Most favoured and most disfavoured system by median per-system Favi-Score."""
    medians = {s: float(np.median(v)) for s, v in report.per_system_favi.items() if len(v)}
    if not medians:
        return "n/a"
    top = max(medians, key=medians.get)
    bottom = min(medians, key=medians.get)
    return f"+{top} ({medians[top]:+.2f}) / −{bottom} ({medians[bottom]:+.2f})"


def metric_row(report: MetricReport) -> str:
    counts = report.category_counts
    spa = report.spa
    route = {"scores": f"scores, {report.spa_items} items", "preferences": "preferences", "none": "n/a"}[
        report.spa_route
    ]
    if report.spa_route == "scores" and spa is not None:
        kept = len({s for pair in spa.pairs for s in pair})
        if kept < len(report.systems):
            route += f", {kept} systems"
    return (
        f"| {report.metric} | {len(report.pairs)} | {fmt(report.mean_abs_favi)} ± {fmt(report.std_abs_favi)} "
        f"| {fmt(report.sample_accuracy)} | {fmt(report.system_accuracy)} "
        f"| {counts.get('Correct', 0)} / {counts.get('Inversion', 0)} / {counts.get('Omission', 0)} / "
        f"{counts.get('Insertion', 0)} | {fmt(spa.spa if spa else None)} | {fmt(spa.pa if spa else None)} "
        f"| {route} | {favoured(report)} |"
    )


TABLE_HEAD = (
    "| metric | pairs | mean \\|Φ\\| ± sd | sample acc | system acc | Correct / Inversion / Omission / Insertion "
    "| SPA | PA | SPA on | favoured / disfavoured (median Φ) |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def clusters(bundle, metrics, permutations: int, resamples: int):
    """SPA ranking with significance clusters for the score metrics that cover every system."""
    systems, items, human = score_matrix(bundle, "human")
    matrices = {}
    for metric in metrics:
        if bundle.metric_kind(metric) != "score":
            continue
        metric_systems, metric_items, scores = score_matrix(bundle, metric)
        index = {item: k for k, item in enumerate(metric_items)}
        aligned = np.full_like(human, np.nan)
        for k, item in enumerate(items):
            if item in index:
                aligned[:, k] = scores[:, index[item]]
        matrices[metric] = aligned
    if len(matrices) < 2:
        return None, 0, ()
    complete = np.all(np.isfinite(human), axis=0)
    full = {m: x for m, x in matrices.items() if np.all(np.isfinite(x[:, complete]))}
    left_out = tuple(sorted(set(matrices) - set(full)))
    if len(full) < 2:
        return None, 0, left_out
    ranking = rank_metrics(
        human[:, complete],
        {m: x[:, complete] for m, x in full.items()},
        resamples=resamples,
        permutations=permutations,
        seed=0,
    )
    return ranking, int(complete.sum()), left_out


# ------------------------------------------------------------------------------------ plots


def _page(title: str, figures: list, intro: str) -> str:
    import plotly.io as pio

    body = "\n".join(
        pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False}) for fig in figures
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{title}</title><script src='plotly.min.js'></script></head>\n"
        f"<body style='font-family: sans-serif'><h1>{title}</h1><p>{intro}</p>\n{body}\n</body></html>\n"
    )


def _natural(name: str):
    """Sort key putting M2 before M10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def favi_figure(report: MetricReport):
    import plotly.graph_objects as go

    fig = go.Figure()
    for system, values in sorted(report.per_system_favi.items(), key=lambda kv: _natural(kv[0])):
        fig.add_trace(go.Box(y=np.round(values, 4), name=system, boxpoints="all", jitter=0.3, showlegend=False))
    fig.add_hline(y=0, line_dash="dot", line_color="grey")
    fig.update_layout(
        title=f"{report.metric}: Favi-Score of each system against every other system "
        f"(mean |Φ| {fmt(report.mean_abs_favi)})",
        yaxis_title="Φ (system as first)",
        yaxis_range=[-2.05, 2.05],
        height=420,
        margin={"t": 50, "b": 40},
    )
    return fig


def _graph_traces(fig, layout: dict, col: int, edge_colour):
    import plotly.graph_objects as go

    layers: dict[int, list] = {}
    for node in layout["nodes"]:
        layers.setdefault(node["layer"], []).append(node)
    where = {}
    for layer, nodes in layers.items():
        for node in nodes:
            where[node["system"]] = (node["position"] - (len(nodes) - 1) / 2, -layer)
    for edge in layout["edges"]:
        (x0, y0), (x1, y1) = where[edge["source"]], where[edge["target"]]
        fig.add_annotation(
            x=x1, y=y1, ax=x0, ay=y0, xref=f"x{col}", yref=f"y{col}", axref=f"x{col}", ayref=f"y{col}",
            showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.5, arrowcolor=edge_colour(edge), standoff=8,
        )
    cyclic = {s for c in layout["cycles"] for s in c}
    fig.add_trace(
        go.Scatter(
            x=[where[n["system"]][0] for n in layout["nodes"]],
            y=[where[n["system"]][1] for n in layout["nodes"]],
            text=[n["system"] for n in layout["nodes"]],
            mode="markers+text",
            textposition="middle right",
            marker={"size": 10, "color": ["#c92a2a" if n["system"] in cyclic else "#1c7ed6" for n in layout["nodes"]]},
            showlegend=False,
            hoverinfo="text",
        ),
        row=1,
        col=col,
    )
    xs = [x for x, _ in where.values()]
    # room on the right for the label of the last node in a row
    fig.update_xaxes(range=[min(xs) - 0.4, max(xs) + 1.3], row=1, col=col)


def dag_figure(report: MetricReport):
    from plotly.subplots import make_subplots

    category = {(p.first, p.second): p.category for p in report.pairs}

    def metric_edge_colour(edge):
        pair = tuple(sorted((edge["source"], edge["target"])))
        return CATEGORY_COLOURS.get(category.get(pair, "Correct"), "black")

    counts = report.category_counts
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            f"human ({len(report.human_graph.edges)} significant pairs)",
            f"{report.metric} ({len(report.metric_graph.edges)} significant pairs)",
        ),
    )
    _graph_traces(fig, dag_layout(report.human_graph), 1, lambda edge: "#343a40")
    _graph_traces(fig, dag_layout(report.metric_graph), 2, metric_edge_colour)
    layers = max(
        [n["layer"] for n in dag_layout(report.human_graph)["nodes"]]
        + [n["layer"] for n in dag_layout(report.metric_graph)["nodes"]]
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-layers - 0.4, 0.4])
    fig.update_layout(
        title=f"{report.metric}: sign-test DAGs (transitive reduction). Pairs: "
        + ", ".join(f"{k} {counts.get(k, 0)}" for k in CATEGORY_COLOURS)
        + " (metric edges: green correct, red inversion, orange insertion)",
        height=max(320, 90 * (layers + 1) + 80),
        margin={"t": 70, "b": 20},
        title_font_size=13,
    )
    return fig


def _categories_row(what: str, paper: str, reports: list[MetricReport], ours: str) -> str:
    """A table row: the paper's mean shares of the pair categories (correction-of-errors.txt
    Table 2) beside the mean over ``reports``."""
    totals = {k: np.mean([r.category_counts.get(k, 0) / len(r.pairs) for r in reports]) for k in CATEGORY_COLOURS}
    return (f"| correction-of-errors.txt Table 2 | {what}: Correct / Inversion / Omission / Insertion | {paper} "
            f"| {totals['Correct']:.2f} / {totals['Inversion']:.2f} / {totals['Omission']:.2f} / "
            f"{totals['Insertion']:.2f} ({ours}) |")


def write_plots(name: str, title: str, reports: list[MetricReport]) -> list[str]:
    import plotly.offline

    PLOTS.mkdir(parents=True, exist_ok=True)
    library = PLOTS / "plotly.min.js"
    if not library.exists():
        library.write_text(plotly.offline.get_plotlyjs())
    pages = (
        ("favi", "per-system Favi-Score", favi_figure,
         "Each box holds Φ(system, other) over the other systems; positive = the metric's errors "
         "favour that system (Favi-Score paper Fig. 6). Generated by scripts/report/metrics.py."),
        ("dag", "human vs metric ranking DAGs", dag_figure,
         "Edge winner → loser where the asymptotic sign test (ties discarded, α = 0.05) is significant; "
         "transitive edges omitted; red nodes lie on a cycle. Generated by scripts/report/metrics.py."),
    )
    written = []
    for prefix, subtitle, figure, caption in pages:
        page = PLOTS / f"{prefix}_{name}.html"
        page.write_text(_page(f"{title}: {subtitle}", [figure(r) for r in reports], caption))
        written.append(page.name)
    return written


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=100, help="PERM-INPUTS resamples per metric pair")
    parser.add_argument("--bundles", default=str(ROOT / "data" / "bundles"))
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    parts = [
        "## How the metrics compare with humans (Favi-Score, sign accuracy, DAGs, SPA)\n",
        "Generated by `scripts/report/metrics.py` (protocol.favi, protocol.ranking, protocol.spa, "
        "protocol.report). Definitions: human scalar scores are averaged per (item, system) before a "
        "preference is derived; every pair is judged on the items both the humans and the metric rated, "
        "one human label per item (several annotators of one item merged into the sign of their mean: "
        "the item is the unit) paired with the item's metric label. *sample acc* = trace(C)/sum(C) pooled over "
        "pairs; *system acc* = share of pairs where sign(mar(d)) = sign(mar(d̂)) (a human margin of exactly "
        "0 counts as agreement only if the metric's margin is also 0); mean |Φ| over pairs with at least "
        "one error. DAG categories compare the metric's sign-test decision (asymptotic, ties discarded, "
        "α = 0.05) with the human one on the same items (docs/formulas.md §5). SPA: 1000 shared permutations, seed "
        "0; on score matrices when both sides are scores (items complete for every kept system), otherwise "
        "per pair on the per-item preference labels. PA is the paper's Eq. 2, sign agreement of the "
        "human and metric totals (deterministic). Clusters: greedy "
        f"significance clusters of the SPA ranking (PERM-INPUTS, {args.resamples} resamples, p ≤ 0.05; "
        "SPA paper §4.4). Favoured / disfavoured: the systems with the highest "
        "and lowest median per-system Φ.\n",
    ]
    plot_pages = []
    all_reports = {}
    for name, title in BUNDLES:
        path = Path(args.bundles) / f"{name}.jsonl.gz"
        if not path.exists():
            parts.append(f"### {title}\n\n`{path.name}` not found; skipped.\n")
            continue
        bundle = read_bundle(path)
        reports = [compare_metric(bundle, m, permutations=args.permutations, seed=0) for m in bundle.metrics]
        all_reports[name] = reports
        human_graph = reports[0].human_graph
        parts.append(f"### {title}\n")
        parts.append(
            f"Human sign-test DAG: {len(human_graph.edges)} of {len(reports[0].pairs)} pairs significant, "
            f"{len(human_graph.reduced_edges)} edges after transitive reduction, "
            f"{'no cycles' if human_graph.is_acyclic else 'cycles: ' + str(human_graph.cycles)}.\n"
        )
        parts.append(TABLE_HEAD)
        parts.extend(metric_row(r) for r in sorted(reports, key=lambda r: r.metric.lower()))
        parts.append("")
        if bundle.human_scores:
            ranking, n_items, left_out = clusters(bundle, bundle.metrics, args.permutations, args.resamples)
            if ranking is not None:
                ranked = ", ".join(
                    f"{m} {s:.3f} ({r})" for m, s, r in zip(ranking.metrics, ranking.spa, ranking.ranks)
                )
                note = f"; not ranked (not every system scored): {', '.join(left_out)}" if left_out else ""
                parts.append(f"SPA ranking with cluster rank in brackets ({n_items} items{note}): {ranked}.\n")
        if not args.no_plots:
            pages = write_plots(name, title.split(" (")[0], reports)
            plot_pages.extend(pages)
            parts.append("Plots: " + ", ".join(f"[{p}](plots/{p})" for p in pages) + ".\n")

    parts.append(published_comparison(all_reports))
    parts.append(f"_Run time {time.perf_counter() - started:.0f} s._\n")
    replace_section(SECTION, "\n".join(parts))
    print("\n".join(parts))
    return 0


def published_comparison(all_reports: dict) -> str:
    """Our numbers next to the ones the papers report for similar (not identical) data."""

    def get(bundle, metric):
        for r in all_reports.get(bundle, []):
            if r.metric == metric:
                return r
        return None

    lines = [
        "### Next to the published numbers\n",
        "The papers used different metric sets and, for the Correction paper, metric ratings on the whole "
        "CNN/DM test set; our bundles hold metric scores on the 100 human-rated documents only. The numbers "
        "are therefore comparable in kind, not expected to match.\n",
        "| source | setting | published | ours |",
        "|---|---|---|---|",
    ]
    bert = get("summeval_consistency", "bert_score_f")
    rouge = get("summeval_consistency", "rougel_f")
    if bert:
        lines.append(
            "| favi-score.txt App. D.2 | SummEval consistency, BERTScore: system acc / sample acc / mean \\|Φ\\| "
            f"| 0.789 / 0.05 / 0.29 | {fmt(bert.system_accuracy)} / {fmt(bert.sample_accuracy)} / "
            f"{fmt(bert.mean_abs_favi)} (bert_score_f) |"
        )
    if rouge:
        lines.append(
            "| favi-score.txt App. D.2 | SummEval consistency, ROUGE: system acc / sample acc / mean \\|Φ\\| "
            f"| 0.633 / 0.07 / 0.339 | {fmt(rouge.system_accuracy)} / {fmt(rouge.sample_accuracy)} / "
            f"{fmt(rouge.mean_abs_favi)} (rougel_f) |"
        )
    relevance = all_reports.get("summeval_relevance", [])
    classic = [r for r in relevance if r.metric in {"bert_score_f", "rougel_f", "rouge1_f", "rouge2_f", "mover_score"}]
    if classic:
        lines.append(_categories_row(
            "SummEval relevance, metric applied naively, mean over metrics",
            "0.55 / 0.19 / 0.03 / 0.23 (7 metrics, 11k ratings)", classic,
            f"{len(classic)} metrics: {', '.join(r.metric for r in classic)}; 100 ratings"))
    wmt = [r for r in all_reports.get("wmt21_ende", [])]
    if wmt:
        lines.append(_categories_row("WMT21 en-de, naive metric, mean over metrics",
                                     "0.52 / 0.07 / 0.10 / 0.31 (4 metrics, 11 systems)", wmt,
                                     "sentence BLEU, chrF; 8 MT systems, no references"))
    for metric, agreement in (("gpt35", "0.716"), ("pandalm7b", "0.668")):
        r = get("pandalm", metric)
        if r:
            lines.append(
                f"| data/bundles/PROVENANCE.md | PandaLM {metric}: agreement with the human majority label | "
                f"{agreement} (per item, majority) | sample acc {fmt(r.sample_accuracy)} (per item, sign of the mean of its labels) |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
