"""Nodes: `scontrol -o show node` (one node a line) or slurm.conf's NodeName lines (a hostlist per
line, `NodeName=DEFAULT` setting defaults). GPUs and their type from `Gres=gpu:TYPE:N`; an untyped
`gpu:N` is type `gpu`. CPUs from CPUTot/CPUs (else Boards x Sockets x Cores x Threads), memory from
RealMemory (MB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InputError, warn
from ...slurm.parse import expand_hostlist, parse_gres
from ._text import BadRows, at
from .settings import Settings, pairs, read_settings


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    gpu_type: str  # "" when the node has no GPU
    cpus: int
    mem_gb: float
    partitions: tuple[str, ...]
    line: int


_SCONTROL_NODE = re.compile(r"^NodeName=\S+ .*\b(CPUTot|CPUAlloc|RealMemory)=")


def read_nodes(text: str, where: str, bad: BadRows) -> tuple[str, list[Node]]:
    """(form, nodes sorted by name): `scontrol -o show node`, else a slurm.conf."""
    lines = [line for line in text.splitlines() if line.strip()]
    if (
        lines
        and all(_SCONTROL_NODE.match(line) or not line.startswith("NodeName=") for line in lines[:5])
        and any(_SCONTROL_NODE.match(line) for line in lines[:5])
    ):
        return "scontrol -o show node", _from_scontrol(text, where, bad)
    settings = read_settings(text, where)
    if not settings.node_lines:
        raise InputError(
            where,
            "",
            "holds no nodes: expected `scontrol -o show node` output or a slurm.conf with NodeName lines",
        )
    return "slurm.conf", _from_conf(settings, where, bad)


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=")


def _fields(line: str) -> dict[str, tuple[int, str]]:
    """`Key=value` pairs of an `scontrol -o` line (values may hold spaces, e.g. OS=Linux 6.1 #1),
    with the 1-based column of each value."""
    out: dict[str, tuple[int, str]] = {}
    marks = list(_KEY.finditer(line))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out.setdefault(m.group(1).lower(), (m.end() + 1, line[m.end() : end].strip()))
    return out


def _gpus(gres: str) -> tuple[int, str]:
    gs = [g for g in parse_gres(gres) if g.name == "gpu"]
    if not gs:
        return 0, ""
    by_type: dict[str, int] = {}
    for g in gs:
        by_type[g.type or "gpu"] = by_type.get(g.type or "gpu", 0) + g.count
    gpu_type = max(sorted(by_type), key=lambda t: by_type[t])
    return sum(by_type.values()), gpu_type


def _from_scontrol(text: str, where: str, bad: BadRows) -> list[Node]:
    out: list[Node] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        f = _fields(line)
        if "nodename" not in f:
            bad.bad(at(n), "is not an `scontrol -o show node` line (no NodeName=)")
            continue
        try:
            node = _node(f["nodename"][1], f, n)
        except _BadValue as exc:
            bad.bad(at(n, exc.column, exc.key), exc.message)
            continue
        out.append(node)
    return sorted(out, key=lambda x: x.name)


class _BadValue(Exception):
    def __init__(self, column: int, key: str, message: str) -> None:
        self.column, self.key, self.message = column, key, message


def _node(name: str, f: dict[str, tuple[int, str]], n: int) -> Node:
    def integer(*keys: str, default: int | None = None) -> int:
        for k in keys:
            if k in f:
                col, v = f[k]
                if not v.isdigit():
                    raise _BadValue(col, k, f"{v!r} is not a whole number")
                return int(v)
        if default is None:
            raise _BadValue(0, keys[0], f"the node {name} has no {keys[0]}")
        return default

    try:
        gpus, gpu_type = _gpus(f["gres"][1]) if "gres" in f else (0, "")
    except ValueError as exc:
        raise _BadValue(f["gres"][0], "Gres", str(exc)) from None
    cpus = integer("cputot", "cpus", default=0)
    if not cpus:
        cpus = (
            integer("boards", default=1)
            * integer("socketsperboard", "sockets", default=1)
            * integer("corespersocket", default=1)
            * integer("threadspercore", default=1)
        )
    mem_mb = integer("realmemory", default=1)
    parts = tuple(p for p in f.get("partitions", (0, ""))[1].split(",") if p)
    return Node(name, gpus, gpu_type, cpus, round(mem_mb / 1024, 3), parts, n)


def _from_conf(settings: Settings, where: str, bad: BadRows) -> list[Node]:
    defaults: dict[str, tuple[int, str]] = {}
    out: dict[str, Node] = {}
    for n, line in settings.node_lines:
        p = pairs(line)
        f = {k: (line.lower().find(f"{k}=") + len(k) + 2, v) for k, v in p.items()}
        if p["nodename"].upper() == "DEFAULT":
            defaults.update({k: v for k, v in f.items() if k != "nodename"})
            continue
        merged = {**defaults, **f}
        try:
            names = expand_hostlist(p["nodename"])
        except ValueError as exc:
            bad.bad(at(n, f["nodename"][0], "NodeName"), str(exc))
            continue
        try:
            proto = _node("", merged, n)
        except _BadValue as exc:
            bad.bad(at(n, exc.column, exc.key), exc.message)
            continue
        for name in names:
            if name in out:
                warn(where, at(n), f"node {name} is defined again (the last definition wins)")
            out[name] = Node(name, proto.gpus, proto.gpu_type, proto.cpus, proto.mem_gb, proto.partitions, n)
    parts = {name: [] for name in out}  # type: dict[str, list[str]]
    for pname, p in sorted(settings.partitions.items()):
        if pname == "default" or "nodes" not in p:
            continue
        members = out.keys() if p["nodes"].upper() == "ALL" else expand_hostlist(p["nodes"])
        for m in members:
            if m in parts:
                parts[m].append(pname)
    return [
        Node(x.name, x.gpus, x.gpu_type, x.cpus, x.mem_gb, tuple(parts[x.name]), x.line)
        for x in sorted(out.values(), key=lambda x: x.name)
    ]
