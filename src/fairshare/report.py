"""One self-contained HTML report comparing policies: tables plus inline SVG charts.

No network: no external scripts, styles, fonts or images; every chart is SVG written by matplotlib's
Agg-backed pyplot. The output is byte-identical for the same input (fixed SVG hash salt, no dates).
"""

from __future__ import annotations

import html
import io
import math
import pathlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fairshare.results import Comparison, ReplayResult
from fairshare.table import NA, Row, class_names, metric_rows

POLICY_DESCRIPTIONS = {
    "fairshare": "rolling-window debt ordering with execution contracts: the group furthest below its share "
    "over the window goes first; running jobs keep a protected window and checkpoints bound "
    "the work lost when they are preempted.",
    "fifo": "first come, first served; a later job that fits may start when earlier ones cannot "
    "(no reservation, no preemption).",
    "priority-labels": "high > medium > low labels, first come first served within a label; a higher label "
    "may preempt a lower one once its protected window has passed.",
    "slurm-multifactor": "Slurm-style multifactor priority: half-life decayed fair-share plus job age.",
}
_POLICY_COLORS = {
    "fairshare": "#1f77b4",
    "fifo": "#7f7f7f",
    "priority-labels": "#ff7f0e",
    "slurm-multifactor": "#9467bd",
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
_WAIT_FLOOR_S = 10.0
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
_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1100px;margin:auto;padding:1em 1.5em 3em}
h2{border-top:2px solid #ccc;padding-top:.8em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:14px;background:#fff}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
thead th{background:#e8ebf0} tr.h th{background:#f3f4f7;text-align:left}
td.pass{background:#e6f4ea;color:#0d652d} td.fail{background:#fce8e6;color:#a50e0e}
.ev{font-size:12px;color:#444;text-align:left;max-width:26em}
.fail .ev{color:#7a1010} dt{font-weight:600} dd{margin:0 0 .5em 1.5em}
figure{margin:1.5em 0;background:#fff;padding:.5em} figure svg{max-width:100%;height:auto}
figcaption{color:#555;font-size:13px} .muted{color:#666}
""".strip()


def write_report(
    path: pathlib.Path, comparisons: Sequence[Comparison], title: str = "fairshare policy comparison"
) -> None:
    """Write one self-contained HTML report with a section per comparison (scenario)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(comparisons, title), encoding="utf-8")


def render_report(comparisons: Sequence[Comparison], title: str = "fairshare policy comparison") -> str:
    """The report as an HTML string (what `write_report` writes)."""
    esc = html.escape
    ids = [
        f"s{i + 1}-{re.sub(r'[^A-Za-z0-9_-]+', '-', c.scenario).strip('-')}"
        for i, c in enumerate(comparisons)
    ]
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n<main>",
        f"<h1>{esc(title)}</h1>",
        _intro(comparisons),
    ]
    if comparisons:
        parts.append(
            "<h2>Scenarios</h2>\n<ul>"
            + "".join(
                f'<li><a href="#{sid}">{esc(c.scenario)}</a>'
                + (f' <span class="muted">— {esc(c.description)}</span>' if c.description else "")
                + "</li>"
                for sid, c in zip(ids, comparisons, strict=True)
            )
            + "</ul>"
        )
    else:
        parts.append('<p class="muted">No scenarios were compared.</p>')
    parts += [_section(c, sid) for c, sid in zip(comparisons, ids, strict=True)]
    parts.append("</main>\n</body>\n</html>\n")
    return "\n".join(parts)


def _policies(comparisons: Sequence[Comparison]) -> list[str]:
    return list(dict.fromkeys(r.policy for c in comparisons for r in c.results))


def _intro(comparisons: Sequence[Comparison]) -> str:
    unknown = "a policy without a built-in description."
    items = "".join(
        f"<dt>{html.escape(p)}</dt><dd>{html.escape(POLICY_DESCRIPTIONS.get(p, unknown))}</dd>"
        for p in _policies(comparisons)
    )
    return (
        "<p>Each scenario replays the <em>same job arrivals</em> on the same cluster under each "
        "scheduling policy, so differences come from the policy alone. The policies compared:</p>"
        f"<dl>{items}</dl><p>How to read it: <b>waits</b> are the time from submission to the first "
        "start (p50 = typical job, p90 = the slowest tenth); <b>share delivery</b> is the GPU time a "
        "group received divided by what its share entitled it to while it had demand (100% = exactly "
        "its share); <b>lost work</b> is compute thrown away by preemptions; <b>gates</b> are the "
        "rollout limits, "
        '<span style="color:#0d652d">green = pass</span>, <span style="color:#a50e0e">red = fail</span>. '
        f"{NA} means no value (for example, nothing was owed).</p>"
    )


def _section(c: Comparison, sid: str) -> str:
    esc = html.escape
    out = [f'<section id="{sid}">\n<h2>{esc(c.scenario)}</h2>']
    if c.description:
        out.append(f"<p>{esc(c.description)}</p>")
    if c.notes:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in c.notes) + "</ul>")
    if not c.results:
        out.append('<p class="muted">No results for this scenario.</p>\n</section>')
        return "\n".join(out)
    rows = metric_rows(c.results)
    out += [_verdict(c, rows), _table(rows, [r.policy for r in c.results])]
    charts = (
        (
            _wait_cdf,
            "Wait to first start by class: the share of jobs (y) that had started within a "
            f"given wait (x, log scale; waits under {_WAIT_FLOOR_S:g}s drawn at {_WAIT_FLOOR_S:g}s). "
            "Further left and higher is better.",
        ),
        (
            _delivery,
            "Delivered (solid) vs owed (dashed) GPU-equivalents per top-level group over "
            "time, one panel per policy. Solid below dashed = the group got less than its share.",
        ),
        (_occupancy, "Occupancy: share of available GPUs allocated over time."),
        (_lost_work, "GPU-hours of work lost to preemption per top-level group."),
    )
    for k, (chart, caption) in enumerate(charts):
        fig = chart(c.results)
        try:
            svg = _svg(fig, f"{sid}-c{k}-")
        finally:
            plt.close(fig)
        out.append(f"<figure>\n{svg}\n<figcaption>{esc(caption)}</figcaption>\n</figure>")
    out.append("</section>")
    return "\n".join(out)


def _verdict(c: Comparison, rows: Sequence[Row]) -> str:
    gates = [r for r in rows if r.verdicts]
    if not gates:
        return ""
    parts = []
    for i, res in enumerate(c.results):
        failed = [g.label for g in gates if g.verdicts[i] is False]
        passed = sum(g.verdicts[i] is True for g in gates)
        text = f"fails {', '.join(failed)}" if failed else "passes"
        parts.append(
            f"<b>{html.escape(res.policy)}</b> {html.escape(text)} ({passed}/{len(gates)} gates pass)"
        )
    return "<p>Gates: " + "; ".join(parts) + ".</p>"


def _table(rows: Sequence[Row], policies: Sequence[str]) -> str:
    esc = html.escape
    out = [
        "<table>",
        "<thead><tr><th>metric</th>" + "".join(f"<th>{esc(p)}</th>" for p in policies) + "</tr></thead>",
        "<tbody>",
    ]
    for r in rows:
        if r.heading:
            out.append(f'<tr class="h"><th colspan="{len(policies) + 1}">{esc(r.label)}</th></tr>')
            continue
        cells = []
        for i in range(len(policies)):
            text = esc(r.cells[i]) if i < len(r.cells) else NA
            verdict = r.verdicts[i] if i < len(r.verdicts) else None
            cls = {True: ' class="pass"', False: ' class="fail"', None: ""}[verdict]
            ev = r.evidence[i] if i < len(r.evidence) else ""
            cells.append(f"<td{cls}>{text}" + (f'<div class="ev">{esc(ev)}</div>' if ev else "") + "</td>")
        out.append(f"<tr><td>{esc(r.label)}</td>{''.join(cells)}</tr>")
    out.append("</tbody>\n</table>")
    return "\n".join(out)


# ---- charts -------------------------------------------------------------------------------------


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(_RC):
        yield


def _svg(fig: Figure, prefix: str) -> str:
    """Inline SVG markup of a figure; element ids prefixed so several SVGs can share one page."""
    buf = io.StringIO()
    with _style():
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
    return [_POLICY_COLORS.get(r.policy) or next(spare) for r in results]


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#777")


def _grid(n: int, ncols: int, height: float) -> tuple[Figure, list[Axes]]:
    cols, rows = max(1, min(n, ncols)), max(1, math.ceil(n / ncols))
    with _style():
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
    with _style():
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
                    ax.step([_WAIT_FLOOR_S, *waits], [0.0, *ys], where="post", color=color, label=r.policy)
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
    return [Line2D([], [], color=c, label=r.policy) for r, c in zip(results, colors, strict=True)]


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
    with _style():
        for ax, r in zip(axes, results, strict=False):
            ax.set_title(r.policy)
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
    with _style():
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
                    label=r.policy,
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
    with _style():
        fig, ax = plt.subplots(figsize=(10.0, 3.2), layout="constrained")
        width = 0.8 / max(1, len(results))
        for i, (r, c) in enumerate(zip(results, colors, strict=True)):
            xs = [j + (i - (len(results) - 1) / 2) * width for j in range(len(groups))]
            values = [r.lost_gpu_h.get(g, 0.0) for g in groups]
            bars = ax.bar(xs, values, width, color=c, label=r.policy)
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
