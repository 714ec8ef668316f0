"""A site's recorded history (the site folder's history.csv, docs/own-cluster.md): one row per
run segment of a job, `job_id,start,end,end_reason,nodes`, read and checked against the workload
and the cluster it replays on. `as-run` (asrun.py) replays it."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..inputs._validation import read_text, reading_errors
from ..inputs.cluster import Cluster
from ..inputs.rows import header_columns
from ..inputs.workload import Job

COLUMNS = ("job_id", "start", "end", "end_reason", "nodes")
REQUIRED = ("job_id", "start", "end", "end_reason")
#: a segment that ends the job (the last of its job) / one after which the job ran again
ENDING = ("finished", "failed", "timeout", "cancelled", "running")
REQUEUING = ("requeued", "preempted", "node_fail")
REASONS = ENDING + REQUEUING
#: the recorded times are written with at most 3 decimals: a final run may differ from the
#: workload's `work` by this much
WORK_TOLERANCE_S = 0.01


@dataclass(frozen=True, slots=True)
class Segment:
    """One recorded run: `nodes` are cluster node indices (None: the file gives none, as-run places
    the run); `last` is whether it is the job's last run (it ends the job)."""

    line: int
    job: str
    start: float
    end: float
    reason: str
    nodes: tuple[int, ...] | None
    last: bool


@dataclass(frozen=True)
class History:
    where: str
    segments: tuple[Segment, ...]  # by (start, job id)
    dropped: int = 0  # runs of no time that did not end their job (left out: nothing ran)

    def first_starts(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.segments:
            out.setdefault(s.job, s.start)
        return out


def _number(where: str, line: int, col: int, key: str, text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise InputError(
            where, f"line {line}, column {col} ({key})", f"expected seconds, got {text!r}"
        ) from None
    if not math.isfinite(x) or x < 0:
        raise InputError(where, f"line {line}, column {col} ({key})", f"expected seconds >= 0, got {text!r}")
    return x


def load_history(path: Path, jobs: list[Job], cluster: Cluster) -> History:
    """history.csv checked against the workload's jobs and the cluster's nodes; an InputError
    naming the line and column of the first problem."""
    where = str(path)
    text = read_text(path)
    by_id = {j.id: j for j in jobs}
    node_of = {n.name: i for i, n in enumerate(cluster.nodes)}
    rows: list[tuple[int, str, float, float, str, tuple[int, ...] | None]] = []
    with reading_errors(where):
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InputError(where, "line 1", "empty file: expected a header row") from None
        cols = header_columns(where, header, COLUMNS, REQUIRED)
        for cells in reader:
            line = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise InputError(where, f"line {line}", f"expected {len(header)} cells, got {len(cells)}")
            cell = {k: cells[c - 1].strip() for k, c in cols.items()}

            def at(key: str, line: int = line) -> str:
                return f"line {line}, column {cols[key]} ({key})"

            jid = cell["job_id"]
            job = by_id.get(jid)
            if job is None:
                raise InputError(where, at("job_id"), f"job {jid!r} is not in the workload")
            start = _number(where, line, cols["start"], "start", cell["start"])
            end = _number(where, line, cols["end"], "end", cell["end"])
            if end < start:
                raise InputError(where, at("end"), f"the run ends ({end:g}) before it starts ({start:g})")
            if start < job.submit - 1e-3:
                raise InputError(
                    where, at("start"), f"job {jid} starts at {start:g}, before its submit ({job.submit:g})"
                )
            start = max(start, job.submit)  # within the 3 decimals the times are written with
            reason = cell["end_reason"]
            if reason not in REASONS:
                raise InputError(
                    where, at("end_reason"), f"unknown end_reason {reason!r} (known: {', '.join(REASONS)})"
                )
            nodes: tuple[int, ...] | None = None
            names = cell.get("nodes", "")
            if names:
                idx = []
                for name in names.split("|"):
                    found = node_of.get(name.strip())
                    if found is None:
                        raise InputError(where, at("nodes"), f"no node {name.strip()!r} in the cluster")
                    idx.append(found)
                req = job.request
                if len(set(idx)) != req.nodes:
                    raise InputError(
                        where,
                        at("nodes"),
                        f"job {jid} is a gang of {req.nodes} node(s), the row names {len(set(idx))}",
                    )
                types = {cluster.nodes[i].gpu_type for i in idx}
                if len(types) > 1 or (req.gpu_types is not None and not types <= set(req.gpu_types)):
                    raise InputError(
                        where,
                        at("nodes"),
                        f"job {jid} may run on {'|'.join(req.gpu_types or ('one GPU type',))}, "
                        f"the row's nodes have {', '.join(sorted(types))}",
                    )
                if any(cluster.nodes[i].gpus < req.per_node for i in idx):
                    raise InputError(where, at("nodes"), f"job {jid} needs {req.per_node} GPUs on each node")
                nodes = tuple(sorted(set(idx)))
            rows.append((line, jid, start, end, reason, nodes))
    rows.sort(key=lambda r: (r[2], r[1], r[0]))
    last_of: dict[str, int] = {}
    prev_end: dict[str, tuple[float, int]] = {}
    for k, (line, jid, start, end, _, _) in enumerate(rows):
        before = prev_end.get(jid)
        if before is not None and start < before[0] - 1e-6:
            raise InputError(
                where, f"line {line}", f"job {jid}'s run starts before its run of line {before[1]} ended"
            )
        prev_end[jid] = (end, line)
        last_of[jid] = k
    segments = []
    dropped = 0
    for k, (line, jid, start, end, reason, nodes) in enumerate(rows):
        last = last_of[jid] == k
        if not last and end <= start:
            dropped += 1  # a run of no time that did not end its job: nothing ran
            continue
        if not last and reason in ("finished", "running"):
            raise InputError(where, f"line {line}", f"job {jid}'s run ends {reason}, yet a later run follows")
        if last:
            work = by_id[jid].work
            if abs((end - start) - work) > WORK_TOLERANCE_S:
                raise InputError(
                    where,
                    f"line {line}",
                    f"job {jid}'s last run lasts {end - start:g} s, but the workload's work is {work:g} s "
                    "(work is the run time of the run that ended the job)",
                )
        segments.append(Segment(line, jid, start, end, reason, nodes, last))
    return History(where, tuple(segments), dropped)
