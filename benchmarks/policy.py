"""Issue 10's acceptance figures for a `fairshare compare` output folder, recomputed from events.

    .venv/bin/python benchmarks/policy.py OUT                 # every replay folder under OUT
    .venv/bin/python benchmarks/policy.py OUT --brief         # one line per replay
    .venv/bin/python benchmarks/policy.py OUT --ref-dir REF   # take slurm-multifactor and fifo from REF
    .venv/bin/python benchmarks/policy.py OUT --json FILE
    .venv/bin/python benchmarks/policy.py OUT --lines full        # the whole trace's lines
    .venv/bin/python benchmarks/policy.py OUT --lines scenarios   # the built-in scenarios' lines

OUT holds replay folders (`OUT/<policy>/` or `OUT/<scenario>/<policy>/`, each with events.jsonl and
metrics.json). Everything but the share delivery (metrics.json, checked by the independent checker)
is computed here from events.jsonl and the policy's window alone, with the definitions of
docs/formats.md ("Churn, overhead and waits by team and size"), and compared with metrics.json's
`churn`, `sizes` and per-team waits (`metrics.json agrees` in the output; tests/test_churn_metrics.py
checks it on the built-in scenarios). Standalone: numpy and PyYAML, no fairshare import.

Acceptance lines (issue 10), for every replay but the reference (`--ref`, slurm-multifactor) and fifo:
  window     wait p50 and p90 at or below the reference's; lowest top-level share delivery >= 0.95
             x overall; no job preempted more than 3 times; flip-flops <= 10 % of preemptions; lost
             work + restart overhead <= 1 % of allocated GPU time
  full       the same share and churn lines, and no job size waiting longer than under fifo (p50
             and p90); the waits against the reference are printed, not judged
  scenarios  debug wait p90 <= 60 s in `normal` and `small-burst` (the churn lines are printed)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

SIZES: tuple[tuple[str, int, int | None], ...] = (("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, None))
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(v: Any) -> float:
    if isinstance(v, int | float):
        return float(v)
    total, num = 0.0, ""
    for ch in str(v).strip():
        if ch.isdigit() or ch == ".":
            num += ch
        elif ch in UNITS:
            total += float(num) * UNITS[ch]
            num = ""
    return total + (float(num) if num else 0.0)


def window_of(folder: Path) -> float:
    p = folder / "policy.yaml"
    data = yaml.safe_load(p.read_text()) if p.exists() else None
    return duration(data.get("window", "7d")) if isinstance(data, dict) else 7 * 86400.0


def pct(xs: list[float] | list[int], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else None


def size_of(gpus: int) -> str | None:
    for name, lo, hi in SIZES:
        if gpus >= lo and (hi is None or gpus <= hi):
            return name
    return None


def team_of(group: str) -> str:
    return group.split("/", 1)[0]


def summary(xs: list[float]) -> dict[str, Any]:
    return {"jobs": len(xs), "wait_p50_s": pct(xs, 50), "wait_p90_s": pct(xs, 90)}


def _close(
    runs: dict[str, tuple[float, int, float, bool]], jid: str, t: float, acc: dict[str, float]
) -> None:
    t0, gpus, overhead, first = runs.pop(jid)
    acc["allocated"] += (t - t0) * gpus
    acc["first" if first else "restart"] += min(t - t0, overhead) * gpus


def measure(folder: Path) -> dict[str, Any]:
    """The figures of one replay folder (see the module's docstring)."""
    metrics = json.loads((folder / "metrics.json").read_text())
    window = window_of(folder)
    jobs: dict[str, dict[str, Any]] = {}
    first_start: dict[str, float] = {}
    finish: dict[str, float] = {}
    runs: dict[str, tuple[float, int, float, bool]] = {}  # job -> t0, GPUs, overhead, first start
    starts: dict[str, int] = defaultdict(int)
    preempts_of: dict[str, int] = defaultdict(int)
    by_reason: dict[str, int] = defaultdict(int)
    acc = {"allocated": 0.0, "lost": 0.0, "restart": 0.0, "first": 0.0}
    last: dict[tuple[str, str], float] = {}
    flips = preemptions = 0
    requeued: dict[str, float] = {}
    requeue_waits: list[float] = []
    horizon: float | None = None
    with open(folder / "events.jsonl", "rb") as f:
        for line in f:
            e = json.loads(line)
            ty, t = e["type"], e["t"]
            if ty == "submit":
                jobs[e["job"]] = e
            elif ty == "start":
                jid, job = e["job"], jobs[e["job"]]
                starts[jid] += 1
                first = starts[jid] == 1
                first_start.setdefault(jid, t)
                if jid in requeued:
                    requeue_waits.append(t - requeued.pop(jid))
                overhead = (job["startup"] if first or not job["resumable"] else job["restore"]) or 0.0
                runs[jid] = (t, sum(e["alloc"].values()), overhead, first)
            elif ty == "finish":
                _close(runs, e["job"], t, acc)
                finish[e["job"]] = t
            elif ty == "preempt":
                jid = e["job"]
                _close(runs, jid, t, acc)
                acc["lost"] += e["lost_gpu_s"]
                preemptions += 1
                preempts_of[jid] += 1
                by_reason[e["reason"]] += 1
                requeued[jid] = t
                by = e.get("by")
                if by is not None:
                    victim, taker = team_of(jobs[jid]["group"]), team_of(jobs[by]["group"])
                    prev = last.get((taker, victim))
                    if taker != victim and prev is not None and t - prev <= window:
                        flips += 1
                    last[(victim, taker)] = t
            elif ty == "end":
                horizon = t
    assert horizon is not None, f"{folder}: no end event"
    for jid in list(runs):
        _close(runs, jid, horizon, acc)
    requeue_waits.extend(horizon - t for t in requeued.values())  # never restarted: censored
    waits: list[float] = []
    by_size: dict[str, list[float]] = defaultdict(list)
    by_team: dict[str, list[float]] = defaultdict(list)
    by_class: dict[str, list[float]] = defaultdict(list)
    for jid, j in jobs.items():
        w = first_start.get(jid, horizon) - j["t"]
        waits.append(w)
        size = size_of(j["gpus"])
        if size is not None:
            by_size[size].append(w)
        by_team[team_of(j["group"])].append(w)
        by_class[j["class"]].append(w)
    counts = sorted(preempts_of.values())
    alloc = acc["allocated"]

    def share(x: float) -> float:
        return 100 * x / alloc if alloc else 0.0

    churn = {
        "preempted_jobs": len(counts),
        "preemptions_per_preempted_job": {
            "p50": pct(counts, 50),
            "p99": pct(counts, 99),
            "max": counts[-1] if counts else 0,
        },
        "flip_flops": flips,
        "flip_flop_pct": 100 * flips / preemptions if preemptions else 0.0,
        "restore_startup_gpu_h": acc["restart"] / 3600,
        "restore_startup_pct": share(acc["restart"]),
        "first_startup_gpu_h": acc["first"] / 3600,
        "lost_plus_restore_pct": share(acc["lost"] + acc["restart"]),
    }
    tops = {
        g: v["share_delivery"]
        for g, v in metrics["groups"].items()
        if "/" not in g and v.get("share_delivery") is not None
    }
    low = min(tops, key=lambda g: tops[g]) if tops else None
    overall = metrics["delivery_overall"]
    sizes = {name: summary(by_size[name]) for name, _, _ in SIZES if by_size[name]}
    teams = {k: summary(v) for k, v in sorted(by_team.items())}
    jct = [finish.get(j, horizon) - e["t"] for j, e in jobs.items()]
    return {
        "folder": str(folder),
        "policy": metrics["policy"],
        "scenario": metrics.get("scenario"),
        "jobs": len(jobs),
        "share": {
            "lowest": tops[low] if low else None,
            "lowest_group": low,
            "highest": max(tops.values()) if tops else None,
            "overall": overall,
            "lowest_over_overall": tops[low] / overall if low and overall else None,
        },
        "wait": summary(waits),
        "sizes": sizes,
        "teams": teams,
        "classes": {k: summary(v) for k, v in sorted(by_class.items())},
        "preemptions": preemptions,
        "preemptions_by_reason": dict(by_reason),
        "churn": churn,
        "allocated_gpu_h": alloc / 3600,
        "lost_work_gpu_h": acc["lost"] / 3600,
        "lost_work_pct": share(acc["lost"]),
        "requeue_wait": {
            "p50": pct(requeue_waits, 50),
            "p90": pct(requeue_waits, 90),
            "max": max(requeue_waits, default=None),
        },
        "jct": {"p50": pct(jct, 50), "p90": pct(jct, 90)},
        "occupancy": metrics["occupancy"],
        "metrics_agree": _agree(metrics, churn, sizes, teams, preemptions),
    }


def _close_enough(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close_enough(a[k], b[k]) for k in a)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def _agree(
    metrics: dict[str, Any],
    churn: dict[str, Any],
    sizes: dict[str, Any],
    teams: dict[str, Any],
    preemptions: int,
) -> bool:
    """Whether metrics.json says what the events say."""
    tops = {
        g: {k: v.get(k) for k in ("jobs", "wait_p50_s", "wait_p90_s")}
        for g, v in metrics["groups"].items()
        if "/" not in g
    }
    mine = {g: teams.get(g, {"jobs": 0, "wait_p50_s": None, "wait_p90_s": None}) for g in tops}
    return (
        metrics["preemptions"] == preemptions
        and _close_enough(metrics.get("churn"), churn)
        and _close_enough(metrics.get("sizes"), sizes)
        and _close_enough(tops, mine)
    )


def acceptance(
    m: dict[str, Any], ref: dict[str, Any] | None, fifo: dict[str, Any] | None, lines: str = "window"
) -> dict[str, bool]:
    a: dict[str, bool] = {}
    if lines == "scenarios":
        if m["scenario"] in ("normal", "small-burst") and "debug" in m["classes"]:
            a["debug p90 <= 60s"] = m["classes"]["debug"]["wait_p90_s"] <= 60.0
        return a
    if ref is not None and lines == "window":
        a["wait p50 <= ref"] = m["wait"]["wait_p50_s"] <= ref["wait"]["wait_p50_s"]
        a["wait p90 <= ref"] = m["wait"]["wait_p90_s"] <= ref["wait"]["wait_p90_s"]
    lo = m["share"]["lowest_over_overall"]
    if lo is not None:
        a["lowest share >= 0.95 overall"] = lo >= 0.95
    churn = m["churn"]
    a["max preemptions per job <= 3"] = churn["preemptions_per_preempted_job"]["max"] <= 3
    a["flip-flops <= 10%"] = churn["flip_flop_pct"] <= 10.0
    a["lost + restart <= 1%"] = churn["lost_plus_restore_pct"] <= 1.0
    if fifo is not None and lines == "full":
        a["no size worse than fifo"] = all(
            v["wait_p50_s"] <= fifo["sizes"][k]["wait_p50_s"]
            and v["wait_p90_s"] <= fifo["sizes"][k]["wait_p90_s"]
            for k, v in m["sizes"].items()
            if k in fifo["sizes"]
        )
    return a


def hms(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.1f}m"
    if s < 2 * 86400:
        return f"{s / 3600:.2f}h"
    return f"{s / 86400:.1f}d"


def _pair(v: dict[str, Any]) -> str:
    return f"{hms(v['wait_p50_s'])}/{hms(v['wait_p90_s'])}"


def render(results: list[dict[str, Any]], brief: bool) -> str:
    lines = []
    for r in results:
        m = r["m"]
        sh, c = m["share"], m["churn"]
        per = c["preemptions_per_preempted_job"]
        acc = r.get("acceptance") or {}
        fails = [k for k, v in acc.items() if not v]
        verdict = ("FAIL: " + ", ".join(fails)) if fails else ("all lines hold" if acc else "-")
        low = "-" if sh["lowest_over_overall"] is None else f"{sh['lowest_over_overall']:.3f}"
        sizes = " ".join(f"{k}:{_pair(v)}" for k, v in m["sizes"].items())
        if brief:
            lines.append(
                f"{m['folder']}: low/ovr {low} wait {_pair(m['wait'])} | {sizes} | jobs preempted "
                f"{c['preempted_jobs']} max {per['max']} ff {c['flip_flop_pct']:.1f}% churn "
                f"{c['lost_plus_restore_pct']:.3f}% | {verdict}"
            )
            continue
        lines += [
            f"== {m['scenario'] or ''} / {m['policy']}  ({m['folder']})",
            f"  share lowest {sh['lowest']} ({sh['lowest_group']}), highest {sh['highest']}, overall "
            f"{sh['overall']}; lowest/overall {low}",
            f"  wait p50/p90 {_pair(m['wait'])}; occupancy {m['occupancy']:.3f}",
            f"  by size  {sizes}",
            "  by team  " + " ".join(f"{k}:{_pair(v)}" for k, v in m["teams"].items()),
            "  by class " + " ".join(f"{k}:{_pair(v)}" for k, v in m["classes"].items()),
            f"  preemptions {m['preemptions']} {m['preemptions_by_reason']}; jobs preempted "
            f"{c['preempted_jobs']}; per preempted job p50/p99/max {per['p50']}/{per['p99']}/{per['max']}; "
            f"flip-flops {c['flip_flops']} ({c['flip_flop_pct']:.1f} %)",
            f"  allocated {m['allocated_gpu_h']:.0f} GPU-h; lost {m['lost_work_gpu_h']:.1f} GPU-h "
            f"({m['lost_work_pct']:.3f} %); restart overhead {c['restore_startup_gpu_h']:.1f} GPU-h "
            f"({c['restore_startup_pct']:.3f} %); lost + restart {c['lost_plus_restore_pct']:.3f} %; "
            f"first-start startup {c['first_startup_gpu_h']:.1f} GPU-h",
            f"  requeue wait p50/p90/max {hms(m['requeue_wait']['p50'])}/{hms(m['requeue_wait']['p90'])}/"
            f"{hms(m['requeue_wait']['max'])}; JCT p50/p90 {hms(m['jct']['p50'])}/{hms(m['jct']['p90'])}",
            f"  metrics.json agrees: {m['metrics_agree']}",
            f"  acceptance: {verdict}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--ref", default="slurm-multifactor", help="the incumbent (a policy folder name)")
    ap.add_argument("--fifo", default="fifo")
    ap.add_argument("--ref-dir", type=Path, help="take --ref and --fifo from this compare folder")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--brief", action="store_true", help="one line per replay")
    ap.add_argument("--lines", choices=("window", "full", "scenarios"), default="window")
    args = ap.parse_args(argv)
    folders = sorted(
        {p.parent for p in args.out.rglob("metrics.json") if (p.parent / "events.jsonl").exists()}
    )
    if not folders:
        print(f"no replay folders under {args.out}", file=sys.stderr)
        return 2
    by_parent: dict[Path, dict[str, dict[str, Any]]] = defaultdict(dict)
    for f in folders:
        by_parent[f.parent][f.name] = measure(f)
    refs = {}
    if args.ref_dir:
        refs = {n: measure(args.ref_dir / n) for n in (args.ref, args.fifo) if (args.ref_dir / n).is_dir()}
    results = []
    for ms in by_parent.values():
        ref, fifo = ms.get(args.ref, refs.get(args.ref)), ms.get(args.fifo, refs.get(args.fifo))
        for name, m in ms.items():
            r: dict[str, Any] = {"m": m}
            if name not in (args.ref, args.fifo):
                r["acceptance"] = acceptance(m, ref, fifo, args.lines)
            results.append(r)
    print(render(results, args.brief))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
