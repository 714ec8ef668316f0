"""One self-contained HTML report comparing policies: tables plus inline SVG charts.

No network: no external scripts, styles, fonts or images; every chart is SVG written by matplotlib
(fairshare.report.charts, imported only when a chart is drawn). The output is byte-identical for the same
input (fixed SVG hash salt, no dates), whether the charts are drawn in this process or, with a
ChartPool, in worker processes started while the replays run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import html
import importlib
import multiprocessing
import os
import pathlib
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from .. import interrupts
from ..interrupts import WorkerDied
from ..replay.results import Comparison, ReplayResult
from .fidelity_html import fidelity_section
from .table import NA, WAIT_FLOOR_S, Row, metric_rows

CHART_CAPTIONS: dict[str, str] = {  # chart name (fairshare.report.charts.CHARTS) -> caption, in page order
    "waits": "Wait to first start by class: the share of jobs (y) that had started within a "
    f"given wait (x, log scale; waits under {WAIT_FLOOR_S:g}s drawn at {WAIT_FLOOR_S:g}s). "
    "Further left and higher is better.",
    "delivery": "Delivered (solid) vs owed (dashed) GPU-equivalents per top-level group over "
    "time, one panel per policy. Solid below dashed = the group got less than its share.",
    "occupancy": "Occupancy: share of available GPUs allocated over time.",
    "lost_work": "GPU-hours of work lost to preemption per top-level group.",
}

POLICY_DESCRIPTIONS = {
    "fairshare": "rolling-window debt ordering with execution contracts: the group furthest below its share "
    "over the window goes first; running jobs keep a protected window and checkpoints bound "
    "the work lost when they are preempted; within a group, least attained service first; no job "
    "is preempted more than 3 times, and no team takes back from a team that took from it within "
    "the window.",
    "fifo": "first come, first served; a later job that fits may start when earlier ones cannot "
    "(no reservation, no preemption).",
    "priority-labels": "high > medium > low labels, first come first served within a label; a higher label "
    "may preempt a lower one once its protected window has passed.",
    "slurm-multifactor": "Slurm's multifactor priority (half-life decayed fair-share plus job age) with "
    "its main scheduler (strict priority) and conservative backfill on the jobs' declared time "
    "limits (estimates).",
    "as-run": "what really ran: the site's recorded starts, ends and requeues (history.csv), "
    "measured like the replays; the others are compared with it in the fidelity section.",
    "slurm-multifactor-firstfit": "the same priority, first fit (any job that fits starts, nothing "
    "reserved): the model before issue 10, not Slurm.",
}
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


def _draw(name: str, results: Sequence[ReplayResult], prefix: str) -> str:
    from .charts import chart_svg  # matplotlib: imported where a chart is drawn

    return chart_svg(name, results, prefix)


def _warm_up(parent: int) -> None:
    """A worker's start: tie its life to its parent's, then import the charts (matplotlib) before
    the first chart is asked for.

    The worker was started with SIGINT and SIGTERM blocked (ChartPool), so no signal reached it
    while Python started. Ctrl-C on a terminal reaches every process of the group: the parent
    handles it (and stops the workers), so a worker ignores it; SIGTERM (the parent stopping it)
    ends it at once and silently. On Linux the kernel kills it when its parent dies, even by
    SIGKILL (prctl PR_SET_PDEATHSIG); elsewhere a thread watches the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with(parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    importlib.import_module("fairshare.report.charts")


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """End this process when `parent` ends (whatever ends it)."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def _noop() -> None:
    """Submitted once per worker when the pool starts, so that every worker starts at once."""


class ChartPool:
    """Worker processes that draw the report's charts, started before the replays run.

    Importing matplotlib and drawing the charts take about a second; started early, the workers
    import it while the replays run on another core and then draw the charts in parallel. A
    context manager: leaving it stops the workers. With `workers` 0 (the default on one CPU) the
    charts are drawn in this process instead. A worker that dies is noticed within a second (at the
    replay's next interrupt check, or while a chart is awaited): WorkerDied. Workers are spawned,
    so a script that uses a pool must guard its entry point with `if __name__ == "__main__":`
    (multiprocessing's rule).
    """

    def __init__(self, workers: int | None = None) -> None:
        # one CPU stays with the replay: more workers than spare CPUs slow it down while they start
        n = min(2, (os.cpu_count() or 1) - 1) if workers is None else workers
        self.workers = max(0, n)
        self._pool: ProcessPoolExecutor | None = None
        self._closing = False

    def _start(self) -> None:
        """Start the workers (on entering the `with` block, so that leaving it always stops them).

        An interrupt blocked while the pool starts is raised the instant the signals are unblocked:
        the pool is stopped before it propagates. Otherwise the command's immediate exit would skip
        multiprocessing's own clean-up and its resource tracker would print "leaked semaphore
        objects" after the command's last line."""
        if self.workers == 0:
            return
        try:
            # the workers inherit the blocked signals: none reaches them before _warm_up
            with _blocked(signal.SIGINT, signal.SIGTERM):
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_warm_up,
                    initargs=(os.getpid(),),
                )
                for _ in range(self.workers):
                    self._pool.submit(_noop)
            interrupts.watch(self._health)
        except BaseException:
            self._stop()
            raise

    def _health(self) -> None:
        """Raise WorkerDied if a worker has ended while the pool is open (interrupts.check)."""
        if self._pool is None or self._closing:
            return
        processes: dict[int, Any] = getattr(self._pool, "_processes", None) or {}
        if getattr(self._pool, "_broken", False) or any(
            p.exitcode is not None for p in list(processes.values())
        ):
            raise WorkerDied("a chart worker process died (killed, e.g. by the OOM killer)")

    def draw(self, name: str, results: Sequence[ReplayResult], prefix: str) -> Callable[[], str]:
        """Start drawing one chart; the returned function waits for its SVG."""
        if self._pool is None:
            svg = _draw(name, results, prefix)
            return lambda: svg
        try:
            pending = self._pool.submit(_draw, name, results, prefix)
        except BrokenProcessPool:
            raise WorkerDied("a chart worker process died (killed, e.g. by the OOM killer)") from None

        def wait() -> str:
            while True:
                interrupts.check()  # an interrupt, or a worker found dead
                try:
                    return pending.result(timeout=0.2)
                except FuturesTimeout:
                    continue
                except BrokenProcessPool:
                    raise WorkerDied("a chart worker process died (killed, e.g. by the OOM killer)") from None

        return wait

    def __enter__(self) -> ChartPool:
        self._start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        self._closing = True
        interrupts.unwatch(self._health)
        if self._pool is None:
            return
        # every chart asked for has been received by now: the workers hold nothing else, so they
        # are killed outright (a worker still starting has SIGTERM blocked and would live on
        # until its start ends: seconds on a loaded machine, which the exit would wait for)
        processes: dict[int, Any] = getattr(self._pool, "_processes", None) or {}
        for p in list(processes.values()):
            if p.exitcode is None:
                p.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _blocked(*signals: int) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(signals))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_report(
    path: pathlib.Path,
    comparisons: Sequence[Comparison],
    title: str = "fairshare policy comparison",
    pool: ChartPool | None = None,
) -> None:
    """Write one self-contained HTML report with a section per comparison (scenario)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(comparisons, title, pool), encoding="utf-8")


def render_report(
    comparisons: Sequence[Comparison],
    title: str = "fairshare policy comparison",
    pool: ChartPool | None = None,
) -> str:
    """The report as an HTML string (what `write_report` writes); charts drawn by `pool` if given."""
    esc = html.escape
    ids = [
        f"s{i + 1}-{re.sub(r'[^A-Za-z0-9_-]+', '-', c.scenario).strip('-')}"
        for i, c in enumerate(comparisons)
    ]
    # every chart is requested before any is waited for, so workers draw them in parallel
    drawing = pool or ChartPool(workers=0)
    svgs = {
        (sid, name): drawing.draw(name, c.results, f"{sid}-c{k}-")
        for c, sid in zip(comparisons, ids, strict=True)
        if c.results
        for k, name in enumerate(CHART_CAPTIONS)
    }
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
    parts += [
        _section(c, sid, {name: svgs[(sid, name)]() for name in CHART_CAPTIONS} if c.results else {})
        for c, sid in zip(comparisons, ids, strict=True)
    ]
    parts.append("</main>\n</body>\n</html>\n")
    return "\n".join(parts)


def _policies(comparisons: Sequence[Comparison]) -> list[str]:
    return list(dict.fromkeys(r.strategy for c in comparisons for r in c.results))


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


def _section(c: Comparison, sid: str, svgs: dict[str, str]) -> str:
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
    out += [_verdict(c, rows), _table(rows, [r.strategy for r in c.results])]
    fidelity = fidelity_section(c)
    if fidelity:
        out.append(fidelity)
    for name, caption in CHART_CAPTIONS.items():
        out.append(f"<figure>\n{svgs[name]}\n<figcaption>{esc(caption)}</figcaption>\n</figure>")
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
            f"<b>{html.escape(res.strategy)}</b> {html.escape(text)} ({passed}/{len(gates)} gates pass)"
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
