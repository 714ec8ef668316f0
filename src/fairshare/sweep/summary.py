"""The headline figures of one replay of a sweep, from its metrics.json and events.jsonl.

Every figure is either metrics.json's own (FORMATS.md defines it) or recomputed from the events with
the same definitions:
- wait p50/p90 over all jobs: first start − submit, a job never started counting with horizon −
  submit (FORMATS "wait"), linear-interpolated percentiles;
- requeue wait: from a preemption to the same job's next start (or the horizon), p50/p90/max;
- share spread: the largest minus the smallest `share_delivery` of the top-level groups (groups
  owed nothing are left out); lowest share: the smallest `min_window_share_delivery` among them;
- makespan: the last `finish` event's time (the horizon when a job never finished).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..errors import InputError
from ..replay.outputs import read_listed, verified_folder


@dataclass(frozen=True)
class Summary:
    variant: str
    policy: str
    jobs: int
    wait_p50_s: float
    wait_p90_s: float
    requeue_wait_p50_s: float | None
    requeue_wait_p90_s: float | None
    requeue_wait_max_s: float | None
    share_spread: float | None
    lowest_share: float | None
    lost_work_pct: float
    occupancy: float
    fragmented_gpu_h: float
    makespan_s: float
    preemptions: int
    sizes: dict[str, dict[str, float]]
    classes: dict[str, dict[str, float]]
    gates: dict[str, bool]

    @property
    def gates_pass(self) -> bool:
        return all(self.gates.values())

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["gates_pass"] = self.gates_pass
        return out


def _listed(folder: Path, marker: dict[str, Any], name: str) -> bytes:
    data = read_listed(folder, marker, name)
    if data is None:
        raise InputError(str(folder / "complete.json"), "files", f"lists no {name}")
    return data


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summarize(folder: Path, variant: str, policy: str) -> Summary:
    """The figures of the replay in `folder` (a compare's `<policy>/` folder), every file read the
    one its complete.json lists (size and SHA-256 checked; an InputError otherwise)."""
    marker = verified_folder(folder, reading=("metrics.json", "events.jsonl"))
    metrics = orjson.loads(_listed(folder, marker, "metrics.json"))
    submit: dict[str, float] = {}
    first: dict[str, float] = {}
    preempted_at: dict[str, float] = {}
    requeue: list[float] = []
    horizon = 0.0
    makespan = 0.0
    for line in _listed(folder, marker, "events.jsonl").splitlines():
        e = orjson.loads(line)
        kind, t = e["type"], float(e["t"])
        if kind == "submit":
            submit[e["job"]] = t
        elif kind == "start":
            job = e["job"]
            first.setdefault(job, t)
            if job in preempted_at:
                requeue.append(t - preempted_at.pop(job))
        elif kind == "preempt":
            preempted_at[e["job"]] = t
        elif kind == "finish":
            makespan = max(makespan, t)
        elif kind == "end":
            horizon = t
    requeue += [horizon - t for t in preempted_at.values()]
    waits = [first.get(j, horizon) - s for j, s in submit.items()]
    if len(first) < len(submit):
        makespan = horizon
    groups = metrics.get("groups", {})
    top = [g for path, g in groups.items() if "/" not in path]
    delivery = [g["share_delivery"] for g in top if g.get("share_delivery") is not None]
    windowed = [g["min_window_share_delivery"] for g in top if g.get("min_window_share_delivery") is not None]
    return Summary(
        variant=variant,
        policy=policy,
        jobs=len(submit),
        wait_p50_s=_pct(waits, 50),
        wait_p90_s=_pct(waits, 90),
        requeue_wait_p50_s=_pct(requeue, 50) if requeue else None,
        requeue_wait_p90_s=_pct(requeue, 90) if requeue else None,
        requeue_wait_max_s=max(requeue) if requeue else None,
        share_spread=(max(delivery) - min(delivery)) if delivery else None,
        lowest_share=min(windowed) if windowed else None,
        lost_work_pct=float(metrics.get("lost_work_pct", 0.0)),
        occupancy=float(metrics.get("occupancy", 0.0)),
        fragmented_gpu_h=float(metrics.get("fragmented_gpu_h", 0.0)),
        makespan_s=makespan,
        preemptions=int(metrics.get("preemptions", 0)),
        sizes={
            k: {"wait_p50_s": v["wait_p50_s"], "wait_p90_s": v["wait_p90_s"]}
            for k, v in metrics.get("sizes", {}).items()
        },
        classes={
            k: {"wait_p50_s": v["wait_p50_s"], "wait_p90_s": v["wait_p90_s"]}
            for k, v in metrics.get("classes", {}).items()
        },
        gates={k: bool(v["pass"]) for k, v in metrics.get("gates", {}).items()},
    )
