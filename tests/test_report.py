"""The self-contained HTML report (fairshare.report.html)."""

from __future__ import annotations

import math
import os
import pathlib
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

import matplotlib.pyplot as plt
import pytest

from fairshare.replay.results import Comparison, ReplayResult, Series
from fairshare.report.html import ChartPool, render_report, write_report

GROUPS = ("product", "research", "infra")
SHARES = {"product": 40.0, "research": 35.0, "infra": 25.0}
FAIL_EVIDENCE = "research got 61% of its owed share in its worst 7d window (day 1 to day 8)"
HOUR = 3600.0


def _metrics(policy: str, fair: bool) -> dict[str, Any]:
    """A metrics.json in the FORMATS.md shape: 2 classes, 3 top-level groups plus research/arch."""
    research = 0.99 if fair else 0.66
    return {
        "policy": policy,
        "scenario": "normal",
        "epoch": "2026-12-01T00:00:00Z",
        "horizon_s": 7 * 86400.0,
        "jobs": {"submitted": 1240, "finished": 1198 if fair else 1150, "never_started": 0 if fair else 9},
        "classes": {
            "train": {
                "jobs": 400,
                "wait_p50_s": 250.0,
                "wait_p90_s": 7380.0,
                "wait_p99_s": 30000.0,
                "first_progress_p50_s": 370.0,
                "first_progress_p90_s": 7500.0,
            },
            "eval": {
                "jobs": 840,
                "wait_p50_s": 12.0,
                "wait_p90_s": 95.0 if fair else 5400.0,
                "wait_p99_s": 600.0,
                "first_progress_p50_s": 12.0,
                "first_progress_p90_s": 95.0,
            },
        },
        "groups": {
            "product": {
                "owed_gpu_h": 5000.0,
                "delivered_gpu_h": 5100.0,
                "share_delivery": 1.02,
                "unallocated_gpu_h": 120.0,
                "min_window_share_delivery": 0.97,
            },
            "research": {
                "owed_gpu_h": 4000.0,
                "delivered_gpu_h": 4000 * research,
                "share_delivery": research,
                "unallocated_gpu_h": 0.0,
                "min_window_share_delivery": research - 0.05,
            },
            "research/arch": {
                "owed_gpu_h": 1500.0,
                "delivered_gpu_h": 1400.0,
                "share_delivery": 0.933,
                "unallocated_gpu_h": 0.0,
                "min_window_share_delivery": 0.9,
            },
            "infra": {
                "owed_gpu_h": 0.0,
                "delivered_gpu_h": 0.0,
                "share_delivery": None,
                "unallocated_gpu_h": 0.0,
                "min_window_share_delivery": None,
            },
        },
        "delivery_overall": 0.998 if fair else 0.84,
        "lost_work_gpu_h": 21.5 if fair else 0.0,
        "lost_work_pct": 0.31 if fair else 0.0,
        "preemptions": 57 if fair else 0,
        "occupancy": 0.912,
        "fragmented_gpu_h": 153.4,
        "unallocated_pct": 1.3,
        "deadlines": {"jobs": 40, "met": 39 if fair else 31, "met_pct": 97.5 if fair else 77.5},
        "starvation": {
            "max_wait_s": 20000.0 if fair else 93784.0,
            "groups_below_share_beyond_window": [] if fair else ["research"],
        },
        "gates": {
            "share_floor": {
                "pass": fair,
                "value": research - 0.05,
                "limit": 0.9,
                "evidence": "every top-level group got at least 94% of its owed share"
                if fair
                else FAIL_EVIDENCE,
            },
            "lost_work_pct": {
                "pass": True,
                "value": 0.31 if fair else 0.0,
                "limit": 5,
                "evidence": "0.31% of allocated GPU-time was lost to preemption",
            },
        },
    }


def _series(fair: bool) -> Series:
    t = tuple(i * HOUR for i in range(7 * 24 + 1))
    owed = {
        g: tuple(SHARES[g] * (1.0 + 0.3 * math.sin(x / 40000 + k)) for x in t) for k, g in enumerate(GROUPS)
    }
    delivered = {g: tuple(v * (1.0 if fair or g != "research" else 0.66) for v in owed[g]) for g in GROUPS}
    occupancy = tuple(min(1.0, 0.8 + 0.15 * math.sin(x / 30000)) for x in t)
    return Series(t=t, occupancy=occupancy, owed=owed, delivered=delivered)


def _result(policy: str, fair: bool) -> ReplayResult:
    rng = random.Random(policy)
    waits = {
        "train": tuple(rng.expovariate(1 / 3000) for _ in range(400)),
        "eval": tuple(rng.expovariate(1 / (60 if fair else 900)) for _ in range(840)),
    }
    lost = {"product": 10.0 if fair else 0.0, "research": 11.5 if fair else 0.0, "infra": 0.0}
    return ReplayResult(policy, "normal", _metrics(policy, fair), _series(fair), waits, lost)


def _comparison() -> Comparison:
    return Comparison(
        "normal",
        "Steady mixed load <with> 3 teams & a nested group",
        (_result("fairshare", True), _result("fifo", False)),
        notes=("eval traffic doubles on day 3", "infra was idle all week"),
    )


def _empty_comparison() -> Comparison:
    """Every input empty: no samples, no waits (one class with no jobs), no lost work, bare metrics."""
    empty = Series(t=(), occupancy=(), owed={}, delivered={})
    bare = ReplayResult(
        "slurm-multifactor",
        "idle",
        {"classes": {"eval": {"jobs": 0, "wait_p50_s": None}}},
        empty,
        {"eval": ()},
        {},
    )
    nothing = ReplayResult("fifo", "idle", {}, empty, {}, {})
    return Comparison("idle", "", (bare, nothing))


@pytest.fixture(scope="module")
def report() -> str:
    return render_report([_comparison()])


def _figures(page: str) -> list[str]:
    return re.findall(r"<figure>(.*?)</figure>", page, flags=re.S)


def test_each_chart_kind_is_an_inline_svg(report: str) -> None:
    figures = _figures(report)
    assert len(figures) == 4
    assert all(f.count("<svg") == 1 for f in figures)
    # With svg.fonttype 'none' the axis labels are text, so each chart can be recognised.
    for figure, label in zip(
        figures, ["wait to first start", "GPU-equivalents", "occupancy %", "GPU-hours lost"], strict=True
    ):
        assert label in figure


def test_inline_svgs_are_well_formed_xml(report: str) -> None:
    for svg in re.findall(r"<svg.*?</svg>", report, flags=re.S):
        ET.fromstring(svg)


def test_element_ids_are_unique_across_all_charts(report: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', report)
    assert len(ids) > 20
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', report))
    assert refs <= set(ids)


def test_report_loads_nothing_from_the_network(report: str) -> None:
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", report, flags=re.I)
    assert not re.search(r"<script[^>]*\bsrc", report, flags=re.I)
    assert not re.search(r"<link\b|@import|url\(\s*['\"]?(?:https?:)?//|<img\b", report, flags=re.I)


def test_report_names_every_policy_and_explains_them(report: str) -> None:
    assert "<th>fairshare</th>" in report
    assert "<th>fifo</th>" in report
    assert "rolling-window debt ordering" in report
    assert "first come, first served" in report


def test_failing_gate_is_red_with_its_evidence_and_passing_gate_green(report: str) -> None:
    assert re.search(
        r'<td class="fail">FAIL 61\.0% \(≥ 90\.0%\)<div class="ev">' + re.escape(FAIL_EVIDENCE), report
    )
    assert re.search(r'<td class="pass">PASS 94\.0% \(≥ 90\.0%\)<div class="ev">every top-level', report)
    assert "td.fail{background:#fce8e6" in report
    assert "<b>fifo</b> fails share_floor (1/2 gates pass)" in report


def test_null_metric_is_shown_as_a_dash(report: str) -> None:
    # infra was owed nothing: share_delivery is null for both policies.
    assert "<tr><td>infra</td><td>—</td><td>—</td></tr>" in report


def test_table_rows_show_human_durations_and_top_level_groups_only(report: str) -> None:
    assert "<tr><td>train</td><td>4m10s / 2h3m</td><td>4m10s / 2h3m</td></tr>" in report
    assert "<tr><td>eval</td><td>12s / 1m35s</td><td>12s / 1h30m</td></tr>" in report
    assert "<td>1d2h</td>" in report
    assert "<tr><td>research/arch</td>" not in report
    assert "<tr><td>research</td><td>99.0%</td><td>66.0%</td></tr>" in report


def test_description_and_notes_are_escaped_and_bulleted(report: str) -> None:
    assert "Steady mixed load &lt;with&gt; 3 teams &amp; a nested group" in report
    assert "<li>eval traffic doubles on day 3</li><li>infra was idle all week</li>" in report


def test_same_input_gives_identical_bytes(tmp_path: pathlib.Path) -> None:
    first, second = tmp_path / "a" / "report.html", tmp_path / "b" / "report.html"
    write_report(first, [_comparison(), _empty_comparison()])
    write_report(second, [_comparison(), _empty_comparison()])
    assert first.read_bytes() == second.read_bytes()


def test_identical_bytes_across_processes(tmp_path: pathlib.Path) -> None:
    """The SVG ids come from a fixed hash salt, not a per-process random one."""
    script = (
        "import sys, pathlib; sys.path.insert(0, sys.argv[2]); import test_report as t; "
        "from fairshare.report.html import write_report; "
        "write_report(pathlib.Path(sys.argv[1]), [t._comparison()])"
    )
    here = str(pathlib.Path(__file__).parent)
    for name in ("x.html", "y.html"):
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / name), here],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    assert (tmp_path / "x.html").read_bytes() == (tmp_path / "y.html").read_bytes()


def test_charts_drawn_by_a_worker_process_are_the_same_bytes() -> None:
    comparisons = [_comparison(), _empty_comparison()]
    inline = render_report(comparisons)
    with ChartPool(workers=1) as pool:
        assert pool.workers == 1
        drawn_by_worker = render_report(comparisons, pool=pool)
    assert drawn_by_worker == inline
    assert drawn_by_worker.count("<svg") == 8


@pytest.mark.parametrize("stage", ["as-the-signals-unblock", "after-the-start"])
def test_an_interrupt_while_the_chart_workers_start_stops_them_and_leaks_nothing(stage: str) -> None:
    """An interrupt held back while the pool starts is raised the instant the signals unblock; the
    command then ends at once (os._exit, as fairshare.__main__ does). The workers must be stopped on
    the way out: otherwise multiprocessing's resource tracker prints "leaked semaphore objects"
    after the command's last line (a CI run caught it for a SIGINT at 0.90 s)."""
    script = (
        "import os, sys\n"
        "from fairshare import interrupts\n"
        "from fairshare.report import html\n"
        "def boom(*a):\n"
        "    raise KeyboardInterrupt\n"
        "if sys.argv[1] == 'as-the-signals-unblock':\n"
        "    fake = {'watch': staticmethod(boom), 'unwatch': staticmethod(interrupts.unwatch)}\n"
        "    html.interrupts = type('I', (), fake)\n"
        "pool = html.ChartPool(workers=2)\n"
        "try:\n"
        "    with pool:\n"
        "        raise KeyboardInterrupt\n"
        "except KeyboardInterrupt:\n"
        "    gone = pool._pool is None or pool._pool._processes is None\n"
        "    print('stopped' if gone else 'running', flush=True)\n"
        "    os._exit(130)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, stage], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 130, out.stderr
    assert out.stdout.strip() == "stopped"
    assert "leaked" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_immediate_exit_of_an_interrupt_unlinks_the_semaphores_it_still_holds() -> None:
    """An interrupt raised while the chart workers are being set up leaves their queues referenced
    by the exception's frames; the command's immediate exit (os._exit) must still run
    multiprocessing's clean-up, or its resource tracker prints "leaked semaphore objects" after
    the last line (CI: a SIGTERM at 0.95 s)."""
    script = (
        "import multiprocessing\n"
        "from fairshare import _entry\n"
        "held = multiprocessing.get_context('spawn').Queue()\n"
        "_entry._end_now(143)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 143, out.stderr
    assert "leaked" not in out.stderr, out.stderr


def test_report_module_does_not_import_matplotlib() -> None:
    """The CLI imports fairshare.report.html up front; matplotlib (~0.5 s) waits until a chart is drawn."""
    code = "import sys, fairshare.report.html; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_empty_series_and_waits_render_placeholders(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "report.html"
    write_report(path, [_empty_comparison()])
    page = path.read_text(encoding="utf-8")
    assert page.count("<svg") == 4
    assert "no jobs" in page
    assert "no samples" in page
    assert "no groups" in page
    assert "slurm-multifactor" in page
    assert "<tr><td>submitted</td><td>—</td><td>—</td></tr>" in page


def test_comparison_without_results_and_no_comparisons() -> None:
    page = render_report([Comparison("void", "nothing ran", ())])
    assert "No results for this scenario." in page
    assert "<svg" not in page
    assert "No scenarios were compared." in render_report([])


def test_figures_are_closed_after_rendering() -> None:
    plt.close("all")
    render_report([_comparison(), _empty_comparison()])
    assert plt.get_fignums() == []


def test_title_and_unknown_policy(tmp_path: pathlib.Path) -> None:
    odd = ReplayResult("my-policy", "x", {}, Series((), (), {}, {}), {}, {})
    page = render_report([Comparison("x", "", (odd,))], title="Q3 review")
    assert "<title>Q3 review</title>" in page
    assert "<dt>my-policy</dt><dd>a policy without a built-in description.</dd>" in page
