"""Replay benchmark: throughput and peak memory of `run_strategy` on a generated workload.

    .venv/bin/python benchmarks/run.py                      # 100,000 jobs, fairshare
    .venv/bin/python benchmarks/run.py --scaling --policies fairshare,fifo
    .venv/bin/python benchmarks/run.py --quick              # smoke size, a few seconds

Each measured replay runs in a fresh interpreter (this script re-run with a hidden flag), so its
peak RSS (`ru_maxrss`) belongs to that one replay and not to earlier ones. In that child:

    generate   the workload records (benchmarks/workload_gen.py; not part of any other figure)
    load       inputs_from_scenario: validation and resolution of policy, cluster and jobs
    replay     run_strategy: the simulation, producing events, decisions and metrics
    write      write_replay to a temporary directory

jobs/s and events/s are over the replay time only; events are the lines of events.jsonl.
The `--scaling` series runs N/16, N/4 and N jobs at the same arrival rate (a longer time span, the
same load) and reports the time per job and t(k x) / (k * t(1 x)), which is 1.0 for linear growth.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CHILD_FLAG = "--_child"
QUICK_JOBS = 3200
SCALING_FACTORS = (1, 4, 16)


@dataclass(frozen=True)
class RunResult:
    policy: str
    jobs: int
    seed: int
    gpus: int
    span_days: float  # generated submit span
    events: int
    decisions: int
    preemptions: int
    occupancy: float
    train_wait_p50_h: float  # queueing: median wait of training gangs
    max_wait_h: float
    generate_s: float
    load_s: float
    replay_s: float
    replay_cpu_s: float  # CPU time of the replay process: less sensitive than wall time to a busy machine
    loadavg_1m: float  # 1-minute load average when the replay started (other work on the machine)
    write_s: float
    output_mib: float
    rss_before_replay_mib: float  # current RSS once the inputs are loaded
    peak_before_replay_mib: float  # ru_maxrss after generation and loading
    peak_replay_mib: float  # ru_maxrss after the replay (whole process: generation + load + replay)
    peak_write_mib: float  # ru_maxrss after writing the outputs
    source: str = "unknown"  # the code this replay imported (src/ may change between runs)

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.replay_s

    @property
    def events_per_s(self) -> float:
        return self.events / self.replay_s

    @property
    def us_per_job(self) -> float:
        return 1e6 * self.replay_s / self.jobs


# ---------------------------------------------------------------------------------------- child


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _current_rss_mib() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _dir_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def child(policy: str, jobs: int, seed: int) -> RunResult:
    """One measured replay; runs inside a fresh interpreter."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    source = source_line()
    from fairshare.replay.outputs import write_replay
    from fairshare.replay.runner import inputs_from_scenario, run_strategy
    from workload_gen import cluster_gpus, generate, jobs_per_day

    t0 = time.perf_counter()
    data = generate(jobs, seed)
    t1 = time.perf_counter()
    inputs = inputs_from_scenario(data)
    t2 = time.perf_counter()
    del data  # the raw records are not needed by the replay
    rss_before = _current_rss_mib()
    peak_before = _maxrss_mib()

    loadavg = os.getloadavg()[0]
    c0 = time.process_time()
    t3 = time.perf_counter()
    out = run_strategy(inputs, policy)
    t4 = time.perf_counter()
    c1 = time.process_time()
    peak_replay = _maxrss_mib()

    with tempfile.TemporaryDirectory(prefix="fairshare-bench-") as tmp:
        folder = Path(tmp) / policy
        t5 = time.perf_counter()
        write_replay(folder, inputs.cluster, inputs.policy_text, out)
        t6 = time.perf_counter()
        size = _dir_mib(folder)
    peak_write = _maxrss_mib()

    metrics = out.result.metrics
    preempt = metrics.get("preemptions")
    if isinstance(preempt, dict):
        preempt = preempt.get("total", sum(v for v in preempt.values() if isinstance(v, int)))
    train = metrics.get("classes", {}).get("train", {})
    max_wait = metrics.get("starvation", {}).get("max_wait_s", float("nan"))
    return RunResult(
        policy=policy,
        jobs=len(inputs.jobs),
        seed=seed,
        gpus=cluster_gpus(),
        span_days=jobs / jobs_per_day(),
        events=len(out.events),
        decisions=len(out.decisions),
        preemptions=int(preempt or 0),
        occupancy=float(metrics.get("occupancy", float("nan"))),
        train_wait_p50_h=float(train.get("wait_p50_s", float("nan"))) / 3600.0,
        max_wait_h=float(max_wait) / 3600.0,
        generate_s=t1 - t0,
        load_s=t2 - t1,
        replay_s=t4 - t3,
        replay_cpu_s=c1 - c0,
        loadavg_1m=loadavg,
        write_s=t6 - t5,
        output_mib=size,
        rss_before_replay_mib=rss_before,
        peak_before_replay_mib=peak_before,
        peak_replay_mib=peak_replay,
        peak_write_mib=peak_write,
        source=source,
    )


# ---------------------------------------------------------------------------------------- parent


def measure(policy: str, jobs: int, seed: int) -> RunResult:
    """Run one replay in a fresh interpreter and read its result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG, policy, str(jobs), str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark child failed ({policy}, {jobs} jobs): exit {proc.returncode}")
    last = proc.stdout.strip().splitlines()[-1]
    return RunResult(**json.loads(last))


def best(runs: list[RunResult]) -> RunResult:
    """The fastest replay of the repeats, with the highest peak memory seen over all of them."""
    fastest = min(runs, key=lambda r: r.replay_s)
    peak = max(r.peak_replay_mib for r in runs)
    return RunResult(**{**asdict(fastest), "peak_replay_mib": peak})


def fmt_row(r: RunResult) -> str:
    return (
        f"{r.policy:<15} {r.jobs:>8,} jobs {r.events:>9,} events {r.gpus:>5,} GPUs | "
        f"gen {r.generate_s:5.2f}s load {r.load_s:5.2f}s "
        f"replay {r.replay_s:7.2f}s (cpu {r.replay_cpu_s:7.2f}s) "
        f"write {r.write_s:5.2f}s | {r.jobs_per_s:7,.0f} jobs/s {r.events_per_s:8,.0f} events/s | "
        f"peak RSS {r.peak_replay_mib:6.1f} MiB (after load {r.peak_before_replay_mib:6.1f}) "
        f"| loadavg {r.loadavg_1m:.2f}"
    )


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main_table(results: list[RunResult]) -> str:
    head = [
        "policy",
        "jobs",
        "events",
        "GPUs",
        "load (s)",
        "replay (s)",
        "replay CPU (s)",
        "write (s)",
        "jobs/s",
        "events/s",
        "peak RSS after load (MiB)",
        "peak RSS after replay (MiB)",
    ]
    rows = [
        [
            r.policy,
            f"{r.jobs:,}",
            f"{r.events:,}",
            f"{r.gpus:,}",
            f"{r.load_s:.2f}",
            f"{r.replay_s:.2f}",
            f"{r.replay_cpu_s:.2f}",
            f"{r.write_s:.2f}",
            f"{r.jobs_per_s:,.0f}",
            f"{r.events_per_s:,.0f}",
            f"{r.peak_before_replay_mib:,.0f}",
            f"{r.peak_replay_mib:,.0f}",
        ]
        for r in results
    ]
    return _table(head, rows)


def workload_table(results: list[RunResult]) -> str:
    head = [
        "policy",
        "jobs",
        "submit span (days)",
        "occupancy",
        "preemptions",
        "train wait p50 (h)",
        "max wait (h)",
        "decisions",
        "outputs (MiB)",
        "loadavg at start",
    ]
    rows = [
        [
            r.policy,
            f"{r.jobs:,}",
            f"{r.span_days:.1f}",
            f"{r.occupancy:.1%}",
            f"{r.preemptions:,}",
            f"{r.train_wait_p50_h:.2f}",
            f"{r.max_wait_h:.1f}",
            f"{r.decisions:,}",
            f"{r.output_mib:.0f}",
            f"{r.loadavg_1m:.2f}",
        ]
        for r in results
    ]
    return _table(head, rows)


def scaling_table(series: dict[str, list[tuple[int, RunResult]]]) -> str:
    """Time per job and two ratios to linear growth: against the 1x point, and against the previous point."""
    head = [
        "policy",
        "scale",
        "jobs",
        "replay (s)",
        "µs/job",
        "t(k×) / (k·t(1×))",
        "vs previous point",
        "replay CPU (s)",
        "CPU: t(k×) / (k·t(1×))",
        "peak RSS (MiB)",
    ]
    rows = []
    for policy, points in series.items():
        k0, first = points[0]
        prev_k, prev = k0, first
        for k, r in points:
            step = (r.replay_s / prev.replay_s) / (k / prev_k) if k != k0 else 1.0
            linear = r.replay_s / (k / k0 * first.replay_s)
            linear_cpu = r.replay_cpu_s / (k / k0 * first.replay_cpu_s)
            rows.append(
                [
                    policy,
                    f"{k}×",
                    f"{r.jobs:,}",
                    f"{r.replay_s:.2f}",
                    f"{r.us_per_job:.0f}",
                    f"{linear:.2f}",
                    f"{step:.2f}",
                    f"{r.replay_cpu_s:.2f}",
                    f"{linear_cpu:.2f}",
                    f"{r.peak_replay_mib:,.0f}",
                ]
            )
            prev_k, prev = k, r
    return _table(head, rows)


def source_line() -> str:
    """The commit and a fingerprint of uncommitted changes to src/ (read-only git; no index refresh)."""
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> str | None:
        try:
            p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=False)
        except OSError:
            return None
        return p.stdout.decode(errors="replace") if p.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if head is None:
        return "source: not a git checkout"
    diff = git("diff", "HEAD", "--", "src") or ""
    fingerprint = hashlib.sha256(diff.encode()).hexdigest()[:12]
    state = f"src/ modified, diff sha256 {fingerprint}" if diff else "src/ clean"
    return f"source: commit {head.strip()}, {state}"


def machine_line() -> str:
    load1, load5, _ = os.getloadavg()
    return (
        f"{platform.node() or 'host'}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {load1:.2f}/{load5:.2f}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=None, help="jobs in the largest run (default 100000)")
    ap.add_argument(
        "--policies",
        default="fairshare",
        help="comma list of policies, e.g. fairshare,fifo,priority-labels (default fairshare)",
    )
    ap.add_argument(
        "--scaling",
        action="store_true",
        help="also run N/16 and N/4 jobs (same arrival rate, shorter span): the 1x/4x/16x series",
    )
    ap.add_argument(
        "--quick", action="store_true", help=f"smoke size: {QUICK_JOBS} jobs unless --jobs is given"
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="replays per point; the fastest is reported (default 1)"
    )
    ap.add_argument("--seed", type=int, default=7, help="workload seed (default 7)")
    ap.add_argument("--json", type=Path, default=None, help="also write every result to this JSON file")
    ap.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="run nothing: print the tables of a file written by --json",
    )
    args = ap.parse_args(argv)
    if args.jobs is None:
        args.jobs = QUICK_JOBS if args.quick else 100_000
    if args.jobs < (16 if args.scaling else 1):
        ap.error("--jobs is too small")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json is not None:
        return reprint(args.from_json)
    from fairshare.replay.runner import check_policies

    policies = check_policies([p for p in args.policies.split(",") if p.strip()])
    n: int = args.jobs
    sizes = {k: n * k // 16 for k in SCALING_FACTORS} if args.scaling else {16: n}

    print(f"# fairshare replay benchmark — {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"# {machine_line()}")
    source = source_line()
    print(f"# {source}")
    print(f"# command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    sys.stdout.flush()

    done: dict[tuple[str, int], RunResult] = {}
    for policy in policies:
        for size in sorted(set(sizes.values())):
            runs = []
            for _ in range(args.repeat):
                r = measure(policy, size, args.seed)
                print(fmt_row(r), flush=True)
                runs.append(r)
            done[(policy, size)] = best(runs)

    print()
    report(list(done.values()), n, args.seed, args.repeat)
    if args.json is not None:
        payload: dict[str, Any] = {
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine_line(),
            "source": source,
            "argv": sys.argv,
            "jobs": n,
            "seed": args.seed,
            "repeat": args.repeat,
            "runs": [asdict(r) for r in done.values()],
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


def report(runs: list[RunResult], n: int, seed: int, repeat: int) -> None:
    """The markdown tables: the N-job runs, and the growth series when smaller sizes were run."""
    policies = list(dict.fromkeys(r.policy for r in runs))
    sources = sorted({r.source for r in runs})
    if len(sources) == 1:
        print(f"All runs imported {sources[0]}.")
    else:
        print(
            f"WARNING: src/ changed while the benchmark ran; the runs imported {len(sources)} different "
            "sources, so the figures do not describe one version of the code:"
        )
        for src in sources:
            print(f"  {src}: {', '.join(f'{r.policy} {r.jobs:,}' for r in runs if r.source == src)}")
    print()
    by = {(r.policy, r.jobs): r for r in runs}
    results = [by[(p, n)] for p in policies if (p, n) in by]
    print(
        f"Replay of {n:,} generated jobs (seed {seed}), each in a fresh process"
        + (f", best of {repeat}" if repeat > 1 else "")
        + ":"
    )
    print()
    print(main_table(results))
    print()
    print("The workload and the replay's outcome (not speed figures):")
    print()
    print(workload_table(results))
    sizes = {k: n * k // 16 for k in SCALING_FACTORS}
    series = {
        p: [(k, by[(p, s)]) for k, s in sizes.items()]
        for p in policies
        if all((p, s) in by for s in sizes.values())
    }
    if series:
        print()
        print(f"Growth at the same load: 1× = {sizes[1]:,} jobs, 16× = {n:,} jobs:")
        print()
        print(scaling_table(series))


def reprint(path: Path) -> int:
    """Print the tables of a results file written by --json."""
    payload = json.loads(path.read_text())
    print(f"# {payload['date_utc']} — {payload['machine']}")
    print(f"# {payload.get('source', 'source: unknown')}")
    print(f"# command: {' '.join(payload['argv'])}")
    print()
    runs = [RunResult(**r) for r in payload["runs"]]
    n = int(payload.get("jobs", max(r.jobs for r in runs)))
    report(runs, n, int(payload.get("seed", runs[0].seed)), int(payload.get("repeat", 1)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == CHILD_FLAG:
        result = child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        print(json.dumps(asdict(result)))
        raise SystemExit(0)
    raise SystemExit(main())
