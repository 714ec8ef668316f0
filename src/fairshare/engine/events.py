"""The engine's journal: every call that changed its state, as typed, JSON-serialisable records.

A driver that records the journal (the service stores it in its database before acting on it) can
rebuild an engine state equal to the running one by replaying it (`EngineState.rebuild`): the same
jobs, runs, ledger sums (flushed at the same instants, so equal to the last bit), timers, backoffs
and hold records, hence the same snapshot and the same next decisions.

Kinds, in the order a driver makes them within one instant:

    begin t          the clock moves to t; the engine's own timers due by then fire
    submit           a job request arrives (JobRequest)
    started          a run began: job, allocation ((node index, GPUs), ...), charge rate
    finished         a run ended by completing the job
    cancelled        a job was withdrawn: it leaves the queue, or its run ends
    preempted        a run ended by preemption: reason, by, lost GPU-seconds, total progress kept
    drain, undrain   nodes (indexes) stop / resume taking work; drain deadline
    set_nodes        the cluster's nodes now, all of them (Node as JSON; fairshare.engine.nodes)
    hung             a running job stopped making progress (reported by the driver)
    progress, checkpoint, resumed
                     what a running job reported of itself: job, step, t (checkpoint: and path)
                     (fairshare.engine.progress)
    poke             the driver asks for a pass at this instant
    settle           the instant's events are in: judge the runs whose protection ended
    snapshot         a pass read the state (the ledger is integrated up to now)
    applied          a pass's outcome: its holds (job, reason), reservation (job, nodes) and
                     whether it ran a backfill cycle (slurm-multifactor)
    advance t, flush the clock moves to t without firing timers, the ledger is integrated up to
                     it (a driver's last instant)
    reconfigure      a new policy applies from now (EngineSetup as JSON; fairshare.engine.reconfigure)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.model import JobRequest, Node
from ..core.placement import Alloc
from .setup import EngineSetup, node_json, node_of_json

Reservation = tuple[str, tuple[int, ...]] | None


@dataclass(frozen=True, slots=True)
class Event:
    """One journal record: `kind` names the engine call, `args` its arguments."""

    kind: str
    args: tuple[Any, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "args": [_plain(a) for a in self.args]}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Event:
        kind = str(data["kind"])
        args = list(data.get("args", ()))
        decode = _DECODE.get(kind)
        return Event(kind, tuple(decode(args) if decode else args))


def _plain(value: Any) -> Any:
    if isinstance(value, JobRequest):
        return dataclasses.asdict(value)
    if isinstance(value, EngineSetup):
        return value.as_json()
    if isinstance(value, Node):
        return node_json(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _request(args: list[Any]) -> tuple[Any, ...]:
    raw = dict(args[0])
    if raw.get("gpu_types") is not None:
        raw["gpu_types"] = tuple(raw["gpu_types"])
    return (JobRequest(**raw),)


def _alloc(value: Any) -> Alloc:
    return tuple((int(i), int(g)) for i, g in value)


def _started(args: list[Any]) -> tuple[Any, ...]:
    return (args[0], _alloc(args[1]), float(args[2]))


def _nodes(args: list[Any]) -> tuple[Any, ...]:
    return (tuple(int(i) for i in args[0]), *args[1:])


def _undrain(args: list[Any]) -> tuple[Any, ...]:
    # journals written before the fix hold the indexes as the arguments themselves
    return _nodes(args) if args and isinstance(args[0], list) else (tuple(int(i) for i in args),)


def _cluster(args: list[Any]) -> tuple[Any, ...]:
    return (tuple(node_of_json(n) for n in args[0]),)


def _applied(args: list[Any]) -> tuple[Any, ...]:
    holds = tuple((str(j), str(r)) for j, r in args[0])
    res = args[1]
    reservation: Reservation = None if res is None else (str(res[0]), tuple(int(i) for i in res[1]))
    return (holds, reservation, *(bool(b) for b in args[2:3]))  # whether it backfilled, when given


def _setup(args: list[Any]) -> tuple[Any, ...]:
    return (EngineSetup.from_json(args[0]),)


_DECODE = {
    "reconfigure": _setup,
    "submit": _request,
    "started": _started,
    "drain": _nodes,
    "undrain": _undrain,
    "set_nodes": _cluster,
    "applied": _applied,
}
