"""The live loop's endpoints: /api/tree, /api/usage, /api/status, /api/jobs (list, get, submit,
cancel, explain) and /metrics. Reads answer from the loop's published view (memory, no database
but for a job's decisions and runs); a view's answers are serialized once and reused."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence, Sized
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field, field_validator
from starlette.concurrency import run_in_threadpool

from ...errors import InputError
from ...inputs import limits
from ..loop.live_service import LiveService
from ..loop.views import View, explain
from ..service_errors import NotFound, Unavailable
from ..storage import audit, bounds, journal
from ..timefmt import from_iso, iso
from .deps import Caller, FastCaller, Path, StoreDep, Text
from .live_models import ExplainOut, JobsOut, TreeOut
from .models import Request as StrictRequest

router = APIRouter(tags=["live"])


class JSON(Response):
    media_type = "application/json"


def _live(request: Request) -> LiveService:
    live: LiveService | None = getattr(request.app.state, "live", None)
    if live is None:
        raise Unavailable("no scheduler loop runs in this process (start it with fairshare serve)")
    return live


class _Cache:
    """Serialized answers of the current view (dropped when a new view is published)."""

    def __init__(self) -> None:
        self.version = -1
        self.items: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def get(self, view: View, key: str, make: Callable[[], object]) -> bytes:
        with self.lock:
            if view.version != self.version:
                self.version, self.items = view.version, {}
            hit = self.items.get(key)
        if hit is None:
            hit = orjson.dumps(make())
            with self.lock:
                if view.version == self.version and len(self.items) < 4096:
                    self.items[key] = hit
        return hit


def _cache(request: Request) -> _Cache:
    cache: _Cache | None = getattr(request.app.state, "view_cache", None)
    if cache is None:
        cache = request.app.state.view_cache = _Cache()
    return cache


def _head(v: View) -> dict[str, Any]:
    return {
        "as_of": iso(v.now),
        "as_of_t": v.now,
        "engine_t": v.t,
        "view": v.version,
        "journal_seq": v.status.get("journal_seq"),
        "role": v.role,
        "policy_sha256": v.policy_sha,
        "window_h": v.window / 3600.0,
    }


@router.get(
    "/api/tree",
    responses={200: {"model": TreeOut}},
    summary="The budget tree: shares, owed, delivered, debt, unallocated per node",
)
async def tree(request: Request, _: FastCaller) -> JSON:
    live = _live(request)
    v = live.view

    def make() -> dict[str, Any]:
        return {
            **_head(v),
            "capacity_gpus": v.capacity,
            "gpus": v.gpus_total,
            "gpus_busy": v.gpus_busy,
            "strategy": v.strategy,
            "nodes": [r.as_json() for r in v.tree],
        }

    return JSON(_cache(request).get(v, "tree", make))


@router.get("/api/usage", summary="Owed and delivered rate per tree node over the window, by bucket")
async def usage(request: Request, _: FastCaller, node: Annotated[Path | None, Query()] = None) -> JSON:
    v = _live(request).view
    if node is not None and node not in v.index:
        raise NotFound(f"no node {node!r} in the tree")

    def make() -> dict[str, Any]:
        s = v.series
        if not s:
            return {**_head(v), "series": None}
        nodes = [node] if node is not None else [r.path for r in v.tree]
        return {
            **_head(v),
            "bucket_s": s["bucket_s"],
            "starts": s["starts"],
            "nodes": {
                p: {"owed": s["owed"][p], "delivered": s["delivered"][p], "unallocated": s["unallocated"][p]}
                for p in nodes
            },
        }

    return JSON(_cache(request).get(v, f"usage:{node}", make))


@router.get("/api/status", summary="The loop: role, clock, speed, pass durations, exceptions in force")
async def status(
    request: Request,
    _: FastCaller,
    log: Annotated[
        bool, Query(description="Add the recent passes and cycles: [unix time, seconds(, lag)]")
    ] = False,
) -> JSON:
    live = _live(request)
    v = live.view
    body = {
        **_head(v),
        "now": iso(live.loop.clock()),
        "now_t": live.loop.clock(),
        "speed": v.speed,
        "backend": v.backend,
        "strategy": v.strategy,
        "capacity_gpus": v.capacity,
        "gpus": v.gpus_total,
        "gpus_busy": v.gpus_busy,
        "pending_jobs": len(v.order),
        "running_jobs": sum(1 for r in v.jobs.values() if r.state == "running"),
        "forecast_at": iso(v.forecast_at),
        "exceptions_in_force": [{**e, "expires": iso(e.get("expires_t"))} for e in v.exceptions],
        "loop": v.status,
        "recovery": v.recovery,  # per class, from resumed reports (docs/progress.md)
    }
    if log:
        body["passes"] = list(live.loop.pass_log)
        body["cycles"] = list(live.loop.cycle_log)
    return JSON(orjson.dumps(body))


@router.get(
    "/api/jobs",
    responses={200: {"model": JobsOut}},
    summary="Jobs: the queue in fair-share order, running, recently ended",
)
async def jobs(
    request: Request,
    _: FastCaller,
    state: Annotated[Literal["pending", "running", "ended", "active", "all"], Query()] = "active",
    group: Annotated[Path | None, Query(description="A tree node: its jobs and those under it")] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_JOBS_PAGE)] = 1000,
) -> JSON:
    v = _live(request).view
    if group is not None and group not in v.index:
        raise NotFound(f"no node {group!r} in the tree")

    def make() -> dict[str, Any]:
        ids: list[str] = []
        if state in ("pending", "active", "all"):
            ids += list(v.order) + [
                j for j, r in v.jobs.items() if r.state == "pending" and r.position is None
            ]
        if state in ("running", "active", "all"):
            ids += sorted(
                (j for j, r in v.jobs.items() if r.state == "running"),
                key=lambda j: v.jobs[j].last_start or 0,
            )
        if state in ("ended", "all"):
            ids += list(reversed(v.done))
        rows = [v.jobs[j] for j in ids if j in v.jobs]
        if group is not None:
            rows = [r for r in rows if r.group == group or r.group.startswith(group + "/")]
        return {
            **_head(v),
            "total": len(rows),
            "jobs": [r.as_json(v) for r in rows[:limit]],
        }

    return JSON(_cache(request).get(v, f"jobs:{state}:{group}:{limit}", make))


@router.get("/api/jobs/{job_id}", summary="One job: its request, state, runs and decisions")
def job(request: Request, store: StoreDep, _: Caller, job_id: Text) -> JSON:
    v = _live(request).view
    row = v.jobs.get(job_id)
    with store.read() as tx:
        records = audit.query(tx, job=job_id, limit=200, newest_first=True)
        runs = [
            {"from": iso(iv.t_from), "to": iso(iv.t_to), "charge_rate": iv.charge_rate, "leaf": iv.leaf}
            for iv in journal.usage_of(tx, job_id)
        ]
    if row is None and not records:
        raise NotFound(f"no job {job_id!r} (finished jobs are kept in views for a day; decisions for ever)")
    if row is None and _pruned(request, job_id, records, runs):
        raise NotFound(_pruned_text(job_id))
    return JSON(
        orjson.dumps(
            {
                **_head(v),
                "job": row.as_json(v) if row is not None else {"id": job_id, "state": "unknown"},
                "runs": runs,
                "decisions": [r.as_decision() for r in reversed(records)],
            }
        )
    )


@router.get(
    "/api/jobs/{job_id}/explain",
    responses={200: {"model": ExplainOut}},
    summary="Why a job waits, its place in line, its forecast start",
)
async def explain_(request: Request, _: FastCaller, job_id: Text) -> JSON:
    v = _live(request).view
    cache = _cache(request)
    body = cache.get(v, f"explain:{job_id}", lambda: explain(v, job_id))
    if body == b"null":
        if _pruned(request, job_id, None, None):
            raise NotFound(_pruned_text(job_id))
        raise NotFound(f"no pending or running job {job_id!r} in the current view")
    return JSON(body)


_SCHEDULED = frozenset({"start", "hold", "preempt", "reserve", "submit_rejected", "cancel"})


def _pruned(
    request: Request, job_id: str, records: Sequence[audit.StoredRecord] | None, runs: Sized | None
) -> bool:
    """The scheduler had the job (the audit or the usage knows it), and its engine's record is gone:
    it ended more than the retention period ago (LiveEngine.retention)."""
    e = _live(request).loop.engine
    if e is None or job_id in e.info or job_id in e.rejected:
        return False
    if records is None:
        store = _live(request).store
        with store.read() as tx:
            records = audit.query(tx, job=job_id, limit=200, newest_first=True)
            runs = journal.usage_of(tx, job_id)
    return bool(runs) or any(r.decision in _SCHEDULED for r in records)


def _pruned_text(job_id: str) -> str:
    return (
        f"job {job_id!r} ended more than the retention period (the policy's window) ago: its record is "
        f"no longer kept; its decisions are, at /api/decisions?job={job_id}"
    )


_DURATION_HELP = "seconds, or a duration such as 90m or 2h"


class JobSubmit(StrictRequest):
    job_id: Text | None = Field(default=None, max_length=128, description="Optional; generated when absent.")
    group: Path = Field(description="The leaf of the budget tree it is charged to.")
    job_class: Text = Field(alias="class", max_length=200, description="A job class of the policy.")
    gpus: int = Field(description="GPUs (1 .. the limits' MAX_JOB_GPUS)")
    nodes: int | None = Field(default=None, description="Nodes it spans (1 .. the limits' MAX_NODES)")
    gpu_type: Text | None = Field(default=None, max_length=200, description="e.g. H100, or H100|A100")
    cpus: float | None = Field(default=None, gt=0)
    mem_gb: float | None = Field(default=None, gt=0)
    estimate: float | Text = Field(description=f"Declared run time ({_DURATION_HELP}).")
    work: float | Text | None = Field(
        default=None, description=f"Demo only: the real run time ({_DURATION_HELP})."
    )
    label: Literal["high", "medium", "low"] = "medium"
    deadline: Text | None = Field(
        default=None, max_length=64, description="A datetime, or a duration from now."
    )
    protected: float | Text | None = None
    resumable: bool | None = None
    checkpoint: float | Text | None = None
    user: Text | None = Field(default=None, max_length=200)

    @field_validator("cpus", "mem_gb")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


def _seconds(name: str, value: float | str | None) -> float | None:
    if value is None:
        return None
    s = bounds.duration("job", name, value)
    if name in ("estimate", "work") and s <= 0:
        raise InputError("job", name, "must be longer than 0")
    return s


def _spec(body: JobSubmit, now: float) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": body.group,
        "class": body.job_class,
        "gpus": bounds.within("job", "gpus", body.gpus, 1, limits.MAX_JOB_GPUS),
        "label": body.label,
    }
    ranges = {"nodes": limits.MAX_NODES, "cpus": limits.MAX_JOB_CPUS, "mem_gb": limits.MAX_JOB_MEM_GB}
    for key, hi in ranges.items():
        value = getattr(body, key)
        if value is not None:
            bounds.within("job", key, value, 1 if key == "nodes" else 0, hi)
    for key in ("nodes", "gpu_type", "cpus", "mem_gb", "resumable", "user"):
        value = getattr(body, key)
        if value is not None:
            spec[key] = value
    for key in ("estimate", "work", "protected", "checkpoint"):
        s = _seconds(key, getattr(body, key))
        if s is not None:
            spec[key] = s
    if body.deadline is not None:
        try:
            spec["deadline"] = bounds.instant("job", "deadline", from_iso(body.deadline))
        except ValueError:
            d = _seconds("deadline", body.deadline)
            assert d is not None
            spec["deadline"] = now + d
    return spec


@router.post(
    "/api/jobs",
    status_code=201,
    summary="Submit a job (demo cluster; a member of a node above its group, or admin)",
    description="On a real cluster users submit to it (sbatch); fairshare orders. The answer is the "
    "job as the loop sees it once ingested (state `submitted` if it has not yet).",
)
async def submit(request: Request, caller: FastCaller, body: JobSubmit) -> JSON:
    live = _live(request)
    spec = _spec(body, live.loop.clock())
    out = await run_in_threadpool(live.submit, caller, body.job_id, spec)
    return JSON(orjson.dumps(out), status_code=201)


@router.post(
    "/api/jobs/{job_id}/cancel", summary="Cancel a job (a member of a node above its group, or admin)"
)
async def cancel(request: Request, caller: FastCaller, job_id: Text) -> JSON:
    live = _live(request)
    out = await run_in_threadpool(live.cancel, caller, job_id)
    return JSON(orjson.dumps(out))


@router.delete("/api/jobs/{job_id}", summary="Cancel a job (as POST /api/jobs/{id}/cancel)")
async def delete(request: Request, caller: FastCaller, job_id: Text) -> JSON:
    return await cancel(request, caller, job_id)


@router.get("/metrics", summary="Prometheus metrics (a token of any role, unless serve --metrics-public)")
async def metrics(request: Request, store: StoreDep) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from .deps import fast_principal

    live = _live(request)
    if not getattr(request.app.state, "metrics_public", False):
        from fastapi.security import HTTPAuthorizationCredentials

        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        creds = (
            HTTPAuthorizationCredentials(scheme=scheme, credentials=token)
            if scheme.lower() == "bearer" and token
            else None
        )
        await fast_principal(request, store, creds)
    registry = request.app.state.metrics_registry
    del live
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
