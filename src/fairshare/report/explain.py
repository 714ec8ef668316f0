"""`fairshare explain`: the decisions that touched one job, with their evidence, and why it waited;
with `--at T`, its place in line at T in a replay of the inputs (the live explain's function)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._units import fmt_duration
from ..core.queue import Place, place_in_line, queue_order
from ..errors import InputError
from ..replay.outputs import (
    EXPORT_KIND,
    MARKER,
    REPLAY_KIND,
    load_marker,
    read_jsonl,
    read_listed,
    verified_folder,
    verified_output,
)

if TYPE_CHECKING:
    from ..replay.loaded import Inputs
    from ..replay.sim import Simulator

HOLD_TEXT = {
    "no_capacity": "not enough free GPUs of an allowed type",
    "fragmented": "enough GPUs were free in total, but not on nodes that fit its shape",
    "reserved": "the free GPUs were reserved for a waiting job ahead of it",
    "no_victims": "no run could be preempted for it (all protected, or no group more over-served)",
}


def replay_folders(out: Path) -> list[Path]:
    """The complete replay folders at `out`: `out` itself, or those a compare or replay output
    lists in its complete.json. A folder that did not come from a finished run, or whose files are
    not the ones its run wrote (sizes and SHA-256 sums), is refused."""
    marker = load_marker(out)
    kind = marker.get("fairshare_output") if marker is not None else None
    if kind in (REPLAY_KIND, EXPORT_KIND) or (marker is None and (out / "events.jsonl").exists()):
        verified_folder(out, reading=("events.jsonl", "decisions.jsonl"))  # explain() reads them
        return [out]
    if marker is not None and kind == "output":
        return verified_output(out, marker)
    if marker is not None:
        raise InputError(str(out / MARKER), "fairshare_output", f"unknown kind of output {kind!r}")
    if out.is_dir() and (any(out.glob("*/events.jsonl")) or any(out.glob("*/*/events.jsonl"))):
        raise InputError(
            str(out),
            "",
            f"not a complete fairshare output (no {MARKER}): the run that wrote it did not finish, "
            "or an older fairshare wrote it; run `fairshare compare` again",
        )
    raise InputError(
        str(out), "", "no events.jsonl here or in a policy folder below (run `fairshare compare` first)"
    )


def explain_all(out: Path, job: str) -> str:
    """`explain` for every replay folder at `out` that holds the job (a scenario without it is
    named, not an error); an InputError when none does."""
    folders = replay_folders(out)
    texts, without = [], []
    for folder in folders:
        try:
            texts.append(explain(folder, job))
        except JobNotFound:
            without.append(folder)
    if not texts:
        where = str(out / "events.jsonl") if folders == [out] else str(out)
        raise InputError(
            where, "", f"no job {job!r} in {'this replay' if folders == [out] else 'any replay here'}"
        )
    if without:
        texts.append(f"job {job} is not in: {', '.join(str(f) for f in without)}")
    return "\n\n".join(texts)


class JobNotFound(InputError):
    """The job is not in a replay's events."""


def _fmt_evidence(d: dict[str, Any]) -> str:
    # seq and policy_version: the chain fields of a live service's `audit export`
    skip = {"t", "decision", "job", "seq", "policy_version"}
    parts = []
    for k, v in d.items():
        if k in skip:
            continue
        if k == "walk" and isinstance(v, list):
            steps = []
            for w in v:
                r = f" over {w['runner_up']} ({_num(w['runner_up_priority'])})" if w.get("runner_up") else ""
                steps.append(f"{w['group']} ({_num(w['priority'])}){r}")
            parts.append("fair-share walk: " + " > ".join(steps))
        elif isinstance(v, float):
            parts.append(f"{k}={_num(v)}")
        else:
            parts.append(f"{k}={v}")
    return "; ".join(parts)


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def explain(folder: Path, job: str) -> str:
    """A job's decisions and waits in one complete replay folder: every file read is the one its
    complete.json lists (size and SHA-256 checked as it is read)."""
    events_path = folder / "events.jsonl"
    marker = verified_folder(folder, reading=("events.jsonl", "decisions.jsonl"))
    data = read_listed(folder, marker, "events.jsonl")
    if data is None:
        raise InputError(str(folder / MARKER), "files", "lists no events.jsonl")
    events = [e for e in read_jsonl(events_path, data) if e.get("job") == job]
    if not events:
        raise JobNotFound(str(events_path), "", f"no job {job!r} in this replay")
    decisions_path = folder / "decisions.jsonl"
    listed = read_listed(folder, marker, "decisions.jsonl")
    recorded = listed is not None
    decisions = (
        [d for d in read_jsonl(decisions_path, listed) if d.get("job") == job or d.get("by") == job]
        if listed is not None
        else []
    )
    try:
        return _text(folder, job, events, decisions, recorded, as_run=marker.get("policy") == "as-run")
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError, IndexError) as exc:
        raise InputError(
            str(events_path),
            "",
            f"an event or decision of job {job} lacks a field or has one of the wrong type ({exc!r}): "
            "the file does not follow FORMATS.md",
        ) from None


def _text(
    folder: Path,
    job: str,
    events: list[dict[str, Any]],
    decisions: list[dict[str, Any]],
    recorded: bool,
    as_run: bool,
) -> str:
    sub = events[0]
    lines = [
        f"job {job} ({folder}): group {sub['group']}, class {sub['class']}, {sub['gpus']} GPU(s) on "
        f"{sub['nodes']} node(s), work {fmt_duration(sub['work'])}, "
        f"protected {fmt_duration(sub['protected'])}"
        + (f", deadline t={sub['deadline']:g}s" if sub.get("deadline") is not None else "")
    ]
    lines.append("timeline:")
    for e in events:
        extra = ""
        if e["type"] == "start":
            extra = f" on {', '.join(f'{n}:{g}' for n, g in e['alloc'].items())}, charge {e['charge']:g}/s"
        elif e["type"] == "preempt" and e.get("recorded"):  # as-run: a run the site's Slurm requeued
            extra = f" (recorded: {e['recorded']}, lost {e['lost_gpu_s'] / 3600:.2f} GPU-h)"
        elif e["type"] == "preempt":
            extra = f" ({e['reason']}, by {e['by']}, lost {e['lost_gpu_s'] / 3600:.2f} GPU-h)"
        lines.append(f"  t={e['t']:>12.1f}  {e['type']}{extra}")
    lines.extend(_forecast(events, decisions, job))
    lines.append("decisions:")
    if not recorded:
        lines.append(f"  none recorded: {folder / 'decisions.jsonl'} does not exist")
    elif not decisions:
        lines.append("  none about this job")
    for d in decisions:
        who = "" if d.get("job") == job else f" (on {d['job']}, made for this job)"
        lines.append(f"  t={d['t']:>12.1f}  {d['decision']}{who}: {_fmt_evidence(d)}")
    if as_run:
        lines.append("why it waited: as-run is the recorded history; the site's scheduler decided and")
        lines.append("  recorded no reasons (compare its waits with a model's in the fidelity section)")
    else:
        lines.extend(_why_waited(events, [d for d in decisions if d.get("job") == job]))
    return "\n".join(lines)


def _forecast(events: list[dict[str, Any]], decisions: list[dict[str, Any]], job: str) -> list[str]:
    """The start forecast made when the job arrived (replays run with --forecast), and the actual."""
    out = []
    starts = [e["t"] for e in events if e["type"] == "start"]
    for d in decisions:
        if d.get("decision") != "forecast" or d.get("job") != job:
            continue
        made, at = d["t"], d.get("start_at")
        actual = next((t for t in starts if t >= made), None)
        said = f"start at t={at:.1f}" if at is not None else "no start in the run-forward"
        if actual is None:
            got = "it never started"
        elif at is None:
            got = f"it started at t={actual:.1f}"
        else:
            late = actual - at
            when = (
                "on time" if late == 0 else f"{fmt_duration(abs(late))} {'later' if late > 0 else 'earlier'}"
            )
            got = f"it started at t={actual:.1f} ({when})"
        out.append(f"forecast at t={made:.1f}: {said}; {got}")
    return out


def _why_waited(events: list[dict[str, Any]], decisions: list[dict[str, Any]]) -> list[str]:
    out = ["why it waited:"]
    spells: list[tuple[float, float | None]] = []
    since: float | None = None
    for e in events:
        if e["type"] in ("submit", "preempt"):
            since = e["t"]
        elif e["type"] == "start" and since is not None:
            spells.append((since, e["t"]))
            since = None
    if since is not None:
        spells.append((since, None))
    for a, b in spells:
        span = f"{fmt_duration(b - a)}" if b is not None else "until the end of the replay"
        holds = [
            d for d in decisions if d["decision"] == "hold" and a <= d["t"] and (b is None or d["t"] <= b)
        ]
        if b is not None and b - a <= 0:
            out.append(f"  from t={a:.1f}: started at once")
            continue
        out.append(f"  from t={a:.1f}, waited {span}:")
        if not holds:
            out.append(
                "    it was never tried: jobs ahead of it in the order (higher priority groups or earlier "
                "submits) took the capacity as it freed up"
            )
        for h in holds:
            out.append(f"    t={h['t']:.1f}: {h['reason']} — {HOLD_TEXT.get(h['reason'], h['reason'])}")
        for r in decisions:
            if r["decision"] == "reserve" and a <= r["t"] and (b is None or r["t"] <= b):
                out.append(f"    t={r['t']:.1f}: capacity reserved for it on {', '.join(r['nodes'])}")
    return out


def replay_to(inputs: Inputs, strategy: str, t: float) -> Simulator:
    """A replay of the inputs under `strategy` stopped after the instant t (or the last one before
    it), each pass keeping the queue's order as the live loop does (Simulator keep_order)."""
    from ..replay.runner import simulator

    sim = simulator(inputs, strategy, keep_order=True)
    sim.run(until=t)
    return sim


def place_of(sim: Simulator, job: str) -> Place | None:
    """The job's place in the replay's queue now (None unless it waits): the queue and the place
    come from the functions the live queue and the live explain use (fairshare.core.queue), over
    the order of the replay's last pass."""
    pending = sim.engine.pending.jobs
    if job not in pending:
        return None
    return place_in_line(queue_order(sim.order, pending), job, pending, sim.setup.tree)


def explain_at(inputs: Inputs, strategy: str, job: str, t: float) -> str:
    """`fairshare explain --at T`: the job's state at t in a replay of the inputs, and while it
    waits its place in line, in its group's queue and the groups whose jobs are ahead of it. An
    InputError if the inputs have no such job."""
    request = next((j.request for j in inputs.jobs if j.id == job), None)
    if request is None:
        raise InputError("--job", job, "no such job in the inputs")
    sim = replay_to(inputs, strategy, t)
    place = place_of(sim, job)
    e = sim.engine
    head = f"job {job} at t={t:.1f} under {strategy}"
    if place is None:
        if request.submit > e.t:
            return f"{head}: not submitted yet (it is submitted at t={request.submit:.1f})"
        return f"{head}: {'running' if job in e.running else 'no longer waiting (it ended)'}"
    paths = inputs.tree.paths
    lines = [
        f"{head}: waiting; #{place.position} of {place.queue_length} in the queue, "
        f"#{place.group_position} of {place.group_queue_length} in {request.group}'s queue"
        + (f" ({place.same_group_ahead} of its group's jobs ahead)" if place.same_group_ahead else ""),
        "  (the order of the last pass at or before then, as the live queue shows it)",
    ]
    if place.ahead:
        lines.append("jobs ahead of it from other groups:")
        for a in place.ahead:
            lines.append(
                f"  {paths[a.side]}: {a.jobs} job(s), {a.gpus} GPU(s) (against its side {paths[a.mine]})"
            )
    return "\n".join(lines)
