"""Who waited past the requeue bound, and what their own team started meanwhile (issue 20;
docs/policy.md "when a requeued run goes first"). Reads one output folder's events.jsonl:

    .venv/bin/python benchmarks/requeue_tail.py out/full/fairshare --bound 7d --first-after 3.5d

For every requeue wait (a preemption to the job's next start) longer than the bound it counts,
by (team, GPUs), the same team's starts of runs of that size or smaller during the wait: new jobs
(a first start) and requeued ones, and, from `--first-after` into the wait (when the run went
first in its leaf), the requeued runs preempted before it (the boosted queue draining in
preemption order) against the others (jumped ahead of it). Many new starts during a wait mean
the wait was an order inside the team, not the team's turn.
"""

from __future__ import annotations

import argparse
import bisect
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fairshare._units import parse_duration


@dataclass(frozen=True)
class _Start:
    t: float
    job: str
    gpus: int
    first: bool


@dataclass(frozen=True)
class _Wait:
    job: str
    team: str
    gpus: int
    t0: float
    t1: float


def _read(path: Path) -> tuple[dict[str, list[_Start]], list[_Wait], dict[str, list[float]]]:
    submits: dict[str, tuple[str, int]] = {}
    starts: dict[str, list[_Start]] = defaultdict(list)
    preempted_at: dict[str, float] = {}
    preemptions: dict[str, list[float]] = defaultdict(list)
    waits: list[_Wait] = []
    seen: set[str] = set()
    with path.open() as f:
        for line in f:
            e = json.loads(line)
            kind = e["type"]
            if kind == "submit":
                submits[e["job"]] = (e["group"], int(e["gpus"]))
            elif kind == "start":
                job = e["job"]
                team, gpus = submits[job]
                starts[team].append(_Start(e["t"], job, gpus, job not in seen))
                seen.add(job)
                if job in preempted_at:
                    waits.append(_Wait(job, team, gpus, preempted_at.pop(job), e["t"]))
            elif kind == "preempt":
                preempted_at[e["job"]] = e["t"]
                preemptions[e["job"]].append(e["t"])
    return starts, waits, preemptions


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a policy's output folder (holds events.jsonl)")
    ap.add_argument("--bound", default="7d", help="the requeue bound (default 7d)")
    ap.add_argument("--first-after", default="3.5d", help="when a requeued run went first (default 3.5d)")
    a = ap.parse_args(argv)
    bound, first_after = parse_duration(a.bound), parse_duration(a.first_after)
    starts, waits, preemptions = _read(a.run / "events.jsonl")
    long = [w for w in waits if w.t1 - w.t0 > bound]
    print(f"{len(waits)} requeue waits, {len(long)} longer than {a.bound}")
    rows: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0] * 6)
    for w in long:
        runs = starts[w.team]
        ts = [s.t for s in runs]
        row = rows[(w.team, w.gpus)]
        row[0] += 1
        during = runs[bisect.bisect_right(ts, w.t0) : bisect.bisect_left(ts, w.t1)]
        small = [s for s in during if s.gpus <= w.gpus]
        row[1] += sum(s.first for s in small)
        row[2] += sum(not s.first for s in small)
        for s in small:
            if s.t < w.t0 + first_after:
                continue
            if s.first:
                row[5] += 1
                continue
            before = [p for p in preemptions[s.job] if p < s.t]
            row[3 if before and before[-1] < w.t0 else 4] += 1
    print("team gpus | waits | team's starts of its size or smaller during them: new, requeued |")
    print("  after first-after: requeued preempted earlier, requeued preempted later, new")
    for (team, gpus), r in sorted(rows.items(), key=lambda kv: (-kv[1][0], kv[0])):
        print(f"{team} {gpus} | {r[0]} | {r[1]}, {r[2]} | {r[3]}, {r[4]}, {r[5]}")


if __name__ == "__main__":
    main()
