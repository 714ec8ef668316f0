"""The engine journal as the replay's `events.jsonl` (FORMATS.md), for `audit export`: so that
`fairshare explain --out EXPORT --job ID` reads a live service's jobs as it reads a replay's.

A submission is written with what the scheduler knew: `work` is its declared estimate (the real run
time is the cluster's) and `stall_after` null. Node indexes in allocations become node names (the
journal's `setup` nodes, then its `set_nodes` changes: a node keeps its index, a new one is
appended). Cancellations are not replay events: the audit's `cancel` and `policy_cancelled`
records say them, in decisions.jsonl.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SUBMIT_FIELDS = ("gpus", "nodes", "gpu_types", "estimate", "protected", "resumable", "checkpoint",
                 "restore", "startup", "max_stall", "deadline", "charge")  # fmt: skip


def replay_events(journal: Iterable[tuple[float, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(t, journal payload) pairs, in journal order -> replay events, then `end`."""
    names: list[str] = []
    out: list[dict[str, Any]] = []
    last_t = 0.0
    engine = False
    for t, ev in journal:
        if "kind" not in ev:  # already a replay event (stored in the replay's format)
            out.append(dict(ev))
            continue
        engine = True
        kind, args = ev["kind"], ev.get("args", [])
        last_t = max(last_t, t)
        if kind == "setup":
            names = [str(n["node"]) for n in args[0]["nodes"]]
        elif kind == "set_nodes":
            names.extend(str(n["node"]) for n in args[0] if str(n["node"]) not in names)
        elif kind == "submit":
            r = args[0]
            row = {"t": t, "type": "submit", "job": r["id"], "group": r["group"], "class": r["cls"]}
            row.update({k: r[k] for k in SUBMIT_FIELDS})
            row["work"], row["stall_after"] = r["estimate"], None
            out.append(row)
        elif kind == "started":
            job, alloc, charge = args
            nodes = {names[int(i)] if int(i) < len(names) else f"#{i}": int(g) for i, g in alloc}
            out.append({"t": t, "type": "start", "job": job, "alloc": nodes, "charge": charge})
        elif kind == "preempted":
            job, reason, by, lost = args[0], args[1], args[2], args[3]
            out.append(
                {"t": t, "type": "preempt", "job": job, "reason": reason, "by": by, "lost_gpu_s": lost}
            )
        elif kind == "finished":
            out.append({"t": t, "type": "finish", "job": args[0]})
    if engine and (not out or out[-1]["type"] != "end"):
        out.append({"t": last_t, "type": "end"})
    return out
