"""Accounting: `sacct -P` output (any column set holding the required ones), streamed.

Form: a header line of column names separated by `|` (`-P`; `-p` adds a trailing `|`), one row per
job record. Times ISO (in `--tz`) or epoch seconds (`SLURM_TIME_FORMAT=%s`). Rows whose JobID names a
step (`123.batch`, `123.0`, `123.extern`) are counted and skipped; with `-D` a requeued job has one
row per run. A row is kept as one compact `Record` (no per-row dict of all columns).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, TextIO

from ...errors import InputError
from ...slurm.parse import expand_hostlist, gpus_of_tres, parse_duration_text, parse_tres
from ._text import EMPTY, BadRows, at, time_parser

REQUIRED = ("JobID", "Account", "User", "Submit", "Start", "End", "State", "AllocTRES", "NNodes", "Timelimit")
OPTIONAL = ("ReqTRES", "Partition", "QOS", "Eligible", "NodeList", "Comment", "Elapsed")
#: The narrower --format the docs give (docs/own-cluster.md).
NARROW_FORMAT = (
    "JobID,Account,User,Partition,QOS,Submit,Eligible,Start,End,Elapsed,State,AllocTRES,ReqTRES,"
    "NNodes,NodeList,Timelimit"
)
#: Columns whose values are free text and may hold a '|' (sacct -P does not escape it).
FREE_TEXT = frozenset(
    {"comment", "admincomment", "systemcomment", "submitline", "jobname", "workdir", "constraints", "reason"}
)
#: Time limits that mean "the partition's MaxTime" / "none"; the estimate then comes from the config.
PARTITION_LIMIT = -1.0


class Record(NamedTuple):
    """One job record (a run of a job, or a job that never ran), times in epoch seconds."""

    line: int
    job_id: str
    state: str  # first word, upper case: COMPLETED, CANCELLED, REQUEUED, ...
    account: str
    user: str
    partition: str
    qos: str
    submit: float
    eligible: float | None
    start: float | None
    end: float | None
    started: bool  # it ran (a start and an allocation)
    gpus: int
    gpu_type: str  # from ReqTRES `gres/gpu:<type>`, else ""
    nodes: int
    cpus: float
    mem_gb: float
    limit: float | None  # seconds; None = none given; PARTITION_LIMIT = the partition's
    nodelist: str  # as printed (a hostlist expression), "" when absent


@dataclass
class SacctFile:
    """What reading one sacct file found besides its records."""

    path: str
    form: str = ""
    rows: int = 0
    steps: int = 0
    bad: int = 0
    latest: float = 0.0  # the latest time in the file (the span's end when none is given)


@lru_cache(maxsize=65536)
def _tres(text: str) -> tuple[int, str, float, float]:
    """(gpus, gpu type or "", cpus, mem GB) of a TRES string."""
    if text in EMPTY:
        return 0, "", 0.0, 0.0
    tres = parse_tres(text)
    types = sorted({k.split(":", 1)[1] for k in tres if k.startswith("gres/gpu:") and tres[k] > 0})
    return (
        gpus_of_tres(tres),
        types[0] if len(types) == 1 else "",
        tres.get("cpu", 0.0),
        tres.get("mem", 0.0) / 1024,
    )


@lru_cache(maxsize=4096)
def _limit(text: str) -> float | None:
    if text in ("Partition_Limit", "UNLIMITED", "INFINITE"):
        return PARTITION_LIMIT
    if text in EMPTY:
        return None
    secs = parse_duration_text(text)
    return None if secs is None else float(secs)


class _Columns(NamedTuple):
    header: tuple[str, ...]
    job_id: int
    account: int
    user: int
    submit: int
    start: int
    end: int
    state: int
    alloc: int
    nnodes: int
    limit: int
    req: int | None
    partition: int | None
    qos: int | None
    eligible: int | None
    nodelist: int | None
    free: tuple[int, ...]  # free-text columns (a '|' inside one splits the row)


def read_sacct(stream: TextIO, where: str, tz: dt.tzinfo, bad: BadRows, info: SacctFile) -> Iterator[Record]:
    """The job records of one `sacct -P` file, in file order (steps counted in `info.steps`)."""
    parse_time = time_parser(tz)
    cols: _Columns | None = None
    width = 0
    for n, raw in enumerate(stream, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if cols is None:
            cols = _header(line, where, n)
            width = len(cols.header)
            continue
        cells = line.split("|")
        if len(cells) == width + 1 and cells[-1] == "":  # `-p` ends rows with '|'
            cells.pop()
        if len(cells) > width and cols.free:  # a '|' inside a comment, job name or submit line
            cells = _rejoin(cells, width, cols)
        if len(cells) != width:
            bad.bad(at(n), f"has {len(cells)} fields where the header has {width}")
            info.bad += 1
            continue
        info.rows += 1
        job_id = cells[cols.job_id]
        if "." in job_id:
            info.steps += 1
            continue
        if not info.form:
            epoch = cells[cols.submit].isdigit()
            info.form = "sacct -P, " + ("epoch times" if epoch else "ISO times")
        try:
            rec = _record(n, cells, job_id, parse_time, cols)
        except _Bad as exc:
            bad.bad(at(n, exc.column + 1, cols.header[exc.column]), exc.message)
            info.bad += 1
            continue
        info.latest = max(info.latest, rec.submit, rec.start or 0.0, rec.end or 0.0)
        yield rec
    if cols is None:
        raise InputError(where, "", "is empty: expected `sacct -P` output with its header line")
    if not info.form:
        info.form = "sacct -P"


class _Bad(Exception):
    def __init__(self, column: int, message: str) -> None:
        self.column = column
        self.message = message


def _header(line: str, where: str, n: int) -> _Columns:
    if "|" not in line:
        raise InputError(
            where,
            at(n),
            "is not `sacct -P` output (no '|' in the header line): run sacct with -P (or -p), "
            "without -n, so the first line names the columns",
        )
    names = line.split("|")
    if names and names[-1] == "":
        names.pop()
    pos: dict[str, int] = {}
    for i, name in enumerate(names):
        pos.setdefault(name.strip().lower(), i)
    missing = [c for c in REQUIRED if c.lower() not in pos]
    if missing:
        if names[0].strip().replace("_", "").replace("+", "").replace(".", "").isdigit():
            raise InputError(where, at(n), "has no header line (sacct was run with -n): run it without -n")
        raise InputError(
            where,
            at(n),
            f"lacks the column(s) {', '.join(missing)}: sacct --format must hold at least "
            f"{','.join(REQUIRED)}",
        )
    free = tuple(sorted(i for name, i in pos.items() if name in FREE_TEXT))
    r = {c: pos[c.lower()] for c in REQUIRED}
    return _Columns(
        header=tuple(names),
        job_id=r["JobID"],
        account=r["Account"],
        user=r["User"],
        submit=r["Submit"],
        start=r["Start"],
        end=r["End"],
        state=r["State"],
        alloc=r["AllocTRES"],
        nnodes=r["NNodes"],
        limit=r["Timelimit"],
        req=pos.get("reqtres"),
        partition=pos.get("partition"),
        qos=pos.get("qos"),
        eligible=pos.get("eligible"),
        nodelist=pos.get("nodelist"),
        free=free,
    )


def _rejoin(cells: list[str], width: int, cols: _Columns) -> list[str]:
    """Put back the '|' a free-text value held: the first free-text column where merging the extra
    fields leaves the columns after it where they belong (Submit a time, State a word)."""
    extra = len(cells) - width
    for c in cols.free:
        merged = [*cells[:c], "|".join(cells[c : c + extra + 1]), *cells[c + extra + 1 :]]
        sub, state = merged[cols.submit], merged[cols.state].split(" ", 1)[0]
        if sub[:1].isdigit() and state.replace("_", "").isalpha() and merged[cols.nnodes].isdigit():
            return merged
    return cells


def _record(
    n: int, cells: list[str], job_id: str, parse_time: Callable[[str], float | None], c: _Columns
) -> Record:
    if not job_id[:1].isdigit():
        raise _Bad(c.job_id, f"{job_id!r} is not a Slurm job id")
    raw_state = cells[c.state]
    state = raw_state.split(" ", 1)[0].upper()
    if not state.replace("_", "").isalpha():
        raise _Bad(c.state, f"{raw_state!r} is not a job state")
    i = c.submit
    try:
        submit = parse_time(cells[i])
        if submit is None:
            raise _Bad(i, f"{cells[i]!r}: every job record has a submit time")
        i = c.start
        start = parse_time(cells[i])
        i = c.end
        end = parse_time(cells[i])
        eligible = None
        if c.eligible is not None:
            i = c.eligible
            eligible = submit if cells[i] == cells[c.submit] else parse_time(cells[i])
    except ValueError as exc:
        raise _Bad(i, str(exc)) from None
    if start is not None and end is not None and end < start:
        raise _Bad(c.end, f"the end {cells[c.end]} is before the start {cells[c.start]}")
    alloc = cells[c.alloc]
    try:
        gpus, _, cpus, mem_gb = _tres(alloc)
    except ValueError as exc:
        raise _Bad(c.alloc, f"{alloc!r} is not a TRES list ({exc})") from None
    gpu_type = ""
    if c.req is not None:
        try:
            gpu_type = _tres(cells[c.req])[1]
        except ValueError as exc:
            raise _Bad(c.req, f"{cells[c.req]!r} is not a TRES list ({exc})") from None
    nn = cells[c.nnodes]
    if not nn.isdigit():
        raise _Bad(c.nnodes, f"{nn!r} is not a node count")
    try:
        limit = _limit(cells[c.limit])
    except ValueError:
        raise _Bad(
            c.limit, f"{cells[c.limit]!r} is not a time limit (2-00:00:00, 1-00:00, 30, UNLIMITED)"
        ) from None
    nodelist = ""
    if c.nodelist is not None and cells[c.nodelist] not in EMPTY:
        nodelist = cells[c.nodelist]
        try:
            _hosts(nodelist)
        except ValueError as exc:
            raise _Bad(c.nodelist, str(exc)) from None
    started = start is not None and alloc not in EMPTY and (c.nodelist is None or nodelist != "")
    return Record(
        n,
        job_id,
        state,
        cells[c.account].lower(),
        cells[c.user],
        cells[c.partition] if c.partition is not None else "",
        cells[c.qos] if c.qos is not None else "",
        submit,
        eligible,
        start,
        end,
        started,
        gpus,
        gpu_type,
        int(nn),
        cpus,
        mem_gb,
        limit,
        nodelist,
    )


@lru_cache(maxsize=65536)
def _hosts(nodelist: str) -> tuple[str, ...]:
    return expand_hostlist(nodelist)


def expand_nodes(nodelist: str) -> tuple[str, ...]:
    """The node names of a NodeList value ("" -> none)."""
    return () if nodelist in EMPTY else _hosts(nodelist)
