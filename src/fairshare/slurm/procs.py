"""Processes the dev cluster starts: pid files, liveness, stopping by pid, listening addresses.

Only processes recorded in our pid files (checked against their executable and start time, so a
reused pid is never signalled) and their own descendants are ever stopped. Linux /proc only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Recorded:
    name: str
    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: tells a reused pid apart
    exe: str  # the executable's base name we expect


def start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def alive(pid: int) -> bool:
    """Running and not a zombie (a stopped daemon whose parent has not reaped it counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("State:"):
            return "Z" not in line.split()[1] and "X" not in line.split()[1]
    return False


def exe_name(pid: int) -> str | None:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def record(pids_dir: Path, name: str, pid: int, exe: str) -> Recorded:
    ticks = start_ticks(pid) or 0
    pids_dir.mkdir(parents=True, exist_ok=True)
    (pids_dir / f"{name}.pid").write_text(f"{pid} {ticks} {exe}\n")
    return Recorded(name, pid, ticks, exe)


def read_records(pids_dir: Path) -> list[Recorded]:
    out = []
    for f in sorted(pids_dir.glob("*.pid")) if pids_dir.is_dir() else ():
        parts = f.read_text().split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            out.append(Recorded(f.stem, int(parts[0]), int(parts[1]), parts[2]))
    return out


def is_ours(r: Recorded) -> bool:
    """The recorded process is still the one we started (same start time, expected executable)."""
    if not alive(r.pid):
        return False
    exe = exe_name(r.pid) or ""
    return start_ticks(r.pid) == r.start_ticks and exe.startswith(r.exe)


def reap(pid: int) -> None:
    """Collect a child of this process that has exited (no-op for others)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop_pids(pids: Iterable[int], timeout: float, log: Callable[[str], None]) -> None:
    """SIGTERM, wait up to `timeout`, then SIGKILL what is left."""
    pids = [p for p in pids if alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    end = time.monotonic() + timeout
    for p in pids:
        while time.monotonic() < end:
            reap(p)
            if not alive(p):
                break
            time.sleep(0.05)
        if alive(p):
            log(f"pid {p} ({exe_name(p)}) ignored SIGTERM for {timeout:g}s: SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
            for _ in range(40):
                reap(p)
                if not alive(p):
                    break
                time.sleep(0.05)


def children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.setdefault(ppid, []).append(int(d.name))
    return out


def descendants(pid: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    kids = children_map() if kids is None else kids
    out, todo = [], list(kids.get(pid, ()))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def processes_with_env(comm: str, key: str, value: str) -> list[int]:
    """Pids whose command name is `comm` and whose environment has key=value."""
    want = f"{key}={value}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() != comm:
                continue
            if want in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:
            continue
    return sorted(out)


def _socket_inodes(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _hex_addr(text: str) -> str:
    addr, port = text.split(":")
    if len(addr) == 8:  # IPv4, little-endian
        octets = [str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)]
        return f"{'.'.join(octets)}:{int(port, 16)}"
    words = [addr[i : i + 8] for i in range(0, 32, 8)]
    raw = b"".join(bytes.fromhex(w)[::-1] for w in words)
    import ipaddress

    return f"[{ipaddress.IPv6Address(raw)}]:{int(port, 16)}"


def listening(pid: int) -> list[str]:
    """The TCP addresses (`ip:port`) a process listens on."""
    inodes = _socket_inodes(pid)
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[9]) in inodes:  # 0A = LISTEN
                out.append(_hex_addr(f[1]))
    return sorted(out)


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host.startswith("127.") or host == "::1"
