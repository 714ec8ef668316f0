"""End to end on a real Slurm: `fairshare serve --cluster slurm` drives two accounts with shares
3:1 that saturate the dev cluster's 32 GPUs, then the same arrivals are replayed by `fairshare
compare` (issue 12, item 6). Used by tests/slurm/test_serve_real.py and, to print the figures
for docs/slurm.md, by `python -m tests.slurm.e2e SLURM_CONF` (with the dev cluster up).

The run: research submits its backlog first and fills the cluster; product's backlog arrives a few
seconds later. Each job takes 4 GPUs and sleeps 20 to 32 seconds, with a time limit of 2 minutes and
the contract `protect=20s,checkpoint=10s,resumable` in its comment; the policy caps protection at
60 s and gives product 3 shares to research's 1; the fair-share lookahead is 10 s (default 1 h), so
that within minutes the order repays the debt the first seconds made. Delivered GPU time per
account comes from sacct (every run), over the span both accounts have demand: from product's
first submission to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairshare.slurm.client import CliBackend
from fairshare.slurm.model import SlurmRun

ROOT = Path(__file__).resolve().parents[2]
FAIRSHARE = str(Path(sys.executable).parent / "fairshare")
PROTECT = 20.0
POLICY = """\
window: 7d
gpu_rates:
  A100: 1.0
tree:
- {name: product, share: 3, owner: pm@example.com, review: '2027-06-30'}
- {name: research, share: 1, owner: res@example.com, review: '2027-06-30'}
classes:
  train: {protected: 20s, max_protected: 60s, resumable: true, checkpoint: 10s, restore: 0s, max_stall: 1h}
scheduling:
  lookahead: 10s
  preempt_backoff: 10s
  requeue_delay: 3s
slurm:
  default_class: train
  partitions: [gpu]
  gpu_types: {a100: A100}
"""
CLUSTER = """\
pools:
- {name: n, count: 4, gpus: 8, gpu_type: A100, cpus: 16, mem_gb: 62.5}
epoch: '2026-12-01T00:00:00Z'
"""
COMMENT = "fairshare:protect=20s,checkpoint=10s,resumable"


@dataclass
class Submitted:
    job: int
    account: str
    t: float  # seconds after the run's start
    work: float  # how long it sleeps


def work_of(k: int, work: float) -> float:
    """Run times spread over work .. 1.6 x work, so that runs do not all end together."""
    return work + (k * 7 % 13) * work * 0.05


@dataclass
class E2E:
    duration: float
    work: float
    both_from: float = 0.0  # seconds after the start: both accounts have demand from then
    jobs: list[Submitted] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    delivered: dict[str, float] = field(default_factory=dict)  # GPU-seconds within the run
    ratio: float = 0.0
    requeues: int = 0
    min_requeued_run_s: float | None = None
    first_requeue_t: float | None = None
    first_product_start_after_requeue_t: float | None = None
    waits: dict[str, dict[str, float]] = field(default_factory=dict)  # account -> p50, p90 (live)
    replay: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, int] = field(default_factory=dict)
    serve_log: str = ""

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("runs")
        out.pop("serve_log")
        return out


def sh(env: dict[str, str], *args: str) -> str:
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd="/tmp", timeout=60, check=False)
    if p.returncode:
        raise AssertionError(f"{' '.join(args)}: {p.returncode} {p.stderr.strip()}")
    return p.stdout


def sbatch(env: dict[str, str], account: str, work: float) -> int:
    out = sh(
        env, "sbatch", "--parsable", "-o", "/dev/null", "-A", account, "--gres=gpu:4", "--time=2",
        f"--comment={COMMENT}", "--requeue", "--wrap", f"sleep {work:g}",
    )  # fmt: skip
    return int(out.strip().split(";")[0])


def quantiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"p50": float("nan"), "p90": float("nan"), "n": 0}
    a = np.asarray(xs, dtype=float)
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "n": len(xs)}


def run(
    slurm_conf: str,
    folder: Path,
    duration: float = 150.0,
    work: float = 20.0,
    backlog: tuple[int, int] = (40, 40),
    interval: str = "1s",
) -> E2E:
    """Run serve against the Slurm of `slurm_conf` for `duration` seconds; measure."""
    env = {**os.environ, "SLURM_CONF": slurm_conf, "TZ": "UTC"}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "policy.yaml").write_text(POLICY)
    db = f"sqlite:///{folder / 'fairshare.db'}"
    log = open(folder / "serve.log", "w")  # noqa: SIM115
    serve = subprocess.Popen(
        [FAIRSHARE, "serve", "--policy", str(folder / "policy.yaml"), "--db", db, "--cluster", "slurm",
         "--interval", interval, "--port", "0"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd="/tmp",
    )  # fmt: skip
    out = E2E(duration, work)
    t_both = 0.0
    client = CliBackend(slurm_conf=slurm_conf)
    try:
        _wait_listening(folder / "serve.log", serve)
        t0 = time.time()
        for k in range(backlog[1]):
            w, t = work_of(k, work), time.time() - t0
            out.jobs.append(Submitted(sbatch(env, "research", w), "research", t, w))
        time.sleep(5.0)
        t_both = time.time()
        for k in range(backlog[0]):
            w, t = work_of(k, work), time.time() - t0
            out.jobs.append(Submitted(sbatch(env, "product", w), "product", t, w))
        while time.time() < t0 + duration:
            time.sleep(1.0)
            if serve.poll() is not None:
                raise AssertionError(f"serve exited with {serve.returncode}")
        t_end = time.time()
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        log.close()
        ids = [str(j.job_id) for j in client.read_jobs()]
        if ids:
            subprocess.run(["scancel", *ids], env=env, check=False, capture_output=True)
    out.serve_log = (folder / "serve.log").read_text()
    mine = {j.job for j in out.jobs}
    runs = _runs(client, t0, t_end + 1, mine)
    out.both_from = t_both - t0
    _measure(out, runs, t0, t_end, t_both)
    out.audit = _audit_counts(db, t0)
    out.replay = replay(out, folder)
    return out


def _wait_listening(path: Path, proc: subprocess.Popen[Any], timeout: float = 60.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if "listening on" in path.read_text():
            return
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}: {path.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"serve did not start: {path.read_text()}")


def _runs(client: CliBackend, t0: float, t1: float, mine: set[int]) -> list[SlurmRun]:
    end = time.time() + 20
    while True:  # accounting records ends asynchronously: wait until every run has one
        runs = [r for r in client.read_runs(t0 - 1, t1) if r.job_id in mine]
        if all(r.end is not None for r in runs) or time.time() > end:
            return runs
        time.sleep(1.0)


def _measure(out: E2E, runs: list[SlurmRun], t0: float, t_end: float, t_both: float) -> None:
    account = {j.job: j.account for j in out.jobs}
    submitted = {j.job: t0 + j.t for j in out.jobs}
    delivered = dict.fromkeys(("product", "research"), 0.0)
    first: dict[int, float] = {}
    requeued = []
    for r in runs:
        end = min(float(r.end if r.end is not None else t_end), t_end)
        delivered[account[r.job_id]] += max(0.0, end - max(r.start, t_both)) * r.gpus
        first[r.job_id] = min(first.get(r.job_id, r.start), r.start)
        out.runs.append({"job": r.job_id, "start": r.start - t0, "end": None if r.end is None else r.end - t0,
                         "state": r.state, "account": account[r.job_id]})  # fmt: skip
        if r.state == "REQUEUED" and r.end is not None:
            requeued.append(r)
    out.delivered = delivered
    out.ratio = delivered["product"] / delivered["research"] if delivered["research"] else float("inf")
    out.requeues = len(requeued)
    if requeued:
        out.min_requeued_run_s = min(float(r.end - r.start) for r in requeued if r.end is not None)
        first_rq = min(float(r.end) for r in requeued if r.end is not None)
        out.first_requeue_t = first_rq - t0
        after = [r.start for r in runs if account[r.job_id] == "product" and r.start >= first_rq - 1]
        out.first_product_start_after_requeue_t = min(after) - t0 if after else None
    for acct in ("product", "research"):
        # Slurm's start times are whole seconds
        waits = [max(0.0, first[j] - submitted[j]) for j in submitted if account[j] == acct and j in first]
        out.waits[acct] = quantiles(waits)


def _audit_counts(db: str, t0: float) -> dict[str, int]:
    from fairshare.service.storage import audit
    from fairshare.service.storage.store import Store

    counts: dict[str, int] = {}
    with Store.open(db, time.time) as store, store.read() as tx:
        for rec in audit.query(tx, limit=None):
            counts[rec.decision] = counts.get(rec.decision, 0) + 1
    return counts


def replay(out: E2E, folder: Path) -> dict[str, Any]:
    """The same arrivals (and true run times) replayed by `fairshare compare` on a model of the
    dev cluster; waits and shares over the live run's span, beside the live ones."""
    rows = [
        {"job_id": f"j{j.job}", "submit": round(j.t, 3), "group": j.account, "class": "train", "gpus": 4,
         "work": j.work, "estimate": 120, "protected": "20s", "resumable": True, "checkpoint": "10s"}
        for j in out.jobs
    ]  # fmt: skip
    (folder / "workload.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "cluster.yaml").write_text(CLUSTER)
    res = folder / "replay"
    p = subprocess.run(
        [FAIRSHARE, "compare", "--policy", str(folder / "policy.yaml"),
         "--cluster", str(folder / "cluster.yaml"), "--workload", str(folder / "workload.jsonl"),
         "--policies", "fairshare", "--out", str(res)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if p.returncode:
        raise AssertionError(f"fairshare compare: {p.returncode} {p.stderr}")
    account = {f"j{j.job}": j.account for j in out.jobs}
    submit = {f"j{j.job}": j.t for j in out.jobs}
    delivered = dict.fromkeys(("product", "research"), 0.0)
    running: dict[str, tuple[float, int]] = {}
    first: dict[str, float] = {}
    preempts = 0
    for line in (res / "fairshare" / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        kind, t = ev["type"], min(max(float(ev["t"]), out.both_from), out.duration)
        if kind == "start":
            running[ev["job"]] = (t, sum(ev["alloc"].values()))
            first.setdefault(ev["job"], float(ev["t"]))
        elif kind in ("finish", "preempt"):
            t_start, gpus = running.pop(ev["job"])
            delivered[account[ev["job"]]] += (t - t_start) * gpus
            preempts += kind == "preempt"
    for job, (t_start, gpus) in running.items():
        delivered[account[job]] += (out.duration - t_start) * gpus
    waits = {
        acct: quantiles(
            [first[j] - submit[j] for j in first if account[j] == acct and first[j] <= out.duration]
        )
        for acct in ("product", "research")
    }
    ratio = delivered["product"] / delivered["research"] if delivered["research"] else float("inf")
    return {"delivered": delivered, "ratio": ratio, "waits": waits, "preemptions_in_span": preempts}


if __name__ == "__main__":
    result = run(sys.argv[1], Path(tempfile.mkdtemp(prefix="fairshare-e2e-")))
    print(json.dumps(result.as_json(), indent=2))
