"""Issue 19's input-limit figures: `fairshare check` on the valid maximum of each limit, and the
time to refuse a file one past it.

    .venv/bin/python benchmarks/input_limits.py                 # every case, files in a temp folder
    .venv/bin/python benchmarks/input_limits.py --dir DIR       # keep the generated files in DIR
    .venv/bin/python benchmarks/input_limits.py --only groups   # one case (groups, jobs, nodes, ...)

Each case generates its files (deterministically), runs `fairshare check` on them in a fresh process
and reports wall time, CPU time (user + system: the wall time of this single-threaded check on an
idle machine; on a shared machine the wall time is longer), peak RSS (the child's ru_maxrss) and
the exit code. The acceptance lines (issue 19, must-have 3): the valid maximum checks in <= 10 s
(CPU) and <= 2 GB; one past the limit is refused (exit 2) where the reader reaches it, so the
refusal takes no longer than the valid file's check. Figures go to docs/benchmarks.md ("Input limits").
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAIRSHARE = [sys.executable, "-m", "fairshare.cli"]

MAX_GROUPS = 100_000
MAX_JOBS = 2_000_000
MAX_NODES = 100_000
CLASSES = "classes:\n  train: {protected: 1h, max_protected: 2h, resumable: true, checkpoint: 30m}\n"


def policy_text(groups: int, types: tuple[str, ...] = ("H100",)) -> str:
    """`groups` groups: 100 programs, each with teams under it (a 2-level tree)."""
    tops = min(100, groups)
    below = groups - tops
    lines = ["window: 7d", "gpu_rates:", *(f"  {t}: 1.0" for t in types), "tree:"]
    for p in range(tops):
        lines.append(f"- name: p{p}\n  share: {1 + p % 7}")
        n = below // tops + (1 if p < below % tops else 0)
        if n:
            lines.append("  children:")
            lines.extend(f"  - {{name: t{k}, share: {1 + k % 5}}}" for k in range(n))
    return "\n".join(lines) + "\n" + CLASSES


def cluster_text(nodes: int, distinct: bool = False) -> str:
    """`nodes` nodes of 8 H100 GPUs; `distinct`: pools of 1..1,024 GPUs per node instead."""
    if not distinct:
        return f"pools:\n- {{name: node, count: {nodes}, gpus: 8, gpu_type: H100}}\n"
    pools, left, g = [], nodes, 1
    while left:
        count = min(left, 100)
        pools.append(f"- {{name: g{g}, count: {count}, gpus: {g}, gpu_type: H100}}")
        left -= count
        g = g % 1024 + 1
    return "pools:\n" + "\n".join(pools) + "\n"


FULL_HEADER = (
    "job_id,submit,group,user,class,gpus,nodes,gpu_type,cpus,mem_gb,work,estimate,label,deadline,"
    "protected,resumable,checkpoint,stall_after\n"
)


def write_workload(
    path: Path, jobs: int, gpus: Callable[[int], int] = lambda i: 1 + i % 8, every_column: bool = False
) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write(FULL_HEADER if every_column else "job_id,submit,group,class,gpus,work\n")
        chunk = []
        for i in range(jobs):
            if every_column:
                chunk.append(
                    f"j{i},{i % 86400},p{i % 100}/t{i % 6},u{i % 50},train,{gpus(i)},1,H100,4,32,3600,7200,"
                    f"high,{i % 86400 + 90000},30m,true,15m,\n"
                )
            else:
                chunk.append(f"j{i},{i % 86400},p{i % 100}/t{i % 6},train,{gpus(i)},3600\n")
            if len(chunk) == 10_000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))


@dataclass
class Case:
    name: str
    what: str
    expect: int  # exit code
    files: Callable[[Path], list[str]]  # writes its files, returns the check arguments


def _groups(n: int) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        p = d / f"policy-{n}.yaml"
        if not p.exists():
            p.write_text(policy_text(n))
        return [str(p)]

    return make


def _jobs(n: int, every_column: bool = False) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        pol, cl = d / "policy-700.yaml", d / "cluster-100-cpus.yaml"
        wl = d / f"workload-{n}{'-every-column' if every_column else ''}.csv"
        if not pol.exists():
            pol.write_text(policy_text(700))
        if not cl.exists():
            cl.write_text(
                "pools:\n- {name: node, count: 100, gpus: 8, gpu_type: H100, cpus: 96, mem_gb: 1024}\n"
            )
        if not wl.exists():
            write_workload(wl, n, every_column=every_column)
        return [str(pol), "--cluster", str(cl), "--workload", str(wl)]

    return make


def _nodes(n: int, distinct: bool = False, jobs: int = 0) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        pol = d / "policy-700.yaml"
        cl = d / f"cluster-{n}{'-distinct' if distinct else ''}.yaml"
        if not pol.exists():
            pol.write_text(policy_text(700))
        if not cl.exists():
            cl.write_text(cluster_text(n, distinct))
        args = [str(pol), "--cluster", str(cl)]
        if jobs:
            wl = d / f"workload-{jobs}-distinct-gpus.csv"
            if not wl.exists():
                write_workload(wl, jobs, gpus=lambda i: 1 + i)
            args += ["--workload", str(wl)]
        return args

    return make


CASES = {
    "groups": Case("groups", "policy of 100,000 groups (the limit)", 0, _groups(MAX_GROUPS)),
    "groups+1": Case("groups+1", "policy of 100,001 groups", 2, _groups(MAX_GROUPS + 1)),
    "jobs": Case("jobs", "workload of 2,000,000 jobs (the limit), 6 columns", 0, _jobs(MAX_JOBS)),
    "jobs+1": Case("jobs+1", "workload of 2,000,001 jobs", 2, _jobs(MAX_JOBS + 1)),
    "jobs-all": Case(
        "jobs-all", "workload of 2,000,000 jobs, all 18 columns given", 0, _jobs(MAX_JOBS, every_column=True)
    ),
    "nodes": Case("nodes", "cluster of 100,000 nodes (the limit)", 0, _nodes(MAX_NODES)),
    "nodes-gpus": Case(
        "nodes-gpus",
        "9,420 jobs of distinct GPU counts on 100,000 nodes of 1..1,024 GPUs",
        0,
        _nodes(MAX_NODES, distinct=True, jobs=9_420),
    ),
}


def run(case: Case, folder: Path) -> tuple[float, float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit code, last stderr line) of `fairshare check`
    on the case. CPU seconds (user + system of the child) are what the wall time is on an idle
    machine: the check is single-threaded."""
    args = case.files(folder)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            [*FAIRSHARE, "check", *args],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        stderr = err_file.read().decode("utf-8", "replace")
    rss = usage.ru_maxrss / 1024
    cpu = usage.ru_utime + usage.ru_stime
    err = (stderr.strip().splitlines() or [""])[-1]
    return seconds, cpu, rss, proc.returncode, err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, help="keep the generated files here (default: a temp folder)")
    ap.add_argument("--only", action="append", choices=list(CASES), help="run only these cases")
    opt = ap.parse_args()
    names = opt.only or list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        folder = opt.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
        print(f"load average: {os.getloadavg()[0]:.1f} (1 min)")
        print(f"{'case':<11} {'wall s':>6} {'CPU s':>6} {'MB':>6} {'exit':>4}  what / last stderr line")
        failed = False
        for name in names:
            case = CASES[name]
            case.files(folder)  # generate first: the time below is the check alone
            seconds, cpu, rss, code, err = run(case, folder)
            ok = code == case.expect and cpu <= 10 and rss <= 2048
            failed |= not ok
            verdict = "" if ok else "  FAILS"
            print(f"{name:<11} {seconds:6.2f} {cpu:6.2f} {rss:6.0f} {code:>4}  {case.what}{verdict}")
            if code != 0:
                print(f"{'':<38}{err[:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
