"""Read-side views of the engine: computed in the loop's thread, published immutable for the API.

The API never touches the loop's engine. After a cycle (and on an idle timer) the loop builds a
`View`: the tree with shares, owed, delivered, debt and unallocated over the window (the ledger
integrated up to now on a copy of the ledger alone), the queue in the strategy's order with each
job's hold reason, the running jobs, the usage series of the window per tree node, and the
forecast start of pending jobs (engine.forecast, on a copy of the engine). The API serves views
as they are; `explain` combines one with the job's decisions from the audit.

Units: times in seconds since 1970; integrals in GPU-equivalent seconds (`*_gpu_h` in hours);
rates in GPU-equivalents.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.fairness import priority
from ...core.queue import Place, place_in_line, places, queue_order
from ...core.scheduler import decide
from ...core.tree import TreeIndex
from ...engine.ledger import Ledger
from ...inputs.policy import Policy
from ..timefmt import iso
from .live_engine import HOLD_TEXT, ExceptionInForce, LiveEngine

H = 3600.0


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def ledger_at(
    ledger: Ledger, t_state: float, rates: tuple[Sequence[float], Sequence[float]] | None, now: float
) -> Ledger:
    """A copy of `ledger` integrated to `now`: its current rates up to the state's instant, then
    `rates` (the rates after the state's last change, when not integrated yet)."""
    c = copy.deepcopy(ledger)
    if rates is not None:
        c.advance(t_state)
        c.set_rates(rates[0], rates[1])
    c.advance(max(now, c.t))
    return c


@dataclass(frozen=True)
class NodeRow:
    path: str
    name: str
    depth: int
    parent: str | None
    leaf: bool
    share: float
    static_frac: float
    effective_share: float
    owed_rate: float
    used_rate: float
    owed_s: float
    delivered_s: float
    debt_s: float
    unallocated_s: float
    priority: float | None
    pending: int
    running: int
    pending_gpus: int
    running_gpus: int
    owner: str | None = None
    review: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "depth": self.depth,
            "parent": self.parent,
            "leaf": self.leaf,
            "share": self.share,
            "static_fraction": self.static_frac,
            "effective_share": self.effective_share,
            "owed_rate": self.owed_rate,
            "used_rate": self.used_rate,
            "owed_gpu_h": self.owed_s / H,
            "delivered_gpu_h": self.delivered_s / H,
            "debt_gpu_h": self.debt_s / H,
            "unallocated_gpu_h": self.unallocated_s / H,
            "share_delivery": None if self.owed_s <= 0 else self.delivered_s / self.owed_s,
            "priority": self.priority,
            "pending_jobs": self.pending,
            "running_jobs": self.running,
            "pending_gpus": self.pending_gpus,
            "running_gpus": self.running_gpus,
            "owner": self.owner,
            "review": self.review,
        }


@dataclass(frozen=True)
class JobRow:
    id: str
    group: str
    leaf: int
    cls: str
    user: str | None
    gpus: int
    nodes: int
    gpu_types: tuple[str, ...] | None
    label: str
    estimate: float
    protected: float
    deadline: float | None
    state: str
    submitted: float
    waiting_since: float | None
    first_start: float | None
    last_start: float | None
    ended: float | None
    runs: int
    preemptions: int
    lost_gpu_s: float
    charge: float
    on_nodes: tuple[str, ...]
    position: int | None  # place in the whole queue's order (1 = next)
    group_position: int | None  # place among its group's pending jobs
    why: str | None  # hold reason code
    hung: bool = False
    progress: Mapping[str, Any] | None = None  # what the current run reported (docs/progress.md)

    def as_json(self, view: View) -> dict[str, Any]:
        forecast = view.forecasts.get(self.id) if self.state == "pending" else None
        return {
            "id": self.id,
            "group": self.group,
            "class": self.cls,
            "user": self.user,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpu_types": list(self.gpu_types) if self.gpu_types is not None else None,
            "label": self.label,
            "estimate_s": self.estimate,
            "protected_s": self.protected,
            "deadline": iso(self.deadline),
            "state": self.state,
            "submitted": iso(self.submitted),
            "submitted_t": self.submitted,
            "waited_s": None if self.waiting_since is None else max(0.0, view.now - self.waiting_since),
            "first_start": iso(self.first_start),
            "last_start": iso(self.last_start),
            "last_start_t": self.last_start,
            "ended": iso(self.ended),
            "runs": self.runs,
            "preemptions": self.preemptions,
            "lost_gpu_h": self.lost_gpu_s / H,
            "charge_rate": self.charge,
            "on_nodes": list(self.on_nodes),
            "hung": self.hung,
            "progress": _progress_json(self.progress, view.now),
            "position": self.position,
            "group_position": self.group_position,
            "why_pending": self.why,
            "why_pending_text": HOLD_TEXT.get(self.why) if self.why else None,
            "next_opportunity": iso(forecast) if forecast is not None else None,
            "next_opportunity_t": forecast,
            "next_opportunity_in_s": None if forecast is None else max(0.0, forecast - view.now),
        }


@dataclass(frozen=True)
class View:
    """What the API shows, as of `now` (the ledger) and `t` (the engine's last instant)."""

    version: int
    role: str  # writer | reader | starting
    backend: str
    now: float
    t: float
    speed: float
    strategy: str
    policy_sha: str
    lookahead: float
    window: float
    capacity: float
    gpus_total: int
    gpus_busy: int
    tree: tuple[NodeRow, ...] = ()
    jobs: Mapping[str, JobRow] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    done: tuple[str, ...] = ()  # recently ended jobs, newest last
    forecasts: Mapping[str, float] = field(default_factory=dict)
    forecast_at: float | None = None
    series: Mapping[str, Any] = field(default_factory=dict)
    waits: tuple[tuple[float, str, str, float], ...] = ()
    exceptions: tuple[ExceptionInForce, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)
    index: Mapping[str, int] = field(default_factory=dict)  # tree path -> row
    sides: TreeIndex | None = None  # the engine's TreeIndex (immutable), for explain
    recovery: Mapping[str, Any] = field(default_factory=dict)  # per class, from resumed reports

    def node(self, path: str) -> NodeRow | None:
        i = self.index.get(path)
        return None if i is None else self.tree[i]


EMPTY = View(0, "starting", "", 0.0, 0.0, 0.0, "", "", 3600.0, 7 * 86400.0, 0.0, 0, 0)


def build_view(
    engine: LiveEngine,
    *,
    version: int,
    role: str,
    backend: str,
    now: float,
    speed: float,
    order: Sequence[str],
    why: Mapping[str, str],
    forecasts: Mapping[str, float],
    forecast_at: float | None,
    status: Mapping[str, Any],
    owners: Mapping[str, tuple[str | None, str | None]] | None = None,
) -> View:
    e = engine
    tree = e.state.tree
    now = max(now, e.t)
    rates = e.state.rates_now() if (e.state.dirty or not e.state.computed) else None
    ledger = ledger_at(e.state.ledger, e.t, rates, now)
    unalloc = ledger_at(e.unallocated.ledger, e.t, None, now)
    owed, used = rates if rates is not None else (e.state.owed_list, e.state.used_list)
    debt = ledger.debt()
    ent, deliv = ledger.owed_sum, ledger.deliv_sum
    share_sum: dict[int, float] = {}
    for i, p in enumerate(tree.parent):
        share_sum[p] = share_sum.get(p, 0.0) + e.state.shares[i]
    eff = [0.0] * len(tree.paths)
    for i, p in enumerate(tree.parent):
        eff[i] = e.state.shares[i] / share_sum[p] * (1.0 if p < 0 else eff[p])
    pend_n, run_n = [0] * len(tree.paths), [0] * len(tree.paths)
    pend_g, run_g = [0] * len(tree.paths), [0] * len(tree.paths)
    for job in e.state.pending.jobs.values():
        for a in tree.leaf_ancestors[job.leaf]:
            pend_n[a] += 1
            pend_g[a] += job.gpus
    for jid, rv in e.state.running.items():
        if e.state.detached.get(jid, 0) < 0:
            continue  # its group left the policy and no ancestor survived: charged to no group
        for a in tree.leaf_ancestors[rv.job.leaf]:
            run_n[a] += 1
            run_g[a] += rv.job.gpus
    owners = owners or {}
    rows = []
    for i, path in enumerate(tree.paths):
        p = tree.parent[i]
        pr = priority(float(debt[i]), owed[i], used[i], float(ent[i]), e.state.knobs.lookahead)
        owner, review = owners.get(path, (None, None))
        rows.append(
            NodeRow(
                path,
                path.rsplit("/", 1)[-1],
                tree.depth[i],
                tree.paths[p] if p >= 0 else None,
                not tree.children[i],
                tree.share[i],
                tree.static_frac[i],
                eff[i],
                owed[i],
                used[i],
                float(ent[i]),
                float(deliv[i]),
                float(debt[i]),
                float(unalloc.owed_sum[i]),
                _num(pr),
                pend_n[i],
                run_n[i],
                pend_g[i],
                run_g[i],
                owner,
                review,
            )
        )
    names = e.node_names()
    queue = queue_order(order, e.state.pending.jobs)
    placed = places(queue, e.state.pending.jobs)
    jobs: dict[str, JobRow] = {}
    for jid in list(e.state.pending.jobs) + list(e.state.running):
        pos, group_pos = placed.get(jid, (None, None))
        jobs[jid] = _job_row(e, jid, names, pos, group_pos, why.get(jid))
    done = [
        j
        for j, rec in e.info.items()
        if rec.state in ("done", "cancelled") and rec.ended is not None and rec.ended >= now - 86400.0
    ]
    done = sorted(done, key=lambda j: (e.info[j].ended or 0.0, j))[-500:]
    for jid in done:
        jobs[jid] = _job_row(e, jid, names, None, None, None)
    return View(
        version=version,
        role=role,
        backend=backend,
        now=now,
        t=e.t,
        speed=speed,
        strategy=e.state.strategy.name,
        policy_sha=e.policy_sha,
        lookahead=e.state.knobs.lookahead,
        window=e.state.setup.window,
        capacity=e.state.fleet.capacity,
        gpus_total=sum(n.gpus for i, n in enumerate(e.state.nodes) if i not in e.state.fleet.retired),
        gpus_busy=e.state.fleet.allocated,
        tree=tuple(rows),
        jobs=jobs,
        order=queue,
        done=tuple(done),
        forecasts=dict(forecasts),
        forecast_at=forecast_at,
        series=_series(ledger, unalloc, tree.paths),
        waits=tuple(e.first_starts),
        exceptions=tuple(e.exceptions_in_force),
        status=dict(status),
        index={p: i for i, p in enumerate(tree.paths)},
        sides=tree,
        recovery=e.state.recovery_json(),
    )


def _job_row(
    e: LiveEngine,
    jid: str,
    names: Sequence[str],
    position: int | None,
    group_position: int | None,
    why: str | None,
) -> JobRow:
    rec = e.info[jid]
    r = rec.request
    st = e.state.states.get(jid)
    waiting_since = st.pending_since if rec.state == "pending" and st is not None else None
    return JobRow(
        jid,
        r.group,
        r.leaf,
        r.cls,
        r.user,
        r.gpus,
        r.nodes,
        r.gpu_types,
        r.label,
        r.estimate,
        r.protected,
        r.deadline,
        rec.state,
        rec.submitted,
        waiting_since,
        rec.first_start,
        rec.last_start,
        rec.ended,
        rec.runs,
        rec.preemptions,
        rec.lost_gpu_s,
        rec.charge if rec.state == "running" else 0.0,
        tuple(names[i] for i in rec.nodes) if rec.state == "running" else (),
        position,
        group_position,
        why if rec.state == "pending" else None,
        jid in e.state.hung_since,
        _reports(e, jid),
    )


def _reports(e: LiveEngine, jid: str) -> Mapping[str, Any] | None:
    rep = e.state.run_reports(jid)
    if rep is None or (rep.step is None and rep.resumed_from is None):
        return None
    return rep.as_json()


def _progress_text(rep: Mapping[str, Any] | None, hung: bool) -> str:
    """explain's words for a running job's reports (docs/progress.md)."""
    if rep is None:
        return "; it reports no progress" + (" and is flagged no_progress" if hung else "")
    out = f"; last progress step {rep['step']} at {iso(rep['step_t'])}"
    if rep["checkpoint_step"] is not None:
        out += f", last checkpoint step {rep['checkpoint_step']} at {iso(rep['checkpoint_t'])}"
    if rep["resumed_from"] is not None:
        out += f", resumed from step {rep['resumed_from']}"
    return out + (
        " (flagged no_progress: no new step for longer than its class's max_stall)" if rep["stalled"] else ""
    )


def _progress_json(rep: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """A running job's reports with their ages: last progress, last checkpoint, resumed from."""
    if rep is None:
        return None
    step_t, ckpt_t = rep["step_t"], rep["checkpoint_t"]
    return {
        **rep,
        "step_at": iso(step_t),
        "progress_age_s": None if step_t is None else max(0.0, now - step_t),
        "checkpoint_at": iso(ckpt_t),
        "checkpoint_age_s": None if ckpt_t is None else max(0.0, now - ckpt_t),
    }


def _series(ledger: Ledger, unalloc: Ledger, paths: Sequence[str]) -> dict[str, Any]:
    """Per tree node, the average owed and delivered rate (GPU-equivalents) of each bucket of the
    window, oldest first; the last bucket is the current, partial one."""
    b, width = ledger.n_buckets, ledger.width
    cur = ledger.bucket
    idx = [(cur - b + 1 + k) % b for k in range(b)]
    starts = [(cur - b + 1 + k) * width for k in range(b)]
    span = np.full(b, width)
    span[-1] = max(1e-9, ledger.t - cur * width)
    owed = ledger.ring[idx, 0, :] / span[:, None]
    deliv = ledger.ring[idx, 1, :] / span[:, None]
    un = unalloc.ring[[(unalloc.bucket - b + 1 + k) % b for k in range(b)], 0, :] / span[:, None]
    return {
        "bucket_s": width,
        "starts": starts,
        "owed": {p: owed[:, i].round(4).tolist() for i, p in enumerate(paths)},
        "delivered": {p: deliv[:, i].round(4).tolist() for i, p in enumerate(paths)},
        "unallocated": {p: un[:, i].round(4).tolist() for i, p in enumerate(paths)},
    }


def explain(view: View, job_id: str) -> dict[str, Any] | None:
    """Why a pending job waits: its hold reason, its place in its group's queue and in the whole
    order, its group's debt against the groups whose jobs are ahead of it, its forecast start."""
    row = view.jobs.get(job_id)
    if row is None:
        return None
    out: dict[str, Any] = {"job": row.as_json(view), "as_of": iso(view.t), "as_of_t": view.t}
    if row.state != "pending":
        out["summary"] = (
            f"{job_id} is {row.state}"
            + (f" on {', '.join(row.on_nodes)} since {iso(row.last_start)}" if row.state == "running" else "")
            + _progress_text(row.progress, row.hung)
        )
        return out
    tree = view.sides
    assert tree is not None  # a view with pending jobs is an engine's
    place = place_in_line(view.order, job_id, view.jobs, tree)  # the queue /api/jobs lists
    same = place.same_group_ahead
    against = []
    for side in place.ahead:
        a, b = view.tree[side.mine], view.tree[side.side]
        against.append(
            {
                "group": b.path,
                "jobs_ahead": side.jobs,
                "gpus_ahead": side.gpus,
                "my_side": a.path,
                "my_side_debt_gpu_h": a.debt_s / H,
                "my_side_priority": a.priority,
                "their_debt_gpu_h": b.debt_s / H,
                "their_priority": b.priority,
                "why": _side_text(a, b),
            }
        )
    leaf = view.tree[row.leaf]
    forecast = view.forecasts.get(job_id)
    out.update(
        {
            "why_pending": row.why,
            "why_pending_text": HOLD_TEXT.get(row.why or "queued", HOLD_TEXT["queued"]),
            "position": place.position,
            "queue_length": place.queue_length,
            "group_position": place.group_position,
            "group_queue_length": place.group_queue_length,
            "same_group_ahead": same,
            "group": {
                "path": leaf.path,
                "debt_gpu_h": leaf.debt_s / H,
                "owed_gpu_h": leaf.owed_s / H,
                "delivered_gpu_h": leaf.delivered_s / H,
                "priority": leaf.priority,
                "owed_rate": leaf.owed_rate,
                "used_rate": leaf.used_rate,
            },
            "loses_to": against,
            "next_opportunity": iso(forecast) if forecast is not None else None,
            "next_opportunity_t": forecast,
            "forecast_at": iso(view.forecast_at),
            "forecast_note": "a lower bound if others arrive later: the engine run forward on the declared "
            "estimates with no new arrivals"
            if forecast is not None
            else "not forecast to start within the forecast's horizon (or not forecast yet)",
        }
    )
    out["summary"] = _summary(row, place, against, forecast)
    return out


def _side_text(a: NodeRow, b: NodeRow) -> str:
    pa, pb = a.priority, b.priority
    if pa is None or pb is None:
        return f"{b.path} ranks ahead of {a.path} at their level"
    return (
        f"{b.path} has received {(1 - pb) * 100:.0f}% of what it was owed, {a.path} "
        f"{(1 - pa) * 100:.0f}%"
        + (
            ": it is further behind, so it goes first"
            if pb > pa
            else "; it was ahead in the order when this job's turn came"
        )
    )


def _summary(row: JobRow, place: Place, against: list[dict[str, Any]], forecast: float | None) -> str:
    same = place.same_group_ahead
    parts = [f"{row.id} waits: {HOLD_TEXT.get(row.why or 'queued', HOLD_TEXT['queued'])}."]
    parts.append(
        f"It is #{place.position} in the queue and #{place.group_position} in {row.group}'s queue"
        + (f" ({same} of its group's jobs ahead)" if same else "")
        + "."
    )
    if against and against[0]["jobs_ahead"] > same:
        top = against[0]
        parts.append(f"Most jobs ahead of it come from {top['group']} ({top['jobs_ahead']}).")
    elif same:
        parts.append(f"Most jobs ahead of it are its own group's ({same}).")
    if forecast is not None:
        at = (iso(round(forecast / 60) * 60) or "").replace("T", " ").replace(":00Z", " UTC")
        parts.append(f"Forecast start: {at} (if no one else arrives).")
    return " ".join(parts)


def owners_of(pol: Policy) -> dict[str, tuple[str | None, str | None]]:
    """Per tree path: its owner and review date (the view's tree)."""
    out: dict[str, tuple[str | None, str | None]] = {}

    def walk(nodes: Any, prefix: str) -> None:
        for n in nodes:
            path = f"{prefix}/{n.name}" if prefix else n.name
            out[path] = (n.owner, n.review.isoformat() if n.review else None)
            walk(n.children, path)

    walk(pol.tree, "")
    return out


def quantiles(xs: Sequence[float]) -> dict[str, float | None]:
    """p50, p90, p99, max and n of sorted durations (the status's)."""
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "max": None, "n": 0}

    def q(p: float) -> float:
        return float(xs[min(len(xs) - 1, int(p * len(xs)))])

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": float(xs[-1]), "n": len(xs)}


def reader_order(engine: LiveEngine) -> tuple[tuple[str, ...], dict[str, str]]:
    """A reader's queue order and hold reasons: a pass on a copy of its engine (not acted on)."""
    if not engine.state.pending.jobs:
        return (), {}
    c = copy.deepcopy(engine)
    d = decide(c.state.snapshot(), c.state.strategy, explain=True)
    return tuple(d.order), dict(d.why_pending)
