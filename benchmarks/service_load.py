"""Service load benchmark: read requests per second against `fairshare serve --demo` while its
scheduler loop runs, and the loop's pass and cycle durations with and without that load.

    .venv/bin/python benchmarks/service_load.py                   # 20 s idle, then 20 s of load
    .venv/bin/python benchmarks/service_load.py --seconds 60 --connections 32 --speed 600
    .venv/bin/python benchmarks/service_load.py --quick           # 5 s each (a smoke run)

It starts `fairshare serve --demo` (a temp SQLite database, the `normal` scenario on the
accelerated clock) on a free loopback port and waits until the demo has queued work (--warmup).
The load generator is this process: asyncio with keep-alive HTTP/1.1 connections to 127.0.0.1
only, a fixed mix of read endpoints with the viewer token (the dashboard's reads, plus /metrics
and explain), each connection sending its next request when the last one is answered; it runs a
bounded time and stops by itself. Both share the machine's 2 CPUs.

Reported: requests/s, latency quantiles, non-200 answers; from the server's own log
(/api/status?log=true) the scheduling passes and loop cycles inside each window, their duration
quantiles and the loop's lag (clock minus the engine's last instant after each cycle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

MIX = (  # (weight, path); {job} is a pending or running job of the demo
    (25, "/api/tree"),
    (25, "/api/jobs?limit=200"),
    (15, "/api/status"),
    (15, "/api/jobs/{job}/explain"),
    (10, "/metrics"),
    (10, "/api/usage"),
)


def quantiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    s = sorted(xs)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))]

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": s[-1]}


@dataclass
class Window:
    name: str
    seconds: float
    requests: int = 0
    errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    passes: int = 0
    pass_ms: dict[str, float | None] = field(default_factory=dict)
    cycles: int = 0
    cycle_ms: dict[str, float | None] = field(default_factory=dict)
    lag_sim_s: dict[str, float | None] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def get(url: str, token: str) -> Any:
    req = Request(url, headers={"Authorization": f"Bearer {token}"})
    with urlopen(req, timeout=30) as r:
        return json.loads(r.read())


async def client(host: str, port: int, token: str, paths: list[str], end: float, out: list[float],
                 statuses: dict[str, int], seed: int) -> None:  # fmt: skip
    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection(host, port)
    auth = f"Authorization: Bearer {token}\r\n"
    try:
        while time.perf_counter() < end:
            path = rng.choice(paths)
            t0 = time.perf_counter()
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = head[9:12].decode()
            m = re.search(rb"content-length: *(\d+)", head, re.I)
            if m is None:
                raise RuntimeError(f"no content-length in the answer to {path}: {head[:200]!r}")
            await reader.readexactly(int(m.group(1)))
            out.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


def load(host: str, port: int, token: str, paths: list[str], seconds: float, connections: int) -> Window:
    lat: list[float] = []
    statuses: dict[str, int] = {}

    async def main() -> None:
        end = time.perf_counter() + seconds
        await asyncio.gather(
            *(client(host, port, token, paths, end, lat, statuses, k) for k in range(connections))
        )

    t0 = time.perf_counter()
    asyncio.run(main())
    took = time.perf_counter() - t0
    w = Window("load", took, requests=len(lat), statuses=statuses)
    w.errors = sum(n for s, n in statuses.items() if s != "200")
    w.latency_ms = {k: None if v is None else v * 1000 for k, v in quantiles(lat).items()}
    return w


def loop_stats(w: Window, status: dict[str, Any], lo: float, hi: float) -> None:
    passes = [d for t, d in status["passes"] if lo <= t <= hi]
    cycles = [(d, lag) for t, d, lag in status["cycles"] if lo <= t <= hi]
    w.passes, w.cycles = len(passes), len(cycles)
    w.pass_ms = {k: None if v is None else v * 1000 for k, v in quantiles(passes).items()}
    w.cycle_ms = {k: None if v is None else v * 1000 for k, v in quantiles([d for d, _ in cycles]).items()}
    w.lag_sim_s = quantiles([lag for _, lag in cycles])


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def weighted_paths(jobs: list[str]) -> list[str]:
    out = []
    for weight, path in MIX:
        for k in range(weight):
            out.append(path.replace("{job}", jobs[k % len(jobs)]) if "{job}" in path else path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the idle and of the load window")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--speed", type=float, default=600.0)
    ap.add_argument("--scenario", default="normal", help="the demo cluster's scenario")
    ap.add_argument("--warmup", type=float, default=15.0, help="wall seconds before measuring")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.warmup = 5.0, 5.0
    cmd = [sys.executable, "-c", "from fairshare.cli import main; main()", "serve", "--demo", "--port", "0",
           "--speed", str(args.speed), "--cluster", f"demo:{args.scenario}"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    url = token = ""
    try:
        for line in proc.stdout:
            if line.startswith("listening on "):
                url = line.split()[-1].rstrip("/")
            if line.startswith("viewer token:"):
                token = line.split()[-1]
                break
        m = re.match(r"http://([\d.]+):(\d+)", url)
        assert m and token, "serve did not print its address and tokens"
        host, port = m.group(1), int(m.group(2))
        time.sleep(args.warmup)
        idle = Window("idle", args.seconds)
        t0 = time.time()
        time.sleep(args.seconds)
        t1 = time.time()
        jobs = [j["id"] for j in get(f"{url}/api/jobs?limit=50", token)["jobs"]] or ["none"]
        t2 = time.time()
        busy = load(host, port, token, weighted_paths(jobs), args.seconds, args.connections)
        t3 = time.time()
        status = get(f"{url}/api/status?log=true", token)
        loop_stats(idle, status, t0, t1)
        loop_stats(busy, status, t2, t3)
    finally:
        proc.terminate()
        proc.wait(30)
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            "seconds": args.seconds,
            "connections": args.connections,
            "speed": args.speed,
            "scenario": args.scenario,
            "warmup": args.warmup,
            "mix": MIX,
        },
        "idle": asdict(idle),
        "load": {**asdict(busy), "requests_per_s": busy.rps},
    }
    lat = busy.latency_ms
    print(
        f"load: {busy.requests} requests in {busy.seconds:.1f} s = {busy.rps:,.0f} req/s over "
        f"{args.connections} connections; non-200: {busy.errors}; latency ms p50 {_f(lat['p50'])} "
        f"p90 {_f(lat['p90'])} p99 {_f(lat['p99'])}"
    )
    for w in (idle, busy):
        p, c, g = w.pass_ms, w.cycle_ms, w.lag_sim_s
        print(
            f"{w.name:>5}: {w.passes} passes, ms p50 {_f(p['p50'])} p90 {_f(p['p90'])} p99 {_f(p['p99'])} "
            f"max {_f(p['max'])}; {w.cycles} cycles, ms p50 {_f(c['p50'])} p99 {_f(c['p99'])}; "
            f"lag (simulated s) p50 {_f(g['p50'])} max {_f(g['max'])}"
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
