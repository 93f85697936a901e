"""Plotly figures for the researcher dashboard, built server-side from selector data and
rendered in the browser by the vendored plotly.js. Each function returns a figure as a plain
dict (the template serialises it once, with json_script). Titles live in the HTML card, where
they wrap instead of being clipped; ``uirevision`` keeps a researcher's zoom across refreshes."""
from __future__ import annotations

import json

import plotly.graph_objects as go

LAYOUT = dict(margin=dict(l=40, r=20, t=10, b=40), height=320, paper_bgcolor="white", plot_bgcolor="white",
              font=dict(family="system-ui, sans-serif", size=12), uirevision="keep")


def _plain(fig: go.Figure) -> dict:
    """The figure as JSON-able dicts and lists (plotly's encoder turns numpy arrays into lists)."""
    return json.loads(fig.to_json())


def dag_figure(layout: dict) -> dict:
    """Layered significance DAG: one row per layer (winners on top), arrows winner -> loser."""
    nodes = {n["system"]: n for n in layout.get("nodes", [])}
    widths: dict[int, int] = {}
    for n in nodes.values():
        widths[n["layer"]] = max(widths.get(n["layer"], 0), n["position"] + 1)
    # A wide layer wraps onto sub-rows of at most ROW nodes, so 16 unranked systems stay legible.
    row = 6
    offsets, depth = {}, 0.0
    for layer in sorted(widths):
        offsets[layer] = depth
        depth += 1 + 0.45 * ((widths[layer] - 1) // row)

    def xy(system: str) -> tuple[float, float]:
        n = nodes[system]
        per_row = min(widths[n["layer"]], row)
        sub, column = divmod(n["position"], row)
        return (column + 0.5) / per_row, -(offsets[n["layer"]] + 0.45 * sub)

    fig = go.Figure()
    in_cycle = {s for cycle in layout.get("cycles", []) for s in cycle}
    annotations = []
    for edge in layout.get("edges", []):
        (x0, y0), (x1, y1) = xy(edge["source"]), xy(edge["target"])
        annotations.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                                showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=1.2,
                                arrowcolor="#7a8591", standoff=12, startstandoff=12, text=""))
    fig.add_trace(go.Scatter(
        x=[xy(s)[0] for s in nodes], y=[xy(s)[1] for s in nodes], text=list(nodes), mode="markers+text",
        textposition="top center", hoverinfo="text",
        marker=dict(size=14, color=["#a32020" if s in in_cycle else "#2457a6" for s in nodes]),
    ))
    depth = max(depth - 1, 0)
    fig.update_layout(**LAYOUT, showlegend=False, annotations=annotations,
                      xaxis=dict(visible=False, range=[-0.05, 1.05]),
                      yaxis=dict(visible=False, range=[-depth - 0.6, 0.6]))
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
                                 mode="lines+markers", hovertemplate=pair + ": θ=%{y:.3f} after %{x} judgements"))
    for level in (gamma / 2, 1 - gamma / 2):
        fig.add_hline(y=level, line_dash="dash", line_color="#a32020")
    fig.update_layout(**LAYOUT, showlegend=False,
                      xaxis=dict(title="judgements of the pair"), yaxis=dict(range=[0, 1], title="θ"))
    return _plain(fig)
