"""A job's own progress reports (docs/progress.md): POST /api/jobs/{id}/progress|checkpoint|resumed.

Only the job's own token (made at its submission, role `job`) or an admin's may report, only for
that job, and only while it runs; the token reads nothing else (deps.principal refuses it).
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ...inputs.limits import MAX_COUNTER
from .deps import Path, Reporter, Text
from .models import Request as StrictRequest
from .routes_live import JSON, _live

router = APIRouter(tags=["progress"])


class StepReport(StrictRequest):
    step: int = Field(ge=0, le=MAX_COUNTER, description="The job's own counter: steps, samples, tokens.")


class CheckpointReport(StepReport):
    path: Path | None = Field(default=None, description="Where the checkpoint is (s3://..., a file).")


class ResumedReport(StrictRequest):
    from_step: int = Field(ge=0, le=MAX_COUNTER, description="The step of the checkpoint the run restored.")


async def _report(
    request: Request, caller: Reporter, job_id: str, kind: str, step: int, path: str | None
) -> JSON:
    live = _live(request)
    out = await run_in_threadpool(live.report, caller, job_id, kind, step, path)
    return JSON(orjson.dumps(out))


@router.post("/api/jobs/{job_id}/progress", summary="The job's counter reached `step` (its own token)")
async def progress(request: Request, caller: Reporter, job_id: Text, body: StepReport) -> JSON:
    return await _report(request, caller, job_id, "progress", body.step, None)


@router.post("/api/jobs/{job_id}/checkpoint", summary="A checkpoint of `step` was written (its own token)")
async def checkpoint(request: Request, caller: Reporter, job_id: Text, body: CheckpointReport) -> JSON:
    return await _report(request, caller, job_id, "checkpoint", body.step, body.path)


@router.post(
    "/api/jobs/{job_id}/resumed", summary="The run restored the checkpoint of `from_step` (its own token)"
)
async def resumed(request: Request, caller: Reporter, job_id: Text, body: ResumedReport) -> JSON:
    return await _report(request, caller, job_id, "resumed", body.from_step, None)
