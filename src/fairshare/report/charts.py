"""The report's charts: matplotlib (Agg) figures written as inline SVG.

Each chart is one function of the compared results, named in CHARTS (captions and page order are
report.CHART_CAPTIONS), and `chart_svg` renders one by name. Rendering is deterministic (fixed SVG
hash salt, no dates): a chart is the same bytes drawn here or in a worker (report.ChartPool).
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..replay.results import ReplayResult
from .table import WAIT_FLOOR_S as _WAIT_FLOOR_S
from .table import class_names

_POLICY_COLORS = {
    "fairshare": "#1f77b4",
    "fifo": "#7f7f7f",
    "priority-labels": "#ff7f0e",
    "slurm-multifactor": "#9467bd",
    "slurm-multifactor-firstfit": "#c5b0d5",
}
_SPARE_COLORS = ("#2ca02c", "#d62728", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
_GROUP_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_RC: dict[Any, Any] = {
    "svg.hashsalt": "fairshare-report",
    "svg.fonttype": "none",
    "font.size": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
}
_WAIT_TICKS = (
    (10, "10s"),
    (60, "1m"),
    (300, "5m"),
    (900, "15m"),
    (3600, "1h"),
    (4 * 3600, "4h"),
    (86400, "1d"),
    (4 * 86400, "4d"),
    (14 * 86400, "2w"),
    (60 * 86400, "60d"),
)


@contextmanager
def chart_style() -> Iterator[None]:
    """The charts' matplotlib settings (one look for every chart of the report and the sweep)."""
    # svg.fonttype "none" writes text as text: the browser draws every glyph with its own fonts, so
    # matplotlib's "Glyph ... missing from font(s) DejaVu Sans" (emoji or other scripts in group
    # names) only concerns its layout estimate, and is not shown to the user.
    with matplotlib.rc_context(_RC), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        yield


def figure_svg(fig: Figure, prefix: str) -> str:
    """Inline SVG markup of a figure; element ids prefixed so several SVGs can share one page."""
    buf = io.StringIO()
    with chart_style():
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    return re.sub(
        r'(\bid="|url\(#|href="#)([^")]+)',
        lambda m: m.group(1) + (prefix + m.group(2) if m.group(2) in ids else m.group(2)),
        text,
    )


def _colors(results: Sequence[ReplayResult]) -> list[str]:
    spare = iter(_SPARE_COLORS * (1 + len(results) // len(_SPARE_COLORS)))
    return [_POLICY_COLORS.get(r.strategy) or next(spare) for r in results]


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#777")


def _grid(n: int, ncols: int, height: float) -> tuple[Figure, list[Axes]]:
    cols, rows = max(1, min(n, ncols)), max(1, math.ceil(n / ncols))
    with chart_style():
        fig, axes = plt.subplots(
            rows, cols, figsize=(10.0, height * rows), layout="constrained", squeeze=False
        )
    flat: list[Axes] = [ax for line in axes for ax in line]
    for ax in flat[max(n, 1) :]:
        ax.set_visible(False)
    return fig, flat


def _wait_cdf(results: Sequence[ReplayResult]) -> Figure:
    classes = class_names(results) or ["(no classes)"]
    colors = _colors(results)
    fig, axes = _grid(len(classes), 3, 3.2)
    with chart_style():
        finite = [w for r in results for ws in r.waits.values() for w in ws if math.isfinite(w)]
        longest = max([*finite, 3600.0])
        ticks = [(v, label) for v, label in _WAIT_TICKS if v <= longest * 1.5]
        for ax, cls in zip(axes, classes, strict=False):
            ax.set_title(cls)
            drawn = False
            for r, color in zip(results, colors, strict=True):
                waits = sorted(max(_WAIT_FLOOR_S, w) for w in r.waits.get(cls, ()) if math.isfinite(w))
                if waits:
                    ys = [(i + 1) / len(waits) for i in range(len(waits))]
                    ax.step([_WAIT_FLOOR_S, *waits], [0.0, *ys], where="post", color=color, label=r.strategy)
                    drawn = True
            ax.set_xscale("log")
            ax.set_xlim(_WAIT_FLOOR_S, longest * 1.5)
            ax.set_xticks([v for v, _ in ticks], [label for _, label in ticks])
            ax.minorticks_off()
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("wait to first start")
            if not drawn:
                _empty(ax, "no jobs")
        axes[0].set_ylabel("fraction of jobs started")
        fig.legend(
            handles=_policy_handles(results, colors), loc="outside lower center", ncols=min(len(results), 6)
        )
    return fig


def _policy_handles(results: Sequence[ReplayResult], colors: Sequence[str]) -> list[Line2D]:
    return [Line2D([], [], color=c, label=r.strategy) for r, c in zip(results, colors, strict=True)]


def _time_axis(results: Sequence[ReplayResult]) -> tuple[float, str]:
    end = max([t for r in results for t in r.series.t[-1:]] + [0.0])
    return (86400.0, "days since start") if end > 3 * 86400 else (3600.0, "hours since start")


def _top_groups(names: Sequence[str]) -> list[str]:
    return sorted(g for g in names if "/" not in g)


def _delivery(results: Sequence[ReplayResult]) -> Figure:
    scale, xlabel = _time_axis(results)
    groups = _top_groups(
        list(dict.fromkeys(g for r in results for g in (*r.series.owed, *r.series.delivered)))
    )
    color = {g: _GROUP_COLORS[i % len(_GROUP_COLORS)] for i, g in enumerate(groups)}
    fig, axes = _grid(len(results), 2, 3.4)
    with chart_style():
        for ax, r in zip(axes, results, strict=False):
            ax.set_title(r.strategy)
            xs = [t / scale for t in r.series.t]
            drawn = False
            for g in groups:
                for values, style in ((r.series.delivered.get(g, ()), "-"), (r.series.owed.get(g, ()), "--")):
                    n = min(len(xs), len(values))
                    if n:
                        ax.plot(xs[:n], values[:n], style, color=color[g], linewidth=1.4)
                        drawn = True
            ax.set_xlabel(xlabel)
            ax.set_ylabel("GPU-equivalents")
            ax.set_ylim(bottom=0)
            if not drawn:
                _empty(ax, "no samples")
        handles = [Line2D([], [], color=color[g], label=g) for g in groups]
        handles += [
            Line2D([], [], color="#444", linestyle="-", label="delivered"),
            Line2D([], [], color="#444", linestyle="--", label="owed"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 7))
    return fig


def _occupancy(results: Sequence[ReplayResult]) -> Figure:
    scale, xlabel = _time_axis(results)
    colors = _colors(results)
    with chart_style():
        fig, ax = plt.subplots(figsize=(10.0, 3.2), layout="constrained")
        drawn = False
        for r, c in zip(results, colors, strict=True):
            n = min(len(r.series.t), len(r.series.occupancy))
            if n:
                ax.plot(
                    [t / scale for t in r.series.t[:n]],
                    [100 * v for v in r.series.occupancy[:n]],
                    color=c,
                    linewidth=1.4,
                    label=r.strategy,
                )
                drawn = True
        ax.set_ylim(0, 102)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("occupancy %")
        if drawn:
            fig.legend(
                handles=_policy_handles(results, colors),
                loc="outside lower center",
                ncols=min(len(results), 6),
            )
        else:
            _empty(ax, "no samples")
    return fig


def _lost_work(results: Sequence[ReplayResult]) -> Figure:
    groups = _top_groups(list(dict.fromkeys(g for r in results for g in r.lost_gpu_h)))
    colors = _colors(results)
    with chart_style():
        fig, ax = plt.subplots(figsize=(10.0, 3.2), layout="constrained")
        width = 0.8 / max(1, len(results))
        for i, (r, c) in enumerate(zip(results, colors, strict=True)):
            xs = [j + (i - (len(results) - 1) / 2) * width for j in range(len(groups))]
            values = [r.lost_gpu_h.get(g, 0.0) for g in groups]
            bars = ax.bar(xs, values, width, color=c, label=r.strategy)
            if len(groups) * len(results) <= 24:
                ax.bar_label(bars, [f"{v:.1f}" if v else "" for v in values], fontsize=8, padding=2)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylabel("GPU-hours lost")
        ax.grid(axis="x", visible=False)
        ax.margins(y=0.15)
        if not groups:
            _empty(ax, "no groups")
        elif not any(r.lost_gpu_h.get(g) for r in results for g in groups):
            _empty(ax, "no work lost to preemption")
        else:
            fig.legend(loc="outside lower center", ncols=min(len(results), 6))
    return fig


CHARTS: dict[str, Callable[[Sequence[ReplayResult]], Figure]] = {
    "waits": _wait_cdf,
    "delivery": _delivery,
    "occupancy": _occupancy,
    "lost_work": _lost_work,
}


def chart_svg(name: str, results: Sequence[ReplayResult], prefix: str) -> str:
    """One chart of CHARTS as inline SVG markup, its element ids prefixed with `prefix`."""
    fig = CHARTS[name](results)
    try:
        return figure_svg(fig, prefix)
    finally:
        plt.close(fig)
