"""The shapes of the live answers, for /openapi.json (the routes answer prebuilt JSON bytes, cached
per view, so these document them: `responses={200: {"model": ...}}`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Head(BaseModel):
    model_config = ConfigDict(extra="allow")
    as_of: str | None
    as_of_t: float
    engine_t: float
    view: int
    journal_seq: int | None
    role: str
    policy_sha256: str
    window_h: float


class TreeNode(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str
    name: str
    depth: int
    parent: str | None
    leaf: bool
    share: float
    static_fraction: float
    effective_share: float
    owed_rate: float
    used_rate: float
    owed_gpu_h: float
    delivered_gpu_h: float
    debt_gpu_h: float
    unallocated_gpu_h: float
    share_delivery: float | None
    priority: float | None
    pending_jobs: int
    running_jobs: int
    pending_gpus: int
    running_gpus: int
    owner: str | None
    review: str | None


class TreeOut(Head):
    capacity_gpus: float
    gpus: int
    gpus_busy: int
    strategy: str
    nodes: list[TreeNode]


class JobOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    group: str
    job_class: str | None = None
    user: str | None
    gpus: int
    nodes: int
    gpu_types: list[str] | None
    label: str
    estimate_s: float
    state: str
    submitted: str | None
    waited_s: float | None
    runs: int
    preemptions: int
    position: int | None
    group_position: int | None
    why_pending: str | None
    why_pending_text: str | None
    next_opportunity: str | None


class JobsOut(Head):
    total: int
    jobs: list[JobOut]


class GroupAhead(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: str
    jobs_ahead: int
    gpus_ahead: int
    my_side: str
    why: str


class ExplainOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    job: dict[str, Any]
    as_of: str | None
    summary: str
    why_pending: str | None = None
    position: int | None = None
    queue_length: int | None = None
    group_position: int | None = None
    group_queue_length: int | None = None
    same_group_ahead: int | None = None
    loses_to: list[GroupAhead] | None = None
    next_opportunity: str | None = None
