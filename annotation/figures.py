"""The researcher dashboard's figures and charts: plotly figures built server-side from the
selectors' data and rendered in the browser by the vendored plotly.js, and the charts the
template shows (each with its table for a browser without JavaScript). Each function returns a figure as a plain
dict (the template serialises it once, with json_script). Titles live in the HTML card, where
they wrap instead of being clipped; ``uirevision`` keeps a researcher's zoom across refreshes."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go

LAYOUT = dict(margin=dict(l=40, r=20, t=10, b=40), height=320, paper_bgcolor="white", plot_bgcolor="white",
              font=dict(family="system-ui, sans-serif", size=12), uirevision="keep")


def _plain(fig: go.Figure) -> dict:
    """The figure as JSON-able dicts and lists (plotly's encoder turns numpy arrays into lists)."""
    return json.loads(fig.to_json())


def dag_figure(layout: dict) -> dict:
    """Layered significance DAG: one row per layer (winners on top), arrows winner -> loser.

    Systems are labelled boxes (annotations) so a label never sits under an arrow; within a
    wide layer every other box is shifted down a little, so neighbouring labels cannot touch.
    """
    nodes = {n["system"]: n for n in layout.get("nodes", [])}
    widths: dict[int, int] = {}
    for n in nodes.values():
        widths[n["layer"]] = max(widths.get(n["layer"], 0), n["position"] + 1)
    # A wide layer wraps onto sub-rows of at most ROW nodes, so 16 unranked systems stay legible.
    row = 6
    offsets, depth = {}, 0.0
    for layer in sorted(widths):
        offsets[layer] = depth
        depth += 1 + 0.6 * ((widths[layer] - 1) // row)

    def xy(system: str) -> tuple[float, float]:
        n = nodes[system]
        per_row = min(widths[n["layer"]], row)
        sub, column = divmod(n["position"], row)
        stagger = 0.22 if per_row > 3 and column % 2 else 0.0
        return (column + 0.5) / per_row, -(offsets[n["layer"]] + 0.6 * sub + stagger)

    fig = go.Figure()
    in_cycle = {s for cycle in layout.get("cycles", []) for s in cycle}
    annotations = []
    for edge in layout.get("edges", []):
        (x0, y0), (x1, y1) = xy(edge["source"]), xy(edge["target"])
        annotations.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                                showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=1.2,
                                arrowcolor="#7a8591", standoff=11, startstandoff=11, text=""))
    for system in nodes:
        x, y = xy(system)
        colour = "#a32020" if system in in_cycle else "#2457a6"
        annotations.append(dict(x=x, y=y, xref="x", yref="y", text=system, showarrow=False,
                                font=dict(color="white", size=11), bgcolor=colour, bordercolor=colour,
                                borderpad=2, opacity=0.95))
    # Invisible markers under the boxes give every system a hover label.
    fig.add_trace(go.Scatter(x=[xy(s)[0] for s in nodes], y=[xy(s)[1] for s in nodes], text=list(nodes),
                             mode="markers", hoverinfo="text", marker=dict(size=18, opacity=0)))
    depth = max(depth - 1, 0)
    fig.update_layout(**LAYOUT, showlegend=False, annotations=annotations,
                      xaxis=dict(visible=False, range=[-0.08, 1.08]),
                      yaxis=dict(visible=False, range=[-depth - 0.55, 0.35]))
    return _plain(fig)


def favi_box_figure(per_system: dict[str, list[float]]) -> dict:
    """Per-system Favi-Score: Φ(s as first, o as second) over opponents o (> 0: the metric
    favours s)."""
    fig = go.Figure()
    for system, values in per_system.items():
        fig.add_trace(go.Box(y=values, name=system, boxpoints="all", jitter=0.3, marker=dict(size=4)))
    fig.add_hline(y=0, line_dash="dot", line_color="#5b6672")
    fig.update_layout(**LAYOUT,
                      showlegend=False, yaxis=dict(range=[-2.05, 2.05], title="Φ"))
    return _plain(fig)


def separability_figure(values: list[float]) -> dict:
    fig = go.Figure(go.Histogram(x=values, nbinsx=30, marker_color="#2457a6"))
    fig.update_layout(**LAYOUT, xaxis=dict(title="δ (normalised)"),
                      yaxis=dict(title="comparisons"))
    return _plain(fig)


def timeline_figure(timeline: list[dict], gamma: float) -> dict:
    """θ of every pair after each closed round, with the decision thresholds."""
    fig = go.Figure()
    by_pair: dict[str, list[dict]] = {}
    for row in timeline:
        by_pair.setdefault(row["pair"], []).append(row)
    for pair, rows in by_pair.items():
        fig.add_trace(go.Scatter(x=[r["judgements"] for r in rows], y=[r["theta"] for r in rows], name=pair,
                                 mode="lines+markers", cliponaxis=False,
                                 hovertemplate=pair + ": θ=%{y:.3f} after %{x} judgements<extra></extra>"))
    for level in (gamma / 2, 1 - gamma / 2):
        fig.add_hline(y=level, line_dash="dash", line_color="#a32020")
    fig.update_layout(**LAYOUT, showlegend=False,
                      xaxis=dict(title="judgements of the pair"), yaxis=dict(range=[-0.04, 1.04], title="θ"))
    return _plain(fig)


def pair_theta_figure(rounds: list[dict], gamma: float) -> dict:
    """One pair: θ after each round, and the share of its non-tied judgements preferring the
    first system with its 95 % credible interval (θ is the probability that share exceeds 1/2)."""
    x = [r["judgements"] for r in rounds]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=x, y=[r["share"] for r in rounds], mode="markers", name="share preferring first (95 % interval)",
        marker=dict(color="#7a8591", size=7), cliponaxis=False,
        error_y=dict(type="data", symmetric=False, array=[r["share_high"] - r["share"] for r in rounds],
                     arrayminus=[r["share"] - r["share_low"] for r in rounds], color="#9aa4ae"),
        hovertemplate="share %{y:.2f} after %{x} judgements<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=[r["theta"] for r in rounds], mode="lines+markers", name="θ",
                             marker=dict(color="#2457a6", size=8), cliponaxis=False,
                             hovertemplate="θ %{y:.3f} after %{x} judgements<extra></extra>"))
    for level in (gamma / 2, 1 - gamma / 2):
        fig.add_hline(y=level, line_dash="dash", line_color="#a32020")
    fig.update_layout(**LAYOUT, legend=dict(orientation="h", y=-0.25), xaxis=dict(title="judgements of the pair", rangemode="tozero"),
                      yaxis=dict(range=[-0.04, 1.04], title="probability"))
    fig.update_layout(height=340, margin=dict(l=50, r=20, t=10, b=80))
    return _plain(fig)


def _decision_mark(cell: dict) -> str:
    """▲/▼: the protocol decided the row better/worse; △/▽: implied by a ranking's decisions."""
    decision = cell.get("decision", 0)
    if not decision:
        return ""
    implied = cell.get("tone", "").startswith("implied")
    return ("△" if implied else "▲") if decision > 0 else ("▽" if implied else "▼")


def matrix_figure(order: list[str], matrix: list[dict]) -> dict:
    """The pair matrix as a heatmap (for many systems, where a table of k² cells is too big):
    cell (row, column) = θ that the row system beats the column system (0.5 before any
    judgement), ▲/▼ where the protocol decided the row better/worse (△/▽ where a ranking study's
    decisions imply it, ``_decision_mark``). Per cell only numbers and
    a mark (50 systems: 2,500 cells), no per-cell text or link: static/js/dashboard.js opens
    the pair page of a clicked cell from its row and column."""
    z, text = [], []
    for row in matrix:
        # No θ yet (no judgement): 0.5, the uniform prior's mean (white: no evidence either way).
        z.append([None if "status" not in c else 0.5 if c["theta"] is None else round(c["theta"], 3)
                  for c in row["cells"]])
        text.append([_decision_mark(c) for c in row["cells"]])
    size = max(320, min(14 * len(order) + 120, 900))
    fig = go.Figure(go.Heatmap(
        z=z, x=order, y=order, text=text, texttemplate="%{text}",
        hovertemplate="%{y} vs %{x}<br>θ = %{z:.2f}<extra></extra>", zmin=0, zmax=1, colorscale="RdBu",
        colorbar=dict(title=dict(text="θ"), thickness=12), xgap=1, ygap=1))
    # The diagonal (a system against itself) is a gap: the grey background shows through.
    fig.update_layout(**{**LAYOUT, "height": size, "margin": dict(l=90, r=20, t=10, b=90), "plot_bgcolor": "#dde1e6"})
    fig.update_yaxes(type="category", autorange="reversed", tickfont=dict(size=9), showgrid=False)
    fig.update_xaxes(type="category", tickangle=-60, tickfont=dict(size=9), showgrid=False)
    return _plain(fig)


# --- The dashboard's charts, each with its no-JavaScript table, and the leaderboard's bars ---
# (built from the round's data: reports caches them with it)

def histogram_rows(values: list[float], bins: int = 10) -> list[tuple[str, int]]:
    counts, edges = np.histogram(values, bins=bins)
    return [(f"{edges[k]:.2f} to {edges[k + 1]:.2f}", int(n)) for k, n in enumerate(counts)]


def dashboard_charts(data: dict, *, gamma: float) -> list[dict]:
    """The dashboard's plotly charts, each with a title, a help anchor and the table shown
    instead of it without JavaScript (``fallback``: head, rows, and the text when empty)."""
    charts = []
    for name, title, layout in (
        ("protocol", "Protocol decisions", data["dags"].get("protocol")),
        ("human", "Humans only (sign test)", data["dags"].get("human")),
        ("metric", f"Metric only: {data['metric'] or 'none'} (sign test)", data["dags"].get("metric")),
    ):
        if layout and (name != "metric" or data["metric"]) and len(layout["nodes"]) > DAG_MOST_SYSTEMS:
            # 200 boxes in rows of 6 overlap into an unreadable block, and the table of its
            # edges is thousands of rows of every page's HTML
            charts.append({"name": f"dag-{name}", "title": title, "help": "dag", "figure": None,
                           "note": f"{len(layout['nodes'])} systems are too many to draw as a graph: the "
                                   f"leaderboard's tiers and the pair matrix show these decisions, and "
                                   f"decisions.csv lists every pair.",
                           "fallback": {"head": (), "rows": [], "empty": ""}})
        elif layout and (name != "metric" or data["metric"]):
            edges = [(e["source"], e["target"]) for e in layout["edges"]]
            charts.append({"name": f"dag-{name}", "title": title, "help": "dag", "figure": dag_figure(layout),
                           "note": "" if edges else "No decisions yet: no system is significantly better than another.",
                           "fallback": {"head": ("better", "worse"), "rows": edges, "empty": "No decisions yet."}})
    if data["per_system_favi"]:
        charts.append({"name": "favi", "title": "Favi-Score per system (> 0: the metric favours it)", "help": "favi",
                       "figure": favi_box_figure(data["per_system_favi"]), "note": "",
                       "fallback": {"head": ("system", "pairs with errors", "median Φ", "min Φ", "max Φ"),
                                    "rows": [(s, len(v), *(f"{f(v):.2f}" for f in (np.median, np.min, np.max)))
                                             if v else (s, 0, "—", "—", "—")
                                             for s, v in data["per_system_favi"].items()],
                                    "empty": "No metric errors yet."}})
    if data["timeline"]:
        last = {}
        for row in data["timeline"]:
            last[row["pair"]] = row
        charts.append({"name": "timeline", "title": "θ = P(first better) after each round", "help": "theta",
                       "figure": timeline_figure(data["timeline"], gamma), "note": "",
                       "fallback": {"head": ("pair", "rounds", "judgements", "last θ"),
                                    "rows": [(r["pair"], r["round"], r["judgements"], f"{r['theta']:.3f}")
                                             for r in last.values() if r["theta"] is not None],
                                    "empty": "No round closed yet."}})
    if data["separability"]:
        charts.append({"name": "separability", "title": "Separability of the comparisons", "help": "separability",
                       "figure": separability_figure(data["separability"]), "note": "",
                       "fallback": {"head": ("separability δ", "comparisons"),
                                    "rows": histogram_rows(data["separability"]), "empty": ""}})
    for chart in charts:
        chart["figure_id"] = f"figure-{chart['name']}"
    return charts


# Up to this many systems the pair matrix is a table of links (readable, and it works without
# JavaScript); beyond, k² cells weigh hundreds of KB (2,500 at 50 systems), so it is a heatmap
# whose no-JavaScript fallback is the pairs' CSV.
# The significance DAGs are drawn for at most this many systems (a page of the matrix's ranks).
DAG_MOST_SYSTEMS = 50
MATRIX_TABLE_MAX = 20


# Beyond this many systems the heatmap is shown a page at a time: windows of this many
# consecutive ranks of the order, each overlapping the next by MATRIX_PAGE_OVERLAP so that
# neighbours across a page's edge meet on one page (200 systems: 5 pages of 2,500 cells, where
# the whole 40,000-cell matrix made the dashboard's HTML 569-618 KB).
MATRIX_PAGE_SYSTEMS = 50
MATRIX_PAGE_OVERLAP = 10


def matrix_pages(systems: int) -> list[tuple[int, int]]:
    """The heatmap's pages over an order of ``systems``: (first, last) ranks, 0-based and
    exclusive of ``last``; one page of every system up to MATRIX_PAGE_SYSTEMS."""
    if systems <= MATRIX_PAGE_SYSTEMS:
        return [(0, systems)]
    step = MATRIX_PAGE_SYSTEMS - MATRIX_PAGE_OVERLAP
    starts = list(range(0, systems - MATRIX_PAGE_SYSTEMS, step)) + [systems - MATRIX_PAGE_SYSTEMS]
    return [(start, start + MATRIX_PAGE_SYSTEMS) for start in starts]


def matrix_charts(data: dict) -> list[dict] | None:
    """The pair matrix as heatmap charts, one per page of ranks (``matrix_pages``), for more
    than MATRIX_TABLE_MAX systems; else None (the matrix is a table)."""
    order = data["order"]
    if len(order) <= MATRIX_TABLE_MAX:
        return None
    charts = []
    for number, (first, last) in enumerate(matrix_pages(len(order)), 1):
        rows = [dict(row, cells=row["cells"][first:last]) for row in data["matrix"][first:last]]
        charts.append({"name": "matrix", "figure_id": "figure-matrix", "page": number,
                       "first_rank": first + 1, "last_rank": last,
                       "figure": matrix_figure(order[first:last], rows)})
    return charts


def leaderboard_bars(rows: list[dict]) -> None:
    """Adds to each leaderboard row the position of its score interval on a common scale
    (percent of the cell width), so the table shows the intervals without JavaScript."""
    values = [v for r in rows for v in (r["low"], r["high"]) if v is not None]
    if not values:
        return
    lo, hi = min(values + [0.0]), max(values + [0.0])
    span = (hi - lo) or 1.0
    for r in rows:
        r["bar_zero"] = round(100 * (0.0 - lo) / span, 1)
        if r["score"] is None:
            continue
        r["bar_left"] = round(100 * (r["low"] - lo) / span, 1)
        r["bar_width"] = max(round(100 * (r["high"] - r["low"]) / span, 1), 0.5)
        r["bar_point"] = round(100 * (r["score"] - lo) / span, 1)
