"""Fidelity: how far a replayed strategy is from what really happened (`as-run`), on the same
arrivals (docs/own-cluster.md#fidelity; metrics.json `fidelity`, docs/formats.md).

Both sides are read off their events.jsonl lines, so the measure needs nothing but two replay
outputs: per job its first start (waits, start order) and its runs (delivered GPU-equivalents and
allocated GPUs within the recorded span [0, T], T = as-run's end).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ..inputs.workload import Job
from .churn import SIZES, size_of

#: a replayed wait is "close" when within this factor of the real one, or this many seconds of it
WAIT_FACTOR = 2.0
WAIT_SLACK_S = 60.0
SPEARMAN_MIN = 0.8
SHARE_POINTS_MAX = 5.0
#: strategies compared with as-run as what a site would change to, not as models of what it ran
PROPOSALS = ("fairshare",)
THRESHOLDS = {
    "wait_factor": WAIT_FACTOR,
    "wait_slack_s": WAIT_SLACK_S,
    "spearman_min": SPEARMAN_MIN,
    "share_points_max": SHARE_POINTS_MAX,
}


@dataclass
class Observed:
    """What one output did: first start per job, its runs (job, t0, t1, charge, GPUs), its end."""

    first_start: dict[str, float] = field(default_factory=dict)
    runs: list[tuple[str, float, float, float, int]] = field(default_factory=list)
    end: float = 0.0


def observe(events: Sequence[str]) -> Observed:
    obs = Observed()
    open_runs: dict[str, tuple[float, float, int]] = {}
    for line in events:
        e = orjson.loads(line)
        typ, t = e["type"], float(e["t"])
        if typ == "start":
            obs.first_start.setdefault(e["job"], t)
            open_runs[e["job"]] = (t, float(e["charge"]), sum(e["alloc"].values()))
        elif typ in ("finish", "preempt"):
            t0, charge, gpus = open_runs.pop(e["job"])
            obs.runs.append((e["job"], t0, t, charge, gpus))
        elif typ == "end":
            obs.end = t
    for job, (t0, charge, gpus) in sorted(open_runs.items()):
        obs.runs.append((job, t0, obs.end, charge, gpus))
    return obs


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x))
    i = 0
    n = len(x)
    while i < n:
        j = i
        while j + 1 < n and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's of the average ranks); None below 2 jobs or when
    one side is constant."""
    if len(x) < 2:
        return None
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    dx, dy = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / den if den > 0 else None


def kendall(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b in O(n log n): discordant pairs counted with a Fenwick tree over y's ranks,
    ties handled as tau-b does; None below 2 jobs or when one side is constant."""
    n = len(x)
    if n < 2:
        return None
    pairs = sorted(zip(x, y, strict=True))
    ys = sorted(set(y))
    rank = {v: i + 1 for i, v in enumerate(ys)}
    m = len(ys)
    tree = [0] * (m + 1)

    def add(i: int) -> None:
        while i <= m:
            tree[i] += 1
            i += i & -i

    def below_or_equal(i: int) -> int:
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    def tied(values: Sequence[Any]) -> int:
        out, run = 0, 1
        for a, b in itertools.pairwise(values):
            if a == b:
                run += 1
            else:
                out += run * (run - 1) // 2
                run = 1
        return out + run * (run - 1) // 2

    n0 = n * (n - 1) // 2
    n1 = tied([p[0] for p in pairs])
    n2 = tied(sorted(y))
    n3 = tied(pairs)
    discordant = 0
    seen = 0
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            j += 1
        for k in range(i, j):  # earlier x with a greater y: discordant
            discordant += seen - below_or_equal(rank[pairs[k][1]])
        for k in range(i, j):
            add(rank[pairs[k][1]])
        seen += j - i
        i = j
    den = math.sqrt(float(n0 - n1) * float(n0 - n2))
    if den <= 0:
        return None
    return (n0 - n1 - n2 + n3 - 2 * discordant) / den


def _waits(jobs: Sequence[Job], obs: Observed) -> dict[str, float]:
    return {j.id: obs.first_start.get(j.id, obs.end) - j.submit for j in jobs}


def _ratio(replayed: float, actual: float) -> float | None:
    if actual > 0:
        return replayed / actual
    return 1.0 if replayed == 0 else None


def _close(replayed: float, actual: float) -> bool:
    r = _ratio(replayed, actual)
    return abs(replayed - actual) <= WAIT_SLACK_S or (r is not None and 1 / WAIT_FACTOR <= r <= WAIT_FACTOR)


def _wait_row(ids: Sequence[str], actual: dict[str, float], replayed: dict[str, float]) -> dict[str, Any]:
    a = np.asarray([actual[i] for i in ids])
    r = np.asarray([replayed[i] for i in ids])
    row: dict[str, Any] = {"jobs": len(ids)}
    close = True
    for q in (50, 90):
        av, rv = float(np.percentile(a, q)), float(np.percentile(r, q))
        row[f"actual_p{q}_s"] = av
        row[f"replayed_p{q}_s"] = rv
        row[f"p{q}_ratio"] = _ratio(rv, av)
        close = close and _close(rv, av)
    row["close"] = close
    return row


def _span_use(obs: Observed, group_of: dict[str, str], span: float) -> tuple[dict[str, float], float]:
    """GPU-equivalent seconds delivered per leaf, and GPU-seconds allocated, within [0, span]."""
    by_leaf: dict[str, float] = {}
    gpu_s = 0.0
    for job, t0, t1, charge, gpus in obs.runs:
        d = max(0.0, min(t1, span) - t0)
        if d > 0:
            leaf = group_of[job]
            by_leaf[leaf] = by_leaf.get(leaf, 0.0) + charge * d
            gpu_s += gpus * d
    return by_leaf, gpu_s


def fidelity(
    jobs: Sequence[Job], leaves: Sequence[str], total_gpus: int, actual: Observed, replayed: Observed
) -> dict[str, Any]:
    """metrics.json `fidelity` of a replayed strategy against as-run (docs/formats.md)."""
    wa, wr = _waits(jobs, actual), _waits(jobs, replayed)
    sizes: dict[str, Any] = {}
    for name, _, _ in SIZES:
        ids = [j.id for j in jobs if size_of(j.request.gpus) == name]
        if ids:
            sizes[name] = _wait_row(ids, wa, wr)
    group_of = {j.id: j.request.group for j in jobs}
    span = actual.end
    used_a, gpu_s_a = _span_use(actual, group_of, span)
    used_r, gpu_s_r = _span_use(replayed, group_of, span)
    tot_a, tot_r = sum(used_a.values()), sum(used_r.values())
    accounts: dict[str, Any] = {}
    for leaf in leaves:
        ids = [j.id for j in jobs if j.request.group == leaf]
        row: dict[str, Any] = _wait_row(ids, wa, wr) if ids else {"jobs": 0, "close": True}
        sa = 100 * used_a.get(leaf, 0.0) / tot_a if tot_a > 0 else 0.0
        sr = 100 * used_r.get(leaf, 0.0) / tot_r if tot_r > 0 else 0.0
        row.update(actual_share_pct=sa, replayed_share_pct=sr, share_diff_points=sr - sa)
        accounts[leaf] = row
    both = [j.id for j in jobs if j.id in actual.first_start and j.id in replayed.first_start]
    xa = [actual.first_start[i] for i in both]
    xr = [replayed.first_start[i] for i in both]
    rho, tau = spearman(xa, xr), kendall(xa, xr)
    cap = total_gpus * span
    occ_a = gpu_s_a / cap if cap > 0 else None
    occ_r = gpu_s_r / cap if cap > 0 else None
    first = min((j.submit for j in jobs), default=0.0)
    mk_a, mk_r = actual.end - first, replayed.end - first
    off: list[str] = []
    for name, row in sizes.items():
        if not row["close"]:
            off.append(f"waits of {name}-GPU jobs ({_ratios(row)})")
    for leaf, row in accounts.items():
        if not row["close"]:
            off.append(f"waits of {leaf}'s jobs ({_ratios(row)})")
        if abs(row["share_diff_points"]) > SHARE_POINTS_MAX:
            off.append(
                f"{leaf}'s delivered share ({row['replayed_share_pct']:.1f}% replayed vs "
                f"{row['actual_share_pct']:.1f}% real)"
            )
    if rho is None or rho < SPEARMAN_MIN:
        off.append(f"start order (Spearman {'n/a' if rho is None else f'{rho:.2f}'})")
    return {
        "against": "as-run",
        "thresholds": dict(THRESHOLDS),
        "span_s": span,
        "sizes": sizes,
        "accounts": accounts,
        "start_order": {
            "jobs": len(both),
            "not_started_replayed": sum(1 for j in jobs if j.id not in replayed.first_start),
            "not_started_actual": sum(1 for j in jobs if j.id not in actual.first_start),
            "spearman": rho,
            "kendall": tau,
        },
        "occupancy": {
            "actual": occ_a,
            "replayed": occ_r,
            "diff_points": 100 * (occ_r - occ_a) if occ_a is not None and occ_r is not None else None,
        },
        "makespan": {"actual_s": mk_a, "replayed_s": mk_r, "ratio": _ratio(mk_r, mk_a)},
        "faithful": not off,
        "off": off,
    }


def _ratios(row: dict[str, Any]) -> str:
    def one(q: int) -> str:
        a, r = row[f"actual_p{q}_s"], row[f"replayed_p{q}_s"]
        return f"p{q} {r:.0f} s vs {a:.0f} s real"

    return ", ".join(one(q) for q in (50, 90))


def verdict(fid: dict[str, dict[str, Any]]) -> list[str]:
    """Sentences saying which replayed model of the site's scheduler to trust and where each is off
    (strategy -> fidelity); fairshare is judged as the proposal it is, not as a model."""
    if not fid:
        return []
    lines = [
        f"Thresholds: waits (p50, p90 by size and by account) within x{WAIT_FACTOR:g} or "
        f"{WAIT_SLACK_S:g} s of the real ones, start-order Spearman >= {SPEARMAN_MIN:g}, delivered "
        f"share per account within {SHARE_POINTS_MAX:g} points, over the recorded span."
    ]

    def score(item: tuple[str, dict[str, Any]]) -> tuple[int, float]:
        rho = item[1]["start_order"]["spearman"]
        return (len(item[1]["off"]), -(rho if rho is not None else -1.0))

    models = {k: v for k, v in fid.items() if k not in PROPOSALS}
    if models:
        ranked = sorted(models.items(), key=score)
        best, best_f = ranked[0]
        faithful = [name for name, f in ranked if f["faithful"]]
        if faithful:
            lines.append(
                f"Trust {', '.join(faithful)} as the model of this site's scheduler: within every "
                "threshold of what really ran" + (f" ({best} closest)." if len(faithful) > 1 else ".")
            )
        else:
            lines.append(
                f"No model of the site's scheduler is within every threshold; {best} is closest "
                f"({len(best_f['off'])} figure(s) off). A comparison against it is an estimate: where "
                "it is off (below), so is the baseline."
            )
        for name, f in ranked:
            if f["off"]:
                lines.append(f"{name} is off in: {'; '.join(f['off'])}.")
    for name in fid:
        if name in PROPOSALS:
            lines.append(
                f"{name} is the proposal, not a model of what ran: its distance from as-run is the "
                "change it would make, not an error."
            )
    return lines


def fidelity_text(fid: dict[str, dict[str, Any]]) -> str:
    """The console's fidelity section: one line per strategy, then the verdict."""
    if not fid:
        return ""
    out = ["fidelity against as-run (replayed / real):"]
    for name, f in fid.items():
        so = f["start_order"]
        sizes = ", ".join(
            f"{s} p50 {_fmt_ratio(r['p50_ratio'])} p90 {_fmt_ratio(r['p90_ratio'])}"
            for s, r in f["sizes"].items()
        )
        occ = f["occupancy"]["diff_points"]
        rho, tau = so["spearman"], so["kendall"]
        out.append(
            f"  {name:<20} Spearman {_fmt(rho)} Kendall {_fmt(tau)}; waits {sizes}; occupancy "
            f"{'n/a' if occ is None else f'{occ:+.1f} pts'}; makespan {_fmt_ratio(f['makespan']['ratio'])}"
        )
    out.extend(verdict(fid))
    return "\n".join(out)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"x{x:.2f}"
