"""Where the idle GPUs a waiting job fits on come from (issue 20; docs/policy.md, "Where the idle GPUs
came from"): a `fairshare compare` run with a hook after every scheduling pass of the replay.

    .venv/bin/python benchmarks/idle_attribution.py compare --trace philly \\
        --cluster benchmarks/philly-400.yaml --policies fairshare --out out/attr

After each pass it takes, from the pass's own view of free capacity, every idle GPU on a node where a
waiting single-node job fits (docs/formats.md "Overload": capped at what those jobs ask for) and
files it under the reservation holding that node, if any: the holder's shape (GPUs per node x
nodes), new or requeued, and its expected start against now (passed, within an hour, a day,
later), weighted by the time to the next pass. The replay's decisions and outputs are unchanged
(the hook only reads). Printed at the end, in GPU-hours. Diagnosis only: it reads the core's
private pass object, so it may need changes when that changes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from fairshare.core import scheduler
from fairshare.core.snapshot import Decisions, Snapshot
from fairshare.core.strategies import Strategy
from fairshare.replay import sim

_last: dict[str, Any] = {}
_acc: dict[str, float] = defaultdict(float)
_state: dict[str, Any] = {"t": None, "cats": {}}
_orig_result = scheduler._Pass.result
_orig_decide = sim.decide  # type: ignore[attr-defined]


def _result(self: Any) -> Decisions:
    _last["pass"] = self
    d: Decisions = _orig_result(self)
    return d


def _when(held_until: float | None, now: float) -> str:
    if held_until is None:
        return "no expected start"
    if held_until <= now + 1:
        return "passed"
    if math.isinf(held_until):
        return "never"
    return (
        "within 1 h" if held_until - now < 3600 else ("within 1 d" if held_until - now < 86400 else "later")
    )


def _categories(snap: Snapshot, p: Any, d: Decisions) -> dict[str, float]:
    sizes: dict[int, int] = defaultdict(int)  # waiting single-node jobs by GPUs per node
    for qk, q in snap.pending.queues.items():
        if qk[2].nodes == 1:
            sizes[qk[2].per_node] += len(q)
    for st in d.starts:
        key = snap.pending.shape_of.get(st.job)
        if key is not None and key[2].nodes == 1:
            sizes[key[2].per_node] -= 1
    waiting = {k: v for k, v in sizes.items() if v > 0}
    if not waiting:
        return {}
    smallest, asked = min(waiting), sum(k * v for k, v in waiting.items())
    cats: dict[str, float] = defaultdict(float)
    view, index = p.view, snap.index
    for i in range(len(index.nodes)):
        free = view.free(i)
        if not index.available[i] or free < smallest or free <= 0:
            continue
        if i in view.held:
            holder = view.holder[i]
            shape = p.shape_of(snap.pending.jobs[holder])
            kind = "requeued" if snap.states[holder].starts > 0 else "new"
            when = _when(view.held_until.get(i), snap.now)
            cats[f"held for {shape.per_node}x{shape.nodes} ({kind}), expected start {when}"] += free
        else:
            cats["no reservation"] += free
    total = sum(cats.values())
    scale = min(1.0, asked / total) if total else 0.0
    return {k: v * scale for k, v in cats.items()}


def _decide(snap: Snapshot, strategy: Strategy, explain: bool = False) -> Decisions:
    d = _orig_decide(snap, strategy, explain)
    t0 = _state["t"]
    if t0 is not None and snap.now > t0:
        for k, g in _state["cats"].items():
            _acc[k] += g * (snap.now - t0)
    _state["t"], _state["cats"] = snap.now, _categories(snap, _last["pass"], d)
    return d


def report() -> None:
    total = sum(_acc.values())
    print(f"idle while a waiting job fits, by what held the node: {total / 3600:.0f} GPU-h")
    for k, v in sorted(_acc.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {k:60s} {v / 3600:8.0f} GPU-h {100 * v / total if total else 0.0:5.1f} %")


if __name__ == "__main__":
    scheduler._Pass.result = _result  # type: ignore[method-assign]
    sim.decide = _decide  # type: ignore[attr-defined]
    from fairshare.cli import main

    try:
        main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    report()
