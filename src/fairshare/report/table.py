"""Plain-text comparison tables for the terminal, and the row model the HTML report shares.

`metric_rows` turns the metrics of several replays (one per policy) into labelled rows of display
strings; `format_comparison` lays them out as aligned columns and `report.py` renders the same rows as
HTML. Absent or null values print as "—". Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._units import fmt_duration_rounded
from ..replay.results import Comparison, ReplayResult

WAIT_FLOOR_S = 10.0  # waits below this are drawn at it on the log-scale wait chart

NA = "—"

# Known gates: how to show their value and which side of the limit passes. Others print as numbers.
_GATE_ORDER = ("share_floor", "lost_work_pct", "deadline_met_pct", "exception_max_days")


@dataclass(frozen=True)
class Row:
    """One table row: a label and one display string per policy.

    A `heading` row starts a section and has no cells. Gate rows also carry, per policy, the verdict
    (True = pass, False = fail, None = unknown) and the evidence sentence.
    """

    label: str
    cells: tuple[str, ...] = ()
    heading: bool = False
    verdicts: tuple[bool | None, ...] = ()
    evidence: tuple[str, ...] = ()


def number(value: object) -> float | None:
    """The value as a finite float, or None for null, booleans, text and NaN/inf."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def fmt_duration(seconds: object) -> str:
    """Two most significant units, rounded: 250 -> 4m10s, 7379 -> 2h3m, 93784 -> 1d2h; null -> "—"."""
    value = number(seconds)
    return NA if value is None else fmt_duration_rounded(value)


def fmt_num(value: object) -> str:
    """A quantity such as GPU-hours: 0, 2 decimals below 10, 1 below 1000, then thousands separators."""
    v = number(value)
    if v is None:
        return NA
    if v == 0:
        return "0"
    if abs(v) < 10:
        return f"{v:.2f}"
    if abs(v) < 1000:
        return f"{v:.1f}"
    return f"{v:,.0f}"


def fmt_int(value: object) -> str:
    v = number(value)
    return NA if v is None else f"{round(v):,}"


def fmt_pct(value: object) -> str:
    """A value already in percent: 12.345 -> 12.3%, 0.042 -> 0.04%."""
    v = number(value)
    if v is None:
        return NA
    return f"{v:.2f}%" if 0 < abs(v) < 1 else f"{v:.1f}%"


def fmt_ratio_pct(value: object) -> str:
    """A fraction shown as percent: 0.934 -> 93.4%."""
    v = number(value)
    return NA if v is None else f"{100 * v:.1f}%"


def _fmt_days(value: object) -> str:
    v = number(value)
    return NA if v is None else f"{v:g} days"


_GATES: dict[str, tuple[Callable[[object], str], str]] = {
    "share_floor": (fmt_ratio_pct, "≥ "),
    "lost_work_pct": (fmt_pct, "≤ "),
    "deadline_met_pct": (fmt_pct, "≥ "),
    "exception_max_days": (_fmt_days, "≤ "),
}


def dig(mapping: object, *keys: str) -> Any:
    """mapping[k1][k2]... or None when any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def top_level_groups(results: Sequence[ReplayResult]) -> list[str]:
    """Sorted top-level group paths (no '/') found in any result's metrics."""
    names: set[str] = set()
    for r in results:
        groups = r.metrics.get("groups")
        if isinstance(groups, Mapping):
            names.update(str(g) for g in groups if "/" not in str(g))
    return sorted(names)


def class_names(results: Sequence[ReplayResult]) -> list[str]:
    """Sorted class names found in any result's metrics or waits."""
    names: set[str] = set()
    for r in results:
        classes = r.metrics.get("classes")
        if isinstance(classes, Mapping):
            names.update(str(c) for c in classes)
        names.update(r.waits)
    return sorted(names)


def gate_names(results: Sequence[ReplayResult]) -> list[str]:
    found: set[str] = set()
    for r in results:
        gates = r.metrics.get("gates")
        if isinstance(gates, Mapping):
            found.update(str(g) for g in gates)
    return [g for g in _GATE_ORDER if g in found] + sorted(found.difference(_GATE_ORDER))


def gate_text(name: str, gate: object) -> tuple[bool | None, str, str, str]:
    """(verdict, verdict word, "value (limit)" text, evidence) of one gate entry."""
    fmt, side = _GATES.get(name, (fmt_num, ""))
    passed = dig(gate, "pass")
    verdict = passed if isinstance(passed, bool) else None
    word = NA if verdict is None else ("PASS" if verdict else "FAIL")
    limit = dig(gate, "limit")
    limit_text = NA if number(limit) is None else side + fmt(limit)
    evidence = dig(gate, "evidence")
    return verdict, word, f"{fmt(dig(gate, 'value'))} ({limit_text})", str(evidence or "")


Cell = Callable[[Mapping[str, Any]], str]


def _at(fmt: Callable[[object], str], *keys: str) -> Cell:
    return lambda m: fmt(dig(m, *keys))


def _durations(cls: str, p50: str, p90: str) -> Cell:
    return lambda m: _pair(
        fmt_duration(dig(m, "classes", cls, p50)), fmt_duration(dig(m, "classes", cls, p90))
    )


def _pair(a: str, b: str) -> str:
    return NA if a == NA and b == NA else f"{a} / {b}"


def _deadlines(m: Mapping[str, Any]) -> str:
    pct = fmt_pct(dig(m, "deadlines", "met_pct"))
    met, jobs = number(dig(m, "deadlines", "met")), number(dig(m, "deadlines", "jobs"))
    if pct == NA or met is None or jobs is None:
        return pct
    return f"{pct} ({round(met)}/{round(jobs)})"


def _below(m: Mapping[str, Any]) -> str:
    groups = dig(m, "starvation", "groups_below_share_beyond_window")
    if not isinstance(groups, list):
        return NA
    return ", ".join(str(g) for g in groups) if groups else "none"


def _type_rows(results: Sequence[ReplayResult], row: Callable[[str, Cell], Row]) -> list[Row]:
    """Per GPU type (heterogeneous fleets only): occupancy, and each top-level group's share
    delivery on that type (its owed split over types like the capacity)."""
    types: list[str] = []
    for r in results:
        for ty in dig(r.metrics, "gpu_types") or {}:
            if ty not in types:
                types.append(ty)
    if len(types) < 2:
        return []
    out = [Row("GPU types (occupancy; share delivery by type)", heading=True)]
    for ty in types:
        out.append(row(f"{ty} occupancy", _at(fmt_ratio_pct, "gpu_types", ty, "occupancy")))
        for g in top_level_groups(results):
            out.append(row(f"{ty} {g}", _at(fmt_ratio_pct, "groups", g, "by_type", ty, "share_delivery")))
    return out


def _forecast_rows(results: Sequence[ReplayResult], row: Callable[[str, Cell], Row]) -> list[Row]:
    """Start forecasts (replays run with --forecast): how far the actual starts were, by class."""
    if not any(dig(r.metrics, "forecast") for r in results):
        return []
    classes = sorted({c for r in results for c in dig(r.metrics, "forecast", "classes") or {}})
    out = [Row("Start forecast at arrival: |actual − forecast| p50 / p90; within 10 min", heading=True)]
    for label, keys in [("all", ("all",)), *((c, ("classes", c)) for c in classes)]:

        def cell(m: Mapping[str, Any], keys: tuple[str, ...] = keys) -> str:
            at = ("forecast", *keys)
            pair = _pair(
                fmt_duration(dig(m, *at, "abs_error_p50_s")), fmt_duration(dig(m, *at, "abs_error_p90_s"))
            )
            within = fmt_pct(dig(m, *at, "within_10min_pct"))
            return NA if pair == NA else f"{pair}; {within} (n={fmt_int(dig(m, *at, 'jobs'))})"

        out.append(row(label, cell))
    return out


def _waits(*keys: str) -> Cell:
    return lambda m: _pair(*(fmt_duration(dig(m, *keys, k)) for k in ("wait_p50_s", "wait_p90_s")))


def _team_size_rows(results: Sequence[ReplayResult], row: Callable[[str, Cell], Row]) -> list[Row]:
    """Wait to start p50 / p90 of each team (top-level group) and each job size."""
    out = [Row("Wait to start by team, p50 / p90", heading=True)]
    out.extend(row(g, _waits("groups", g)) for g in top_level_groups(results))
    sizes = [n for n in ("1", "2-4", "5-8", ">8") if any(dig(r.metrics, "sizes", n) for r in results)]
    if sizes:
        out.append(Row("Wait to start by job size (GPUs), p50 / p90", heading=True))
    out.extend(row(f"{n} GPUs", _waits("sizes", n)) for n in sizes)
    return out


def _per_job(m: Mapping[str, Any]) -> str:
    per = dig(m, "churn", "preemptions_per_preempted_job")
    if not isinstance(per, Mapping) or number(per.get("p50")) is None:
        return NA
    return " / ".join(f"{number(per.get(k)):g}" for k in ("p50", "p99", "max"))


def _requeue(m: Mapping[str, Any]) -> str:
    """Requeue waits (preemption to the next start) p50 / p99 / max; n/a without requeues."""
    if not dig(m, "requeue", "requeues"):
        return NA
    return " / ".join(fmt_duration(dig(m, "requeue", k)) for k in ("p50_s", "p99_s", "max_s"))


def _flip_flops(m: Mapping[str, Any]) -> str:
    n = fmt_int(dig(m, "churn", "flip_flops"))
    return n if n == NA else f"{n} ({fmt_pct(dig(m, 'churn', 'flip_flop_pct'))})"


def metric_rows(results: Sequence[ReplayResult]) -> list[Row]:
    """The comparison rows, one cell per result (policy), in a fixed order."""
    ms = [r.metrics for r in results]

    def row(label: str, cell: Cell) -> Row:
        return Row(label, tuple(cell(m) for m in ms))

    classes = class_names(results)
    rows = [
        Row("Jobs", heading=True),
        row("submitted", _at(fmt_int, "jobs", "submitted")),
        row("finished", _at(fmt_int, "jobs", "finished")),
        row("never started", _at(fmt_int, "jobs", "never_started")),
        *(row(f"{c} jobs", _at(fmt_int, "classes", c, "jobs")) for c in classes),
        Row("Wait to start, p50 / p90", heading=True),
        *(row(c, _durations(c, "wait_p50_s", "wait_p90_s")) for c in classes),
        Row("Wait to first progress, p50 / p90", heading=True),
        *(row(c, _durations(c, "first_progress_p50_s", "first_progress_p90_s")) for c in classes),
        Row("Share delivery (delivered / owed)", heading=True),
        *(row(g, _at(fmt_ratio_pct, "groups", g, "share_delivery")) for g in top_level_groups(results)),
        row("overall", _at(fmt_ratio_pct, "delivery_overall")),
        *_team_size_rows(results, row),
        Row("Preemption", heading=True),
        row("lost work GPU-h", _at(fmt_num, "lost_work_gpu_h")),
        row("lost work %", _at(fmt_pct, "lost_work_pct")),
        row("preemptions", _at(fmt_int, "preemptions")),
        row("jobs preempted", _at(fmt_int, "churn", "preempted_jobs")),
        row("per preempted job p50 / p99 / max", _per_job),
        row("flip-flops", _flip_flops),
        row("restart overhead GPU-h", _at(fmt_num, "churn", "restore_startup_gpu_h")),
        row("lost + restart overhead %", _at(fmt_pct, "churn", "lost_plus_restore_pct")),
        row("requeue wait p50 / p99 / max", _requeue),
        row("requeues longer than the bound", _at(fmt_int, "requeue", "above_bound")),
        row(
            "  of them, team not over-served throughout",
            _at(fmt_int, "requeue", "not_exempt", "above_bound"),
        ),
        Row("Capacity", heading=True),
        row("occupancy", _at(fmt_ratio_pct, "occupancy")),
        row("occupancy while jobs wait", _at(fmt_ratio_pct, "waiting", "occupancy")),
        row("idle while a waiting job fits %", _at(fmt_pct, "waiting", "idle_while_fit_pct")),
        row("makespan", _at(fmt_duration, "makespan_s")),
        row("fragmented GPU-h", _at(fmt_num, "fragmented_gpu_h")),
        row("unallocated %", _at(fmt_pct, "unallocated_pct")),
        *_type_rows(results, row),
        Row("Deadlines and starvation", heading=True),
        row("deadlines met", _deadlines),
        row("longest wait", _at(fmt_duration, "starvation", "max_wait_s")),
        row("groups below share", _below),
        *_forecast_rows(results, row),
    ]
    names = gate_names(results)
    if names:
        rows.append(Row("Gates", heading=True))
    for name in names:
        parts = [gate_text(name, dig(m, "gates", name)) for m in ms]
        rows.append(
            Row(
                name,
                tuple(f"{word} {value}" for _, word, value, _ in parts),
                verdicts=tuple(p[0] for p in parts),
                evidence=tuple(p[3] for p in parts),
            )
        )
    return rows


def format_rows(rows: Sequence[Row], policies: Sequence[str]) -> str:
    """Aligned columns: labels left, one right-aligned column per policy under its name."""
    body = [r for r in rows if not r.heading]
    label_w = max([len(r.label) + 2 for r in body] + [6])
    widths = [
        max([len(p)] + [len(r.cells[i]) for r in body if i < len(r.cells)]) for i, p in enumerate(policies)
    ]
    lines = [
        "".ljust(label_w) + "".join("  " + p.rjust(w) for p, w in zip(policies, widths, strict=True)),
        "-" * (label_w + sum(w + 2 for w in widths)),
    ]
    for r in rows:
        if r.heading:
            lines.append(r.label)
            continue
        cells = list(r.cells) + [NA] * (len(policies) - len(r.cells))
        lines.append(
            ("  " + r.label).ljust(label_w)
            + "".join("  " + c.rjust(w) for c, w in zip(cells, widths, strict=False))
        )
    return "\n".join(line.rstrip() for line in lines)


def format_comparison(comparison: Comparison) -> str:
    """The side-by-side table of one scenario, followed by failed-gate evidence and notes."""
    head = comparison.scenario + (f" — {comparison.description}" if comparison.description else "")
    policies = [r.strategy for r in comparison.results]
    if not policies:
        return f"{head}\n(no results)"
    rows = metric_rows(comparison.results)
    out = [head, "", format_rows(rows, policies)]
    fails = [
        f"  FAIL {policies[i]} {r.label}: {r.evidence[i] or NA}"
        for r in rows
        for i, v in enumerate(r.verdicts)
        if v is False
    ]
    if fails:
        out += ["", "Failed gates:", *fails]
    if comparison.notes:
        out += ["", "Notes:", *(f"  - {n}" for n in comparison.notes)]
    return "\n".join(out)


def format_gates(result: ReplayResult) -> str:
    """One line per gate: `PASS name value (limit) — evidence`."""
    gates = result.metrics.get("gates")
    names = gate_names([result])
    if not isinstance(gates, Mapping) or not names:
        return "(no gates)"
    width = max(len(n) for n in names)
    lines = []
    for name in names:
        _, word, value, evidence = gate_text(name, gates.get(name))
        lines.append(f"{word:<4} {name:<{width}}  {value}" + (f" — {evidence}" if evidence else ""))
    return "\n".join(lines)
