"""Parsers for what Slurm 22.05 prints: `squeue/sinfo/sacct --json` (openapi v0.0.38 data),
`sacctmgr -n -P`, `scontrol show config`, host lists, gres and TRES strings.

Pure functions: text in, model objects out. Output that does not have the expected shape raises
SlurmOutputError naming the command and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .model import Association, Gres, NodeAlloc, Qos, SlurmJob, SlurmNode, SlurmRun
from .slurm_errors import SlurmOutputError, SlurmUnavailable

T = TypeVar("T")
NO_VAL32 = 0xFFFFFFFE
INFINITE32 = 0xFFFFFFFF
NOTHING_FOUND = 9003  # ESLURM_... "Nothing found with query" (sacct, 22.05)


# ------------------------------------------------------------------------- small formats


def expand_hostlist(text: str) -> tuple[str, ...]:
    """`n[1-3,5],gpu-[01-02]` -> n1 n2 n3 n5 gpu-01 gpu-02 (zero padding kept)."""
    text = text.strip()
    if not text or text in ("None assigned", "(null)"):
        return ()
    out: list[str] = []
    for part in _split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", part)
        if m is None:
            out.append(part)
            continue
        prefix, ranges, rest = m.groups()
        suffixes = expand_hostlist(rest) if rest else ("",)
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"bad host range {r!r} in {text!r}")
            width = len(lo)
            for k in range(int(lo), int(hi or lo) + 1):
                out.extend(f"{prefix}{k:0{width}d}{s}" for s in suffixes)
    return tuple(out)


def _split_top(text: str) -> Iterator[str]:
    """Split on commas outside brackets and parentheses (`gpu:a100:3(IDX:0-1,7)`)."""
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def parse_gres(text: str | None) -> tuple[Gres, ...]:
    """`gpu:a100:8(S:0-1),gpu:8,shard:2` -> Gres entries (index/socket suffixes dropped)."""
    if not text or text in ("(null)", "N/A"):
        return ()
    out = []
    for raw in _split_top(text):
        item = re.sub(r"\(.*\)$", "", raw.strip())
        if not item:
            continue
        item = item.removeprefix("gres:").removeprefix("gres/")
        parts = re.split(r"[:=]", item)
        name = parts[0]
        if len(parts) == 1:
            out.append(Gres(name, None, 1))
        elif len(parts) == 2:
            if parts[1].isdigit():
                out.append(Gres(name, None, int(parts[1])))
            else:
                out.append(Gres(name, parts[1], 1))
        else:
            count = parts[-1]
            if not count.isdigit():
                raise ValueError(f"bad gres count in {raw!r}")
            out.append(Gres(name, ":".join(parts[1:-1]), int(count)))
    return tuple(out)


_MEM_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}


def parse_tres(text: str | None) -> dict[str, float]:
    """`cpu=2,mem=125G,node=2,billing=8,gres/gpu=8` -> {'cpu': 2, 'mem': 128000 (MB), ...}."""
    out: dict[str, float] = {}
    if not text:
        return out
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            continue
        unit = value[-1:].upper()
        if unit in _MEM_UNITS:
            out[key] = float(value[:-1]) * _MEM_UNITS[unit]
        else:
            out[key] = float(value)
    return out


def gpus_of_tres(tres: dict[str, float]) -> int:
    """GPUs in a TRES map: `gres/gpu`, else the sum of typed `gres/gpu:<type>` entries."""
    if "gres/gpu" in tres:
        return round(tres["gres/gpu"])
    return round(sum(v for k, v in tres.items() if k.startswith("gres/gpu:")))


def parse_duration_text(text: str) -> int | None:
    """Slurm's `[D-]HH:MM:SS`, `MM:SS` or minutes -> seconds; None for UNLIMITED/INFINITE/empty."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "(NULL)", "N/A"):
        return None
    text = text.removesuffix(" sec")
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        secs = parts[0] * 60 if days == 0 else parts[0] * 3600
    elif len(parts) == 2:
        secs = parts[0] * 60 + parts[1] if days == 0 else parts[0] * 3600 + parts[1] * 60
    else:
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return days * 86400 + secs


# ------------------------------------------------------------------------- JSON commands


def load_json(text: str, command: Sequence[str], key: str) -> list[dict[str, Any]]:
    """The list under `key` of a `--json` answer; errors reported inside the JSON raise.

    Slurm 22.05's squeue/sinfo exit 0 with an `errors` entry and an empty list when slurmctld
    does not answer: that must not read as an empty cluster.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmOutputError(command, f"printed invalid JSON ({exc.msg} at offset {exc.pos})") from None
    if not isinstance(data, dict):
        raise SlurmOutputError(command, "printed JSON that is not an object")
    # sacct reports an empty answer as an error ("Nothing found", 9003): that is no runs
    errors = [e for e in data.get("errors") or () if not _nothing_found(e)]
    if errors:
        detail = "; ".join(
            " ".join(str(e.get(k)) for k in ("source", "description", "error") if e.get(k))
            if isinstance(e, dict)
            else str(e)
            for e in errors
        )
        raise SlurmUnavailable(command, 0, detail, "reported errors in its JSON (is slurmctld up?)")
    items = data.get(key)
    if not isinstance(items, list):
        raise SlurmOutputError(command, f"printed JSON without a {key!r} list")
    return [i for i in items if isinstance(i, dict)]


def _nothing_found(e: object) -> bool:
    return isinstance(e, dict) and (
        e.get("error_number") == NOTHING_FOUND or e.get("description") == "Nothing found"
    )


def _field(command: Sequence[str], what: str, fn: Callable[[dict[str, Any]], T], item: dict[str, Any]) -> T:
    try:
        return fn(item)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SlurmOutputError(command, f"printed an unexpected {what}: {exc!r}") from None


def _int(v: Any, default: int = 0) -> int:
    if v is None or v == "":
        return default
    if isinstance(v, dict):  # newer openapi versions: {"set": true, "number": N}
        return _int(v.get("number"), default) if v.get("set", True) else default
    return int(v)


def _opt_time(v: Any) -> int | None:
    n = _int(v, 0)
    return None if n in (0, NO_VAL32, INFINITE32) else n


def parse_nodes(text: str, command: Sequence[str] = ("sinfo", "--json")) -> list[SlurmNode]:
    out = []
    for n in load_json(text, command, "nodes"):
        out.append(_field(command, f"node {n.get('name')!r}", _node, n))
    return sorted(out, key=lambda n: n.name)


def _node(n: dict[str, Any]) -> SlurmNode:
    used = sum(g.count for g in parse_gres(n.get("gres_used")) if g.name == "gpu")
    state = str(n.get("state") or "unknown").lower()
    return SlurmNode(
        name=str(n["name"]),
        state=state,
        flags=tuple(str(f).upper() for f in n.get("state_flags") or ()),
        cpus=_int(n.get("cpus")),
        alloc_cpus=_int(n.get("alloc_cpus")),
        memory_mb=_int(n.get("real_memory")),
        gres=parse_gres(n.get("gres")),
        gpus_used=used,
        partitions=tuple(n.get("partitions") or ()),
        reason=str(n.get("reason") or ""),
    )


def parse_jobs(text: str, command: Sequence[str] = ("squeue", "--json")) -> list[SlurmJob]:
    out = []
    for j in load_json(text, command, "jobs"):
        out.append(_field(command, f"job {j.get('job_id')!r}", _job, j))
    return sorted(out, key=lambda j: j.job_id)


def _requested_gpu_type(j: dict[str, Any]) -> str | None:
    for key in ("tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket"):
        for g in parse_gres(j.get(key)):
            if g.name == "gpu" and g.type:
                return g.type
    return None


def _allocations(j: dict[str, Any], gpus: int, cpus: int) -> tuple[NodeAlloc, ...]:
    res = j.get("job_resources") or {}
    nodes = [a for a in res.get("allocated_nodes") or () if isinstance(a, dict)]
    names = [str(a["nodename"]) for a in nodes] or list(expand_hostlist(str(j.get("nodes") or "")))
    if not names:
        return ()
    details = list(j.get("gres_detail") or ())
    per_gpu: list[tuple[int, str | None]] = []
    if len(details) == len(names):
        for d in details:
            gs = [g for g in parse_gres(str(d)) if g.name == "gpu"]
            per_gpu.append((sum(g.count for g in gs), gs[0].type if gs else None))
    else:  # no per-node detail: spread evenly (a gang has the same GPUs on every node)
        base, extra = divmod(gpus, len(names))
        per_gpu = [(base + (1 if i < extra else 0), None) for i in range(len(names))]
    per_cpu = []
    for i, a in enumerate(nodes):
        cores = sum(len(s.get("cores") or {}) for s in (a.get("sockets") or {}).values())
        per_cpu.append(cores or (cpus // len(names) + (1 if i < cpus % len(names) else 0)))
    if len(per_cpu) != len(names):
        per_cpu = [cpus // len(names) + (1 if i < cpus % len(names) else 0) for i in range(len(names))]
    return tuple(NodeAlloc(node, g, t, c) for node, (g, t), c in zip(names, per_gpu, per_cpu, strict=True))


def _job(j: dict[str, Any]) -> SlurmJob:
    state = str(j["job_state"]).upper()
    running = state in ("RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED")
    tres = parse_tres(
        j.get("tres_alloc_str") if running and j.get("tres_alloc_str") else j.get("tres_req_str")
    )
    gpus = gpus_of_tres(tres)
    cpus = _int(j.get("cpus"), round(tres.get("cpu", 0)))
    limit = j.get("time_limit")
    limit_min = None if limit is None else _int(limit, NO_VAL32)
    het = _int(j.get("het_job_id"))
    array = _int(j.get("array_job_id"))
    task = j.get("array_task_id")
    return SlurmJob(
        job_id=_int(j["job_id"]),
        name=str(j.get("name") or ""),
        user=str(j.get("user_name") or j.get("user_id") or ""),
        account=str(j.get("account") or ""),
        partition=str(j.get("partition") or ""),
        qos=str(j.get("qos") or ""),
        state=state,
        reason=str(j.get("state_reason") or "None"),
        priority=_int(j.get("priority")),
        submit_time=_int(j.get("submit_time")),
        start_time=_opt_time(j.get("start_time")) if running else None,
        time_limit_s=None if limit_min is None or limit_min in (NO_VAL32, INFINITE32) else limit_min * 60,
        comment=str(j.get("comment") or ""),
        nodes=_int(j.get("node_count"), 1) or 1,
        gpus=gpus,
        gpu_type=_requested_gpu_type(j),
        cpus=cpus,
        memory_mb=round(tres["mem"]) if "mem" in tres else None,
        alloc=_allocations(j, gpus, cpus) if running else (),
        restarts=_int(j.get("restart_cnt")),
        requeue=bool(j.get("requeue", True)),
        deadline=_opt_time(j.get("deadline")),
        array_job_id=array or None,
        array_task_id=None if task is None else _int(task),
        het_job_id=het or None,
    )


def parse_runs(text: str, command: Sequence[str] = ("sacct", "--json")) -> list[SlurmRun]:
    """Runs (records with a start) of `sacct -D --json`; pending records are skipped."""
    out = []
    for j in load_json(text, command, "jobs"):
        run = _field(command, f"job {j.get('job_id')!r}", _run, j)
        if run is not None:
            out.append(run)
    return sorted(out, key=lambda r: (r.job_id, r.start))


def _run(j: dict[str, Any]) -> SlurmRun | None:
    t = j.get("time") or {}
    start = _opt_time(t.get("start"))
    if start is None:
        return None
    state = j.get("state") or {}
    alloc: dict[str, float] = {}
    for item in (j.get("tres") or {}).get("allocated") or ():
        kind, name, count = item.get("type"), item.get("name"), item.get("count")
        if count is None:
            continue
        key = f"{kind}/{name}" if name else str(kind)
        alloc[key] = alloc.get(key, 0.0) + float(count)
    assoc = j.get("association") or {}
    comment = j.get("comment")
    if isinstance(comment, dict):  # 22.05: {"job": ..., "administrator": ..., "system": ...}
        comment = comment.get("job")
    limit = _int(t.get("limit"), NO_VAL32)
    return SlurmRun(
        job_id=_int(j["job_id"]),
        account=str(j.get("account") or assoc.get("account") or ""),
        user=str(j.get("user") or assoc.get("user") or ""),
        partition=str(j.get("partition") or ""),
        qos=str(j.get("qos") or ""),
        state=str(state.get("current") if isinstance(state, dict) else state).upper(),
        start=start,
        end=_opt_time(t.get("end")),
        nodes=expand_hostlist(str(j.get("nodes") or "")),
        gpus=gpus_of_tres(alloc),
        cpus=round(alloc.get("cpu", 0)),
        memory_mb=round(alloc["mem"]) if "mem" in alloc else None,
        submit=_opt_time(t.get("submission")),
        time_limit_s=None if limit in (NO_VAL32, INFINITE32) else limit * 60,
        comment=str(comment or ""),
    )


# ------------------------------------------------------------------------- text commands

ASSOC_FORMAT = "cluster,account,user,parentname,share,qos,defaultqos"
QOS_FORMAT = "name,priority,preempt,preemptmode,flags"


def _rows(text: str, width: int, command: Sequence[str]) -> Iterator[list[str]]:
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) == width + 1 and cells[-1] == "":  # some versions end rows with '|'
            cells = cells[:-1]
        if len(cells) != width:
            raise SlurmOutputError(
                command, f"printed a row with {len(cells)} fields, expected {width}: {line!r}"
            )
        yield cells


def _csv(text: str) -> tuple[str, ...]:
    return tuple(sorted(x for x in text.split(",") if x))


def parse_associations(text: str, command: Sequence[str] = ("sacctmgr",)) -> list[Association]:
    out = []
    for cluster, account, user, parent, share, qos, dqos in _rows(text, 7, command):
        out.append(
            Association(
                cluster=cluster,
                account=account,
                user=user or None,
                parent=parent or None,
                shares=share,
                qos=_csv(qos),
                default_qos=dqos or None,
            )
        )
    return out


def parse_qos(text: str, command: Sequence[str] = ("sacctmgr",)) -> list[Qos]:
    out = []
    for name, prio, preempt, mode, flags in _rows(text, 5, command):
        try:
            priority = int(prio or 0)
        except ValueError:
            raise SlurmOutputError(
                command, f"printed a QOS priority that is not a number: {prio!r}"
            ) from None
        out.append(Qos(name, priority, _csv(preempt), mode or "cluster", _csv(flags)))
    return sorted(out, key=lambda q: q.name)


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config` -> {key: value}; the first occurrence of a key wins."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if not sep:
            continue
        key = key.strip()
        if key and " " not in key and key not in out:
            out[key] = value.strip()
    return out
