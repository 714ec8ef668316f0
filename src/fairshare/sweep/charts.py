"""The sweep report's Pareto charts (inline SVG, drawn like the comparison report's charts)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..report.charts import chart_style, figure_svg
from .decide import Decisions
from .summary import Summary


def _scatter(
    points: Sequence[tuple[str, float, float]], front: Sequence[str], xlabel: str, prefix: str
) -> str:
    with chart_style():
        fig, ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")
    xs = [x for _, x, _ in points]
    ys = [y / 3600 for _, _, y in points]
    ax.scatter(xs, ys, s=28, color="#4c72b0", zorder=2)
    on = [(x, y / 3600) for pid, x, y in points if pid in front]
    if on:
        ax.scatter(
            [p[0] for p in on], [p[1] for p in on], s=110, facecolors="none", edgecolors="#c44e52", zorder=3
        )
        line = sorted(on)
        ax.plot([p[0] for p in line], [p[1] for p in line], color="#c44e52", lw=1, zorder=1)
    for pid, x, y in points:
        ax.annotate(pid, (x, y / 3600), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("wait p90 (hours)")
    ax.grid(alpha=0.3)
    svg = figure_svg(fig, prefix)
    plt.close(fig)
    return svg


def draw(summaries: Sequence[Summary], decisions: Decisions) -> dict[str, str]:
    mine = [s for s in summaries if s.policy == decisions.policy]
    spread = [(s.variant, s.share_spread, s.wait_p90_s) for s in mine if s.share_spread is not None]
    lost = [(s.variant, s.lost_work_pct, s.wait_p90_s) for s in mine]
    return {
        "spread": _scatter(
            [(v, float(x), y) for v, x, y in spread],
            decisions.front_spread,
            "share spread (max − min share delivery)",
            "sp",
        ),
        "lost": _scatter(lost, decisions.front_lost, "lost work (% of allocated GPU time)", "lw"),
    }
