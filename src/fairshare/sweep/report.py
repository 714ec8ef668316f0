"""The decision report of a sweep: a terminal table and OUT/report.html (self-contained: inline SVG
charts drawn by matplotlib, no network, byte-identical for the same outputs)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from ..report.table import fmt_duration
from .decide import Capacity, Decisions
from .spec import Variant
from .summary import Summary

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1150px;margin:auto;padding:1em 1.5em 3em}
h2{border-top:2px solid #ccc;padding-top:.8em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:13px;background:#fff}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;vertical-align:top}
th:first-child,td:first-child,td.l{text-align:left}
thead th{background:#e8ebf0}
td.pass{background:#e6f4ea;color:#0d652d} td.fail{background:#fce8e6;color:#a50e0e}
tr.rec td{font-weight:600} .note{color:#555} code{background:#eef;padding:0 .2em}
"""


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _dur(x: float | None) -> str:
    return "—" if x is None else fmt_duration(x)


def _signed_dur(x: float) -> str:
    return ("−" if x < 0 else "+") + fmt_duration(abs(x))


COLUMNS = (
    "variant",
    "policy",
    "gates",
    "wait p50",
    "wait p90",
    "requeue p90",
    "share spread",
    "lowest share",
    "lost %",
    "occupancy",
    "frag GPU-h",
    "makespan",
)


def rows(variants: Sequence[Variant], summaries: Sequence[Summary]) -> list[tuple[str, ...]]:
    order = {v.id: i for i, v in enumerate(variants)}
    out: list[tuple[str, ...]] = []
    for s in sorted(summaries, key=lambda s: (order.get(s.variant, len(order)), s.policy)):
        out.append(
            (
                s.variant,
                s.policy,
                "pass" if s.gates_pass else "FAIL",
                _dur(s.wait_p50_s),
                _dur(s.wait_p90_s),
                _dur(s.requeue_wait_p90_s),
                _share(s.share_spread),
                _share(s.lowest_share),
                f"{s.lost_work_pct:.2f}",
                f"{s.occupancy:.3f}",
                f"{s.fragmented_gpu_h:,.0f}",
                _dur(s.makespan_s),
            )
        )
    return out


def terminal(variants: Sequence[Variant], summaries: Sequence[Summary], decisions: Decisions) -> str:
    table = [COLUMNS, *rows(variants, summaries)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    names = {v.id: v.name for v in variants}
    lines.append("")
    lines.append(
        f"variants passing every gate ({decisions.policy}): {', '.join(decisions.passing) or 'none'}"
    )
    if decisions.recommended is not None:
        lines.append(f"recommended: {decisions.recommended} ({names[decisions.recommended]})")
    for a in decisions.answers:
        label = next((lab for lab, vid, _ in a.by_value if vid == a.best), None)
        best = f"{label} ({a.best})" if a.best else "no variant passes every gate"
        lines.append(f"{a.decision}: {best}")
    lines.append(decisions.verdict)
    return "\n".join(lines)


def _gain(label: str, c: Capacity | None) -> str:
    e = html.escape
    if c is None:
        return f"<tr><td>{e(label)}</td><td class=l>—</td><td>—</td><td>—</td></tr>"
    share = "—" if c.d_lowest_share is None else f"{c.d_lowest_share:+.3f}"
    return (
        f"<tr><td>{e(label)}</td><td class=l>{e(c.name)}</td>"
        f"<td>{_signed_dur(c.d_wait_p90_s)}</td><td>{share}</td></tr>"
    )


def _head(*names: str) -> str:
    return (
        "<table><thead><tr>" + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr></thead><tbody>"
    )


def _answers(decisions: Decisions) -> list[str]:
    e = html.escape
    out = [
        _head(
            "decision", "value tried", "best variant with it", "wait p90", "share spread", "lost %", "gates"
        )
    ]
    for a in decisions.answers:
        for label, vid, s in a.by_value:
            rec = " class=rec" if vid == a.best else ""
            gate = "pass" if s is not None and s.gates_pass else "fail"
            lost = "—" if s is None else f"{s.lost_work_pct:.2f}"
            out.append(
                f"<tr{rec}><td>{e(a.decision)}</td><td class=l><code>{e(label)}</code></td>"
                f"<td class=l>{e(vid)}</td><td>{_dur(s.wait_p90_s if s else None)}</td>"
                f"<td>{_share(s.share_spread if s else None)}</td><td>{lost}</td>"
                f"<td class={gate}>{gate}</td></tr>"
            )
    out.append(
        "</tbody></table><p class=note>Bold: the decision's answer (the best passing variant that "
        "changes a key of that decision).</p>"
    )
    return out


def render(
    title: str,
    variants: Sequence[Variant],
    summaries: Sequence[Summary],
    decisions: Decisions,
    commands: dict[str, str],
    charts: dict[str, str],
) -> str:
    names = {v.id: v.name for v in variants}
    e = html.escape
    policies = len({s.policy for s in summaries})
    parts = [
        "<!doctype html><html lang=en><meta charset=utf-8>",
        f"<title>{e(title)}</title><style>{_CSS}</style><main>",
        f"<h1>{e(title)}</h1>",
        f"<p>{len(variants)} variants × {policies} policies on the same arrivals. A variant passes when "
        f"<b>{e(decisions.policy)}</b> passes every rollout gate; better = lower wait p90 over all jobs, "
        "then lower share spread, then lower lost work (docs/decisions.md).</p>",
        f"<p><b>Verdict:</b> {e(decisions.verdict)}</p>",
    ]
    if decisions.recommended is not None:
        rec = decisions.recommended
        parts.append(f"<p><b>Recommended:</b> <code>{e(rec)}</code> — {e(names[rec])}</p>")
    else:
        parts.append("<p><b>No variant passes every gate.</b></p>")
    parts.append("<h2>The five decisions</h2>")
    parts += _answers(decisions)
    parts.append("<h2>What capacity buys, what policy buys</h2>")
    parts.append(_head("change", "what", "Δ wait p90", "Δ lowest share"))
    parts += [_gain("more nodes", c) for c in decisions.capacity]
    parts.append(_gain("best policy variant", decisions.policy_gain))
    parts.append(_gain("policy instead of the incumbent", decisions.incumbent_gain))
    parts.append("</tbody></table>")
    for name, caption in (
        ("spread", "Wait p90 against share spread, one point per variant; ringed: the Pareto front."),
        ("lost", "Wait p90 against lost work, one point per variant; ringed: the Pareto front."),
    ):
        if name in charts:
            parts.append(f"<figure>{charts[name]}<figcaption>{e(caption)}</figcaption></figure>")
    parts.append("<h2>Every variant</h2>" + _head(*COLUMNS))
    for r in rows(variants, summaries):
        cells = []
        for i, c in enumerate(r):
            if i == 2:
                cells.append(f"<td class={'pass' if c == 'pass' else 'fail'}>{e(c)}</td>")
            else:
                cells.append(f"<td{' class=l' if i < 2 else ''}>{e(c)}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table><h2>Reproduce a variant</h2>" + _head("variant", "what", "command"))
    for v in variants:
        cmd = e(commands.get(v.id, ""))
        parts.append(
            f"<tr><td>{e(v.id)}</td><td class=l>{e(v.name)}</td><td class=l><code>{cmd}</code></td></tr>"
        )
    parts.append("</tbody></table></main></html>\n")
    return "\n".join(parts)


def write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
