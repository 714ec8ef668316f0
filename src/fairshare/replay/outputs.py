"""A replay's output folder (FORMATS.md "Outputs"): writing it whole or not at all, and reading it
back for `explain`.

A replay folder is written into a temporary sibling (`.<name>.partial`) and renamed into place
once every file is written; its last file, `complete.json`, lists the others with their sizes and
SHA-256 (an extra file, which FORMATS.md allows). A folder without it, or whose files do not match
it, did not come from a finished run: `explain` refuses it (`verified_folder`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs.cluster import Cluster
from .results import ReplayOutput

MARKER = "complete.json"
#: What wrote a folder (the marker's `fairshare_output`): a replay, or the service's audit export
#: (decisions.jsonl and events.jsonl of a live system, which `explain` reads alike).
REPLAY_KIND, EXPORT_KIND = "replay", "audit-export"
#: Files of a replay folder (FORMATS.md plus series.json), in the order they are written.
REPLAY_FILES = (
    "cluster.json",
    "events.jsonl",
    "decisions.jsonl",
    "metrics.json",
    "series.json",
    "policy.yaml",
)


def _entry(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def write_files(folder: Path, files: dict[str, bytes], marker: dict[str, Any]) -> None:
    """Write `files` and then the completion marker into `folder` (which must exist)."""
    listed = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        listed[name] = _entry(data)
    body = {**marker, "files": listed}
    (folder / MARKER).write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def write_replay(out: Path, cluster: Cluster, policy_text: str, output: ReplayOutput) -> None:
    """Write one replay folder whole: into `.<name>.partial` beside it, renamed to `out` when
    complete. An existing `out` is replaced (only once the new folder is complete)."""
    # UTF-8 whatever the locale: names may be non-ASCII, and the same replay gives the same bytes
    utf8 = "utf-8"
    nodes = json.dumps([n.as_json() for n in cluster.nodes], indent=1)
    decisions = "\n".join(output.decisions) + ("\n" if output.decisions else "")
    metrics = json.dumps(output.result.metrics, indent=2, allow_nan=False)
    files = {
        "cluster.json": (nodes + "\n").encode(utf8),
        "events.jsonl": ("\n".join(output.events) + "\n").encode(utf8),
        "decisions.jsonl": decisions.encode(utf8),
        "metrics.json": (metrics + "\n").encode(utf8),
        "series.json": (json.dumps(output.result.series.as_json()) + "\n").encode(utf8),
        "policy.yaml": policy_text.encode(utf8),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    try:
        r = output.result
        write_files(
            partial, files, {"fairshare_output": REPLAY_KIND, "policy": r.strategy, "scenario": r.scenario}
        )
        if out.exists():
            old = out.parent / f".{out.name}.old"
            os.replace(out, old)
            os.replace(partial, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The completion marker of a folder, or None when it has none (or an unreadable one)."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "fairshare_output" in data else None


def verified_folder(folder: Path) -> dict[str, Any]:
    """The marker of a complete replay folder; an InputError saying what is wrong otherwise."""
    where = str(folder)
    marker = read_marker(folder)
    if (
        marker is None
        or marker.get("fairshare_output") not in (REPLAY_KIND, EXPORT_KIND)
        or not isinstance(marker.get("files"), dict)
    ):
        raise InputError(
            where,
            "",
            f"not a complete replay output (no {MARKER}): the run that wrote it did not finish, or "
            "an older fairshare or another tool wrote it; run `fairshare compare` or `replay` again",
        )
    for name, entry in marker["files"].items():
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            raise InputError(
                str(path), "", f"missing, though {MARKER} lists it: the folder is incomplete"
            ) from None
        listed = entry.get("bytes") if isinstance(entry, dict) else None
        if size != listed:
            raise InputError(
                str(path),
                "",
                f"{size:,} bytes, but {MARKER} says {listed}: the file was changed or cut short "
                "after the run wrote it; run the replay again",
            )
    return marker


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file; an InputError naming the line and column of anything
    that is not a JSON object (a cut-short line, garbage, bytes that are not UTF-8)."""
    where = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except OSError as exc:
        raise InputError(where, "", f"cannot read: {exc.strerror or exc}") from None
    out = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(where, f"line {n}, column {exc.start + 1}", "not UTF-8 text") from None
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {n}, column {exc.colno}", f"not valid JSON: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise InputError(where, f"line {n}", f"not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError(where, f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
        out.append(obj)
    return out
