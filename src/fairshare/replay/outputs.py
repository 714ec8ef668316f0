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
import math
import os
import shutil
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs.cluster import Cluster
from ..inputs.limits import MAX_MARKER_BYTES, MAX_OUTPUT_ENTRIES, MAX_OUTPUT_FILE_BYTES
from .results import ReplayOutput

MARKER = "complete.json"
REPORT = "report.html"
#: What wrote a folder (the marker's `fairshare_output`): a replay, or the service's audit export
#: (decisions.jsonl and events.jsonl of a live system, which `explain` reads alike).
REPLAY_KIND, EXPORT_KIND = "replay", "audit-export"
#: A folder of plain files a command wrote (`fairshare import slurm`'s site folder), every file
#: (subfolders included) listed with its size and SHA-256.
FILES_KIND = "files"
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


def write_files_marker(folder: Path, command: str) -> None:
    """The marker of a FILES_KIND folder: every regular file under `folder` (but the marker)."""
    listed = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER):
        listed[path.relative_to(folder).as_posix()] = _entry(path.read_bytes())
    body = {"fairshare_output": FILES_KIND, "command": command, "files": listed}
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


class Unsafe(InputError):
    """A path of an output folder that is not a regular file of bounded size (a symbolic link, a
    FIFO, a device, a folder, or too large), or a marker that is not one of ours."""


def _open_regular(path: Path, cap: int) -> tuple[int, int]:
    """An open descriptor of `path` and its size: a regular file (not a symbolic link, FIFO,
    device or socket; opening never blocks) of at most `cap` bytes, or an Unsafe error."""
    where = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # ELOOP: a symbolic link; ValueError: a NUL in the name
        if isinstance(exc, OSError) and os.path.islink(path):
            raise Unsafe(
                where, "", "is a symbolic link: an output folder holds only files its run wrote"
            ) from None
        raise Unsafe(where, "", f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO, device or socket"
            raise Unsafe(where, "", f"is {kind}, not a file a run wrote")
        if st.st_size > cap:
            raise Unsafe(where, "", f"{st.st_size:,} bytes, more than the {cap:,} such a file can have")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_at_most(fd: int, size: int) -> bytes:
    """The `size` bytes of an open file, and not one more (a file that grew is read no further)."""
    chunks, left = [], size + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _finite(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text} is not a finite number")
    return x


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a number JSON allows")


def strict_json(text: str | bytes) -> Any:
    """json.loads refusing NaN, Infinity and numbers that overflow (1E9999)."""
    return json.loads(text, parse_float=_finite, parse_constant=_no_constant)


def load_marker(folder: Path) -> dict[str, Any] | None:
    """The completion marker of a folder; None when there is none. A marker that cannot be ours
    (a symbolic link, a FIFO or device, too large, not JSON, not an object) is an Unsafe error."""
    path = folder / MARKER
    try:
        fd, size = _open_regular(path, MAX_MARKER_BYTES)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    try:
        data = _read_at_most(fd, size)
    finally:
        os.close(fd)
    try:
        body = strict_json(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise Unsafe(str(path), "", f"not a completion marker of a run: {exc}") from None
    if not isinstance(body, dict) or "fairshare_output" not in body:
        raise Unsafe(str(path), "", "not a completion marker of a run (no fairshare_output)")
    return body


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The completion marker of a folder, or None when it has none (or an unreadable one)."""
    try:
        return load_marker(folder)
    except InputError:
        return None


def safe_name(name: object, parts: int = 1) -> bool:
    """A name a run writes in a marker: 1..`parts` plain path parts (no NUL, no control
    characters, no `.`/`..`, not hidden)."""
    if not isinstance(name, str) or not name or len(name) > 4096:
        return False
    split = name.split("/")
    return len(split) <= parts and all(
        p and not p.startswith(".") and p.isprintable() and "\\" not in p for p in split
    )


def listed_files(marker: dict[str, Any], where: str) -> dict[str, tuple[int, str]]:
    """The files a marker lists, by name, with their size and SHA-256; an InputError when the list
    is not what a run writes (names with NUL or `..`, sizes that are not whole numbers)."""
    files = marker.get("files")
    if not isinstance(files, dict):
        raise InputError(where, "files", "missing or not an object: not a marker a run wrote")
    out = {}
    for name, entry in sorted(files.items()):
        if not safe_name(name, parts=3) or name == MARKER:
            raise InputError(where, "files", f"lists {name!r}, not a name a run writes")
        size = entry.get("bytes") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if (
            not isinstance(size, int)
            or isinstance(size, bool)
            or not 0 <= size <= MAX_OUTPUT_FILE_BYTES
            or not isinstance(digest, str)
            or len(digest) != 64
            or digest.strip("0123456789abcdef")
        ):
            raise InputError(where, f"files.{name}", "not a size and SHA-256 a run writes")
        out[name] = (size, digest)
    return out


def read_verified(path: Path, size: int, digest: str) -> bytes:
    """The bytes of `path`, which must be a regular file of exactly `size` bytes whose SHA-256 is
    `digest`; an InputError otherwise (read once: what is checked is what is returned)."""
    with _listed_file(path, size) as fd:
        data = _read_at_most(fd, size)
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
        raise _changed(path)
    return data


def verify_file(path: Path, size: int, digest: str) -> None:
    """As read_verified, hashing the file in pieces (memory stays small for a large file)."""
    with _listed_file(path, size) as fd:
        h, left = hashlib.sha256(), size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    if left != 1 or h.hexdigest() != digest:
        raise _changed(path)


@contextmanager
def _listed_file(path: Path, size: int) -> Iterator[int]:
    """An open descriptor of `path`, a regular file the marker lists with `size` bytes."""
    where = str(path)
    try:
        fd, actual = _open_regular(path, MAX_OUTPUT_FILE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(where, "", f"missing, though {MARKER} lists it: the folder is incomplete") from None
    try:
        if actual != size:
            raise InputError(
                where,
                "",
                f"{actual:,} bytes, but {MARKER} says {size}: the file was changed or cut short "
                "after the run wrote it; run the replay again",
            )
        yield fd
    finally:
        os.close(fd)


def _changed(path: Path) -> InputError:
    return InputError(
        str(path),
        "",
        f"its SHA-256 is not the one {MARKER} lists: the file was changed after the run wrote it; "
        "run the replay again",
    )


def verified_folder(folder: Path, reading: Collection[str] = ()) -> dict[str, Any]:
    """The marker of a complete replay folder, every file it lists checked (size and SHA-256;
    those in `reading` only for size: the caller reads them with read_listed, which checks them
    as they are read); an InputError saying what is wrong otherwise."""
    where = str(folder)
    marker = load_marker(folder)
    if marker is None or marker.get("fairshare_output") not in (REPLAY_KIND, EXPORT_KIND):
        raise InputError(
            where,
            "",
            f"not a complete replay output (no {MARKER}): the run that wrote it did not finish, or "
            "an older fairshare or another tool wrote it; run `fairshare compare` or `replay` again",
        )
    for name, (size, digest) in listed_files(marker, str(folder / MARKER)).items():
        if "/" in name:
            raise InputError(str(folder / MARKER), "files", f"lists {name!r}, not a name a run writes")
        if name in reading:
            _check_size(folder / name, size)
        else:
            verify_file(folder / name, size, digest)
    return marker


def _check_size(path: Path, size: int) -> None:
    try:
        fd, actual = _open_regular(path, MAX_OUTPUT_FILE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(
            str(path), "", f"missing, though {MARKER} lists it: the folder is incomplete"
        ) from None
    os.close(fd)
    if actual != size:
        raise InputError(
            str(path),
            "",
            f"{actual:,} bytes, but {MARKER} says {size}: the file was changed or cut short "
            "after the run wrote it; run the replay again",
        )


def output_folders(out: Path, marker: dict[str, Any]) -> list[str]:
    """The replay folders a compare or replay output's marker lists (relative, checked names)."""
    where = str(out / MARKER)
    listed = marker.get("folders")
    if not isinstance(listed, list) or not listed:
        raise InputError(where, "folders", "lists no replay folders: run the command again")
    if len(listed) > MAX_OUTPUT_ENTRIES:
        raise InputError(where, "folders", f"lists more than {MAX_OUTPUT_ENTRIES:,} folders")
    for i, name in enumerate(listed):
        if not safe_name(name, parts=2) or listed.index(name) != i:
            raise InputError(where, f"folders[{i}]", f"{name!r} is not a folder name a run writes")
    return [str(name) for name in listed]


def verified_output(out: Path, marker: dict[str, Any]) -> list[Path]:
    """The replay folders of a compare or replay output, after checking that the folders are
    real folders (no symbolic links) and that the root marker's sums match the report and each
    folder's complete.json. The replay files themselves are checked by verified_folder."""
    where = str(out / MARKER)
    folders = output_folders(out, marker)
    files = listed_files(marker, where)
    for name in files:
        if name != REPORT and not (name.endswith("/" + MARKER) and name[: -len(MARKER) - 1] in folders):
            raise InputError(where, "files", f"lists {name!r}, which a run does not write there")
    out_paths = []
    for name in folders:
        path = out
        for part in name.split("/"):
            path = path / part
            if path.is_symlink() or not path.is_dir():
                raise InputError(
                    str(path), "", "not a folder a run wrote (missing, a file or a symbolic link)"
                )
        entry = files.get(f"{name}/{MARKER}")
        if entry is None:
            raise InputError(where, "files", f"lists no sum for {name}/{MARKER}: an older fairshare wrote it")
        verify_file(path / MARKER, *entry)
        out_paths.append(path)
    if REPORT in files:
        verify_file(out / REPORT, *files[REPORT])
    return out_paths


def read_listed(folder: Path, marker: dict[str, Any], name: str) -> bytes | None:
    """The bytes of a file the folder's marker lists, checked again as they are read (None: not
    listed)."""
    files = listed_files(marker, str(folder / MARKER))
    if name not in files:
        return None
    return read_verified(folder / name, *files[name])


def read_jsonl(path: Path, data: bytes | None = None) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file (`data`: its bytes, already read); an InputError naming the
    line and column of anything that is not a JSON object (a cut-short line, garbage, bytes that
    are not UTF-8, numbers that overflow)."""
    where = str(path)
    if data is None:
        try:
            fd, size = _open_regular(path, MAX_OUTPUT_FILE_BYTES)
        except FileNotFoundError:
            raise InputError(where, "", "file not found") from None
        try:
            data = _read_at_most(fd, size)
        finally:
            os.close(fd)
    out = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(where, f"line {n}, column {exc.start + 1}", "not UTF-8 text") from None
        try:
            obj = strict_json(line)
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {n}, column {exc.colno}", f"not valid JSON: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise InputError(where, f"line {n}", f"not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError(where, f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
        out.append(obj)
    return out
