"""The terminal comparison table and gate listing (fairshare.report.table)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.replay.results import Comparison, ReplayResult, Series
from fairshare.report.table import fmt_duration, format_comparison, format_gates, metric_rows

EMPTY_SERIES = Series(t=(), occupancy=(), owed={}, delivered={})


def _metrics(policy: str, *, share_research: float, share_floor_pass: bool) -> dict[str, Any]:
    """A metrics.json (FORMATS.md shape): 2 classes, 3 top-level groups plus research/arch."""
    return {
        "policy": policy,
        "scenario": "normal",
        "epoch": "2026-12-01T00:00:00Z",
        "horizon_s": 604800.0,
        "jobs": {"submitted": 1240, "finished": 1198, "never_started": 3},
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
                "wait_p90_s": 95.0,
                "wait_p99_s": 600.0,
                "first_progress_p50_s": 12.0,
                "first_progress_p90_s": None,
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
                "delivered_gpu_h": 4000.0 * share_research,
                "share_delivery": share_research,
                "unallocated_gpu_h": 0.0,
                "min_window_share_delivery": share_research - 0.05,
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
        "delivery_overall": 0.984,
        "lost_work_gpu_h": 212.5,
        "lost_work_pct": 2.31,
        "preemptions": 57,
        "occupancy": 0.912,
        "fragmented_gpu_h": 1534.0,
        "unallocated_pct": 1.3,
        "deadlines": {"jobs": 40, "met": 38, "met_pct": 95.0},
        "starvation": {
            "max_wait_s": 93784.0,
            "groups_below_share_beyond_window": [] if share_floor_pass else ["research"],
        },
        "gates": {
            "share_floor": {
                "pass": share_floor_pass,
                "value": share_research - 0.05,
                "limit": 0.9,
                "evidence": f"research got {share_research - 0.05:.0%} of its owed share "
                "in its worst 7d window",
            },
            "lost_work_pct": {
                "pass": True,
                "value": 2.31,
                "limit": 5,
                "evidence": "2.31% of allocated GPU-time was lost to preemption",
            },
        },
    }


def _result(policy: str, **kw: Any) -> ReplayResult:
    return ReplayResult(
        strategy=policy,
        scenario="normal",
        metrics=_metrics(policy, **kw),
        series=EMPTY_SERIES,
        waits={},
        lost_gpu_h={},
    )


def _comparison(notes: tuple[str, ...] = ()) -> Comparison:
    return Comparison(
        "normal",
        "steady mixed load",
        (
            _result("fairshare", share_research=0.99, share_floor_pass=True),
            _result("fifo", share_research=0.66, share_floor_pass=False),
        ),
        notes,
    )


def _line(text: str, label: str) -> str:
    """The first table row whose label is exactly `label` (labels are indented 2, cells follow 2+ spaces)."""
    matches = [line for line in text.splitlines() if line.startswith(f"  {label}  ")]
    assert matches, f"no row {label!r} in\n{text}"
    return matches[0]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (42, "42s"),
        (90, "1m30s"),
        (250, "4m10s"),
        (3600, "1h"),
        (7380, "2h3m"),
        (7379, "2h3m"),
        (86399, "1d"),
        (93784, "1d2h"),
        (None, "—"),
        (float("nan"), "—"),
    ],
)
def test_durations_use_two_most_significant_units(seconds: float | None, text: str) -> None:
    assert fmt_duration(seconds) == text


def test_values_are_right_aligned_under_their_policy_name() -> None:
    text = format_comparison(_comparison())
    lines = text.splitlines()
    header = next(line for line in lines if "fairshare" in line and "fifo" in line)
    for label, values in [
        ("submitted", ("1,240", "1,240")),
        ("train", ("4m10s / 2h3m", "4m10s / 2h3m")),
        ("lost work GPU-h", ("212.5", "212.5")),
        ("occupancy", ("91.2%", "91.2%")),
    ]:
        row = _line(text, label)
        for policy, value in zip(("fairshare", "fifo"), values, strict=True):
            end = header.index(policy) + len(policy)
            assert row[end - len(value) : end] == value, f"{label}/{policy} misaligned:\n{header}\n{row}"


def test_rows_cover_jobs_waits_shares_and_capacity() -> None:
    text = format_comparison(_comparison())
    assert text.splitlines()[0] == "normal — steady mixed load"
    assert "1d2h" in _line(text, "longest wait")
    assert "95.0% (38/40)" in _line(text, "deadlines met")
    assert "66.0%" in _line(text, "research")
    assert "98.4%" in _line(text, "overall")
    assert _line(text, "groups below share").split()[-2:] == ["none", "research"]
    for label in (
        "never started",
        "train jobs",
        "eval jobs",
        "lost work %",
        "preemptions",
        "fragmented GPU-h",
        "unallocated %",
    ):
        _line(text, label)


def test_nested_groups_are_not_rows() -> None:
    assert "research/arch" not in format_comparison(_comparison())


def test_null_value_prints_as_dash() -> None:
    text = format_comparison(_comparison())
    assert _line(text, "infra").split()[1:] == ["—", "—"]
    # first_progress_p90 of eval is null: the pair keeps the known half.
    eval_rows = [line for line in text.splitlines() if line.startswith("  eval  ")]
    assert "12s / —" in eval_rows[-1]


def test_gate_rows_show_verdict_value_and_limit() -> None:
    text = format_comparison(_comparison())
    row = _line(text, "share_floor")
    assert "PASS 94.0% (≥ 90.0%)" in row
    assert "FAIL 61.0% (≥ 90.0%)" in row
    assert row.index("PASS") < row.index("FAIL")


def test_failed_gate_evidence_is_listed_below_the_table() -> None:
    text = format_comparison(_comparison())
    assert "Failed gates:" in text
    assert "FAIL fifo share_floor: research got 61% of its owed share in its worst 7d window" in text
    assert "FAIL fairshare" not in text


def test_notes_are_listed() -> None:
    text = format_comparison(_comparison(notes=("eval traffic doubled on day 3",)))
    assert text.splitlines()[-1] == "  - eval traffic doubled on day 3"


def test_missing_metrics_print_dashes_without_crashing() -> None:
    bare = ReplayResult("custom", "normal", {}, EMPTY_SERIES, {}, {})
    text = format_comparison(
        Comparison("normal", "", (bare, _result("fifo", share_research=0.5, share_floor_pass=False)))
    )
    assert _line(text, "submitted").split()[1:] == ["—", "1,240"]
    assert "FAIL" in _line(text, "share_floor")


def test_comparison_without_results() -> None:
    assert format_comparison(Comparison("empty", "nothing ran", ())) == "empty — nothing ran\n(no results)"


def test_format_gates_lists_each_gate_with_evidence() -> None:
    lines = format_gates(_result("fifo", share_research=0.66, share_floor_pass=False)).splitlines()
    assert lines == [
        "FAIL share_floor    61.0% (≥ 90.0%) — research got 61% of its owed share in its worst 7d window",
        "PASS lost_work_pct  2.3% (≤ 5.0%) — 2.31% of allocated GPU-time was lost to preemption",
    ]


def test_format_gates_handles_no_gates_and_null_fields() -> None:
    assert format_gates(ReplayResult("fifo", "normal", {}, EMPTY_SERIES, {}, {})) == "(no gates)"
    odd = {"gates": {"exception_max_days": {"pass": None, "value": None, "limit": 30, "evidence": None}}}
    line = format_gates(ReplayResult("fifo", "normal", odd, EMPTY_SERIES, {}, {}))
    assert line == "—    exception_max_days  — (≤ 30 days)"


def test_gate_rows_carry_verdicts_for_the_report() -> None:
    rows = metric_rows(_comparison().results)
    gate = next(r for r in rows if r.label == "share_floor")
    assert gate.verdicts == (True, False)
    assert gate.evidence[1].startswith("research got 61%")
