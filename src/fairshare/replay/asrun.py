"""`as-run`: a site's recorded history written as a replay output folder, measured by the same
metrics code as every replayed strategy (docs/own-cluster.md#fidelity).

The driver is the simulator with its scheduler replaced by the record: the jobs are submitted as
in every replay, and each recorded run starts and stops at its recorded instants on its recorded
nodes (history.csv's `nodes`), or, when the file gives none, on nodes chosen by the replays' own
placement (best fit, deterministic) among those free at that instant, so the placement is
consistent with the recorded concurrency. The engine keeps the ledger (owed by water-filling over
the recorded demand, delivered = what really ran) with the same policy as the replays.

Slurm's semantics, not the policy's execution contracts, govern what was recorded, so the as-run
jobs are submitted with them: no protected window, no startup or restore overhead (a recorded run
time includes them), not resumable (a requeued Slurm job runs again from its start). A run that
did not end its job (end_reason requeued, preempted, node_fail) is written as a `preempt` event
(reason `fair_share`, `by` null, the recorded reason in the extra field `recorded`) losing the
whole run; the run that ended the job is a `finish` at start + work (whatever ended it: finished,
failed, timeout, cancelled, or still running at the end of the span).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ..core.strategies import get_strategy
from ..errors import InputError
from ..inputs.workload import Job
from .asrun_place import plan_nodes
from .history import History, Segment
from .loaded import Inputs
from .results import ReplayOutput
from .sim import Finish, Rank, SimEvent, Simulator

AS_RUN = "as-run"


class RecordedStart(NamedTuple):
    seg: Segment
    k: int  # its position in the history


class RecordedStop(NamedTuple):
    seg: Segment


def as_run_job(job: Job) -> Job:
    """The job under Slurm's semantics (module docstring)."""
    r = dataclasses.replace(
        job.request, protected=0.0, resumable=False, checkpoint=0.0, restore=0.0, startup=0.0
    )
    return dataclasses.replace(job, request=r, stall_after=None)


class AsRunSimulator(Simulator):
    def __init__(self, inputs: Inputs, history: History) -> None:
        strategy = dataclasses.replace(get_strategy("fifo"), name=AS_RUN)
        super().__init__(
            inputs.policy,
            inputs.tree,
            inputs.cluster,
            [as_run_job(j) for j in inputs.jobs],
            strategy,
            scenario=inputs.name,
            where=inputs.policy_where,
        )
        self.history = history
        self.plan = plan_nodes(history, {j.id: j for j in self.jobs}, inputs.cluster)
        # at one instant (equal ranks keep push order): stops before starts (FORMATS: preemptions
        # before starts), and runs on recorded nodes before runs to place, which take what is left
        for seg in history.segments:
            if not seg.last:
                self.push(seg.end, Rank.LATER, RecordedStop(seg))  # type: ignore[arg-type]
        for k, seg in enumerate(history.segments):
            self.push(seg.start, Rank.LATER, RecordedStart(seg, k))  # type: ignore[arg-type]

    def _handle(self, ev: SimEvent) -> bool:
        if isinstance(ev, RecordedStart):
            self._recorded_start(ev.seg, ev.k)
        elif isinstance(ev, RecordedStop):
            self._recorded_stop(ev.seg)
        else:
            return super()._handle(ev)
        return True

    def _pass(self) -> None:
        """No scheduler: the record decides."""

    def _recorded_start(self, seg: Segment, k: int) -> None:
        t = self.engine.t
        tr = self.truth[seg.job]
        req = tr.job.request
        index = self.engine.fleet.index
        chosen = seg.nodes if seg.nodes is not None else self.plan[k]
        for i in chosen:
            if not index.available[i]:
                raise InputError(
                    self.history.where,
                    f"line {seg.line}",
                    f"job {seg.job} starts at {t:g} on {self.cluster.nodes[i].name}, drained then",
                )
            if index.free[i] < req.per_node:
                raise InputError(
                    self.history.where,
                    f"line {seg.line}",
                    f"job {seg.job} starts at {t:g} on {self.cluster.nodes[i].name}, which has "
                    f"{index.free[i]} GPUs free then (the recorded runs overlap beyond its GPUs)",
                )
        alloc = tuple((i, req.per_node) for i in chosen)
        charge = req.charge_on(self.cluster.nodes[alloc[0][0]], self.setup.gpu_rates)
        tr.starts += 1
        tr.run += 1
        tr.t0, tr.overhead, tr.stall_at = t, 0.0, None
        self.engine.started(seg.job, alloc, charge)
        if seg.last:
            self.push(t + tr.job.work, Rank.FINISH, Finish(seg.job, tr.run))
        self.metrics.job_started(seg.job, t, req.gpus, 0.0)
        nodes = self.cluster.nodes
        self.emit(
            {
                "t": t,
                "type": "start",
                "job": seg.job,
                "alloc": {nodes[i].name: g for i, g in alloc},
                "charge": charge,
            }
        )

    def _recorded_stop(self, seg: Segment) -> None:
        t = self.engine.t
        tr = self.truth[seg.job]
        lost = (t - tr.t0) * tr.job.request.gpus
        tr.run += 1
        self.engine.preempted(seg.job, "fair_share", None, lost, 0.0)
        self.metrics.job_preempted(seg.job, t, lost, None)
        self.emit(
            {
                "t": t,
                "type": "preempt",
                "job": seg.job,
                "reason": "fair_share",
                "by": None,
                "lost_gpu_s": lost,
                "recorded": seg.reason,
            }
        )


def run_as_run(inputs: Inputs) -> ReplayOutput:
    """The recorded history of `inputs` (a site folder's) as a replay output."""
    if inputs.history is None:
        raise InputError(
            "--policies",
            AS_RUN,
            "as-run is the recorded history: it needs a site folder with history.csv (--from DIR)",
        )
    return AsRunSimulator(inputs, inputs.history).run()
