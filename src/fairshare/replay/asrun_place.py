"""Nodes for the recorded runs a history gives none for (as-run; asrun.py), chosen knowing the whole
history: every run's interval is known in advance, so the runs are placed offline. Runs on
recorded nodes and drained spans are fixed first; then the runs by GPUs per node, the most first,
each size in start order (for runs that take whole nodes of one type, start order is the interval
colouring that succeeds whenever the recorded concurrency fits), each on the nodes busiest over
its interval that still hold it throughout (best fit over time), of the GPU type with the least
room left. Placing whole nodes before the small runs that would scatter over them is what lets
this succeed where an online first fit in start order paints itself into a corner.

It is a heuristic: with several GPU types, gangs and runs allowed any type, a placement
consistent with the recorded concurrency may exist that it does not find (or none may exist: a
gang needs whole nodes of one type). A run that finds no room is placed first in a new plan, up
to MAX_PLANS plans; then the error asks for the nodes column (sacct's NodeList), with which no
placement is needed. Deterministic: ties go to the lower GPU type and node index."""

from __future__ import annotations

import bisect
import math

from ..errors import InputError
from ..inputs.cluster import Cluster
from ..inputs.workload import Job
from .history import History, Segment


class _Node:
    """One node's runs placed so far, as (start, end, GPUs), sorted by start."""

    def __init__(self, gpus: int) -> None:
        self.gpus = gpus
        self.runs: list[tuple[float, float, int]] = []
        self.longest = 0.0  # the longest run placed: runs starting before s - longest end before s

    def add(self, a: float, b: float, g: int) -> None:
        bisect.insort(self.runs, (a, b, g))
        self.longest = max(self.longest, b - a)

    def peak(self, a: float, b: float) -> int:
        """The most GPUs in use at once over [a, b)."""
        lo = bisect.bisect_left(self.runs, (a - self.longest, -math.inf, 0))
        hi = bisect.bisect_left(self.runs, (b, -math.inf, 0))
        points = []
        for s, e, g in self.runs[lo:hi]:
            if e > a:
                points.append((max(s, a), 1, g))
                points.append((e, 0, -g))  # ends sort before starts at one instant
        used = peak = 0
        for _, _, g in sorted(points):
            used += g
            peak = max(peak, used)
        return peak


def run_end(seg: Segment, job: Job) -> float:
    """When the as-run engine frees the run's GPUs: a last run at start + work."""
    return max(seg.end, seg.start + job.work) if seg.last else seg.end


class _NoRoom(Exception):
    def __init__(self, k: int) -> None:
        self.k = k


#: plans tried, each placing first the runs that found no room in the plans before
MAX_PLANS = 8


def plan_nodes(history: History, jobs: dict[str, Job], cluster: Cluster) -> dict[int, tuple[int, ...]]:
    """Node indices for every segment without recorded nodes (by its position in the history).

    A run that finds no room is placed first in the next plan (with every run that found none
    before it), up to MAX_PLANS plans; then the error names its line."""
    first: dict[int, int] = {}  # segment -> when it first found no room (earlier: placed earlier)
    while True:
        try:
            return _plan(history, jobs, cluster, first)
        except _NoRoom as exc:
            if exc.k in first or len(first) + 1 >= MAX_PLANS:
                seg = history.segments[exc.k]
                req = jobs[seg.job].request
                raise InputError(
                    history.where,
                    f"line {seg.line}",
                    f"job {seg.job} runs from {seg.start:g} to {run_end(seg, jobs[seg.job]):g} ({req.gpus} "
                    f"GPUs on {req.nodes} node(s)), but the cluster's nodes cannot hold it beside the other "
                    "recorded runs then, in any placement tried: give the nodes column (NodeList) to "
                    "place the runs as they ran",
                ) from None
            first[exc.k] = len(first)


def _plan(
    history: History, jobs: dict[str, Job], cluster: Cluster, first: dict[int, int]
) -> dict[int, tuple[int, ...]]:
    nodes = [_Node(n.gpus) for n in cluster.nodes]
    types = sorted({n.gpu_type for n in cluster.nodes})
    for m in cluster.maintenance:
        for i in m.nodes:
            nodes[i].add(m.start, m.end if m.end is not None else math.inf, nodes[i].gpus)
    todo = []
    for k, seg in enumerate(history.segments):
        req = jobs[seg.job].request
        end = run_end(seg, jobs[seg.job])
        if seg.nodes is not None:
            for i in seg.nodes:
                nodes[i].add(seg.start, end, req.per_node)
        else:
            todo.append((first.get(k, len(first)), -req.per_node, seg.start, seg.job, k))
    todo.sort()
    plan: dict[int, tuple[int, ...]] = {}
    for _, _, a, jid, k in todo:
        seg = history.segments[k]
        req = jobs[jid].request
        b = run_end(seg, jobs[jid])
        best: tuple[tuple[int, int, int], list[int]] | None = None
        for t, ty in enumerate(types):
            if req.gpu_types is not None and ty not in req.gpu_types:
                continue
            fits = []
            for i, n in enumerate(cluster.nodes):
                if n.gpu_type != ty or n.gpus < req.per_node:
                    continue
                left = n.gpus - nodes[i].peak(a, b) - req.per_node
                if left >= 0:
                    fits.append((left, i))
            if len(fits) < req.nodes:
                continue
            fits.sort()
            chosen = fits[: req.nodes]
            key = (sum(x for x, _ in chosen), len(fits), t)  # then the type with the least room
            if best is None or key < best[0]:
                best = (key, sorted(i for _, i in chosen))
        if best is None:
            raise _NoRoom(k)
        for i in best[1]:
            nodes[i].add(a, b, req.per_node)
        plan[k] = tuple(best[1])
    return plan
