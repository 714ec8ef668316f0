"""The output folder of a command (`--out`), replaced as a whole or not at all.

A run writes everything (every replay folder, the report, the root `complete.json` listing them)
into a temporary sibling of OUT, `.<OUT>.tmp-<pid>-<random>`, and swaps it into place only when
all of it is written: on Linux with one atomic exchange of the two folders (renameat2
RENAME_EXCHANGE), elsewhere with two renames. Until then OUT keeps the previous complete output;
after it, OUT holds the new one; a run that fails, is interrupted (Ctrl-C, SIGTERM) or crashes
removes its temporary folder, and one killed outright (SIGKILL) leaves it behind, hidden, for the
next run on the same OUT to remove. Two runs never mix in one folder.

OUT may be new, empty, or the output of an earlier run (recognised by its `complete.json`, or by
holding nothing but replay outputs): anything else is refused rather than deleted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from .. import interrupts
from ..errors import InputError
from ..inputs.limits import MAX_OUTPUT_ENTRIES
from .outputs import (
    EXPORT_KIND,
    FILES_KIND,
    MARKER,
    REPLAY_KIND,
    REPORT,
    listed_files,
    load_marker,
    verified_folder,
    verified_output,
    verify_file,
)

_TMP = ".tmp-"
_OLD = ".old-"


class StagedOutput:
    """`with StagedOutput(out) as stage:` write into `stage`; on a clean exit it becomes `out`.

    The constructor checks `out` (an InputError naming `option` when it cannot be used), so a bad
    `--out` is refused before any replay runs; `begin()` creates the temporary folder, and leaving
    the block swaps it in (an InputError if OUT cannot be replaced) or removes it.
    """

    def __init__(self, out: Path, command: str, option: str = "--out", root_marker: bool = True) -> None:
        """`root_marker` False: the command writes its own complete.json at the top (a folder
        like a replay folder, e.g. `audit export`), so none listing replay folders is added."""
        self.shown = _shown(out)
        self.option = option
        self.command = command
        self.root_marker = root_marker
        self.out = _usable(out, option)
        self.stage: Path | None = None

    def __enter__(self) -> Path:
        return self.stage if self.stage is not None else self.begin()

    def begin(self) -> Path:
        """Create the temporary folder (an InputError naming the option if it cannot be)."""
        parent = self.out.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _remove_stale(self.out)
            stage = parent / f".{self.out.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
            stage.mkdir()
        except OSError as exc:
            raise InputError(
                self.option, str(self.shown), f"cannot write there: {exc.strerror or exc}"
            ) from None
        self.stage = stage
        return stage

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stage, self.stage = self.stage, None
        if stage is None:
            return
        if kind is not None:
            with _signals_deferred():
                shutil.rmtree(stage, ignore_errors=True)
            return
        try:
            interrupts.check()  # an interrupt whose exception was lost: do not swap
            if self.root_marker:
                _write_root_marker(stage, self.command)
            # what OUT holds now is checked again (a file may have been put there during the run)
            listing = self._still_replaceable()
        except BaseException as err:
            with _signals_deferred():
                shutil.rmtree(stage, ignore_errors=True)
            if isinstance(err, OSError):
                raise InputError(
                    self.option, str(self.shown), f"cannot write there: {err.strerror or err}"
                ) from None
            raise
        with _signals_deferred():  # a Ctrl-C or SIGTERM now waits until OUT is in order
            try:
                interrupts.check()
                if _listing(self.out) != listing:
                    raise InputError(
                        self.option,
                        str(self.shown),
                        "changed while the run was writing its output: left as it is (run again)",
                    )
                _swap(stage, self.out)
            except OSError as err:  # e.g. OUT is a mount point: it cannot be renamed
                shutil.rmtree(stage, ignore_errors=True)
                raise InputError(
                    self.option, str(self.shown), f"cannot be replaced: {err.strerror or err}"
                ) from None
            except BaseException:
                shutil.rmtree(stage, ignore_errors=True)
                raise

    def _still_replaceable(self) -> list[tuple[str, bool, int, int]] | None:
        """What OUT holds now (None: nothing), after checking again that it may be replaced."""
        if not os.path.lexists(self.out):
            return None
        if self.out.is_symlink() or not self.out.is_dir():
            raise InputError(self.option, str(self.shown), "is no longer a folder: left as it is")
        _check_replaceable(self.out, self.option, str(self.shown))
        return _listing(self.out)


def _listing(out: Path) -> list[tuple[str, bool, int, int]] | None:
    """Every entry under `out` with its type, size and modification time (None: no `out`)."""
    if not os.path.lexists(out):
        return None
    found: list[tuple[str, bool, int, int]] = []
    stack = [""]
    while stack and len(found) <= MAX_OUTPUT_ENTRIES:
        rel = stack.pop()
        with os.scandir(out / rel if rel else out) as it:
            for entry in it:
                path = f"{rel}/{entry.name}" if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                is_dir = entry.is_dir(follow_symlinks=False)
                found.append((path, is_dir, st.st_size, st.st_mtime_ns))
                if is_dir:
                    stack.append(path)
    return sorted(found)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the duration (they are delivered when it ends), so the swap and
    the removal of the temporary folder are not cut short by an interrupt."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _usable(out: Path, option: str) -> Path:
    """`out` resolved, or an InputError saying why it cannot be an output folder."""
    shown = _shown(out)
    if shown in ("", "."):
        raise InputError(
            option, repr(shown), "is the current folder: give a folder of its own, e.g. --out out"
        )
    try:
        full = out.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as exc:
        raise InputError(option, shown, f"cannot be used: {exc}") from None
    if full == cwd or full in cwd.parents:
        raise InputError(
            option,
            shown,
            "is the current folder or holds it: a run replaces its output folder as a whole; give a "
            "folder of its own, e.g. --out out",
        )
    if full.parent == full:
        raise InputError(option, shown, "is the root of the file system: give a folder of its own")
    try:
        for up in (full, *full.parents):
            if os.path.lexists(up) and not up.is_dir():
                kind = _kind(up)
                what = f"is {kind}" if up == full else f"is under {up}, which is {kind}"
                raise InputError(option, shown, f"{what}: give a folder")
        if full.is_dir():
            _check_replaceable(full, option, shown)
    except OSError as exc:  # e.g. a name longer than the file system takes
        raise InputError(option, shown, f"cannot be used: {exc.strerror or exc}") from None
    return full


def _shown(out: Path) -> str:
    """The path as an error line shows it: quoted when it holds a line break or control character."""
    text = str(out)
    return text if text.isprintable() else repr(text)


def _kind(path: Path) -> str:
    """What a path that is not a folder is, as an error says it."""
    mode = path.lstat().st_mode
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISLNK(mode):
        return "a symbolic link to no folder"
    return "a FIFO, device or socket"


def _check_replaceable(out: Path, option: str, shown: str) -> None:
    """An existing OUT must be truly empty (a hidden entry such as `.git` or `.env` counts) or
    hold exactly the files a complete earlier run listed, each with its SHA-256: nothing else is
    ever deleted or overwritten."""
    try:
        with os.scandir(out) as entries:
            first = next(iter(sorted(e.name for e in entries)), None)
    except OSError as exc:
        raise InputError(option, shown, f"cannot be read: {exc.strerror or exc}") from None
    if first is None:
        return
    try:
        marker = load_marker(out)
    except InputError as exc:
        raise _refusal(
            option, shown, f"{out / MARKER}, which is not the marker of a run ({exc.message})"
        ) from None
    if marker is None:
        raise _refusal(option, shown, f"{out / first}, which is not a fairshare output")
    try:
        expected = _written_by_run(out, marker)
        _same_entries(out, expected)
    except InputError as exc:
        raise _refusal(
            option, shown, f"{exc.where}{': ' + exc.at if exc.at else ''}: {exc.message}"
        ) from None
    except OSError as exc:
        raise InputError(option, shown, f"cannot be read: {exc.strerror or exc}") from None


def _refusal(option: str, shown: str, what: str) -> InputError:
    return InputError(
        option,
        shown,
        f"holds {what}: a run replaces its output folder as a whole, so --out must be a new or truly "
        "empty folder or exactly the output of an earlier run (nothing else is deleted)",
    )


def _written_by_run(out: Path, marker: dict[str, Any]) -> dict[str, str]:
    """Every path under `out` the run that wrote `marker` wrote ("dir" or "file"), after checking
    each file's size and SHA-256 against the markers (an InputError on the first that differs)."""
    kind = marker.get("fairshare_output")
    expected: dict[str, str] = {MARKER: "file"}
    if kind in (REPLAY_KIND, EXPORT_KIND):
        verified_folder(out)
        expected.update((name, "file") for name in listed_files(marker, str(out / MARKER)))
        return expected
    if kind == FILES_KIND:
        for name, (size, digest) in listed_files(marker, str(out / MARKER)).items():
            verify_file(out / name, size, digest)
            expected[name] = "file"
            parts = name.split("/")
            expected.update(("/".join(parts[:i]), "dir") for i in range(1, len(parts)))
        return expected
    if kind != "output":
        raise InputError(str(out / MARKER), "fairshare_output", f"unknown kind of output {kind!r}")
    folders = verified_output(out, marker)
    expected.update((name, "file") for name in listed_files(marker, str(out / MARKER)))
    for folder in folders:
        rel = folder.relative_to(out).as_posix()
        head = rel.split("/")[0]
        expected[head] = "dir"
        expected[rel] = "dir"
        sub = verified_folder(folder)
        expected.update((f"{rel}/{name}", "file") for name in listed_files(sub, str(folder / MARKER)))
        expected[f"{rel}/{MARKER}"] = "file"
    return expected


def _same_entries(out: Path, expected: dict[str, str]) -> None:
    """`out` holds exactly `expected` (relative path -> "dir" or "file"): no other entry, hidden
    or not, no symbolic link, FIFO or device (an InputError naming the first one found)."""
    seen = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(out / rel if rel else out) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            seen += 1
            if seen > MAX_OUTPUT_ENTRIES:
                raise InputError(str(out), "", f"more than {MAX_OUTPUT_ENTRIES:,} entries")
            path = f"{rel}/{entry.name}" if rel else entry.name
            want = expected.get(path)
            if entry.is_symlink() or want is None:
                raise InputError(str(out / path), "", "no run wrote it")
            if want == "dir" and entry.is_dir(follow_symlinks=False):
                stack.append(path)
            elif want != "file" or not entry.is_file(follow_symlinks=False):
                raise InputError(str(out / path), "", "no run wrote it")


def _write_root_marker(stage: Path, command: str) -> None:
    folders = sorted(
        str(p.parent.relative_to(stage).as_posix())
        for p in [*stage.glob(f"*/{MARKER}"), *stage.glob(f"*/*/{MARKER}")]
        if not any(part.startswith(".") for part in p.relative_to(stage).parts)
    )
    listed = [f"{f}/{MARKER}" for f in folders] + ([REPORT] if (stage / REPORT).is_file() else [])
    files = {}
    for name in sorted(listed):
        data = (stage / name).read_bytes()
        files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    body: dict[str, Any] = {
        "fairshare_output": "output",
        "command": command,
        "folders": folders,
        "report": REPORT if (stage / REPORT).is_file() else None,
        "files": files,
    }
    (stage / MARKER).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def _swap(stage: Path, out: Path) -> None:
    """Put `stage` in place of `out`: an atomic exchange where the system has one."""
    if not out.exists():
        os.rename(stage, out)
        return
    if _exchange(stage, out):
        shutil.rmtree(stage, ignore_errors=True)  # now the previous output
        return
    old = out.parent / f".{out.name}{_OLD}{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(out, old)
    os.rename(stage, out)
    shutil.rmtree(old, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _remove_stale(out: Path) -> None:
    """Remove what earlier runs on `out` left behind when killed (their process is gone); if one
    was killed between the two renames of a swap, put its previous output back first."""
    prefix = f".{out.name}"
    leftovers = []
    for entry in out.parent.iterdir():
        if not entry.name.startswith(prefix):
            continue
        rest = entry.name[len(prefix) :]
        for kind in (_TMP, _OLD):
            # exactly the names a run gives them (`<pid>-<8 hex digits>`), real folders only
            pid, _, tag = rest[len(kind) :].partition("-")
            if (
                rest.startswith(kind)
                and pid.isdigit()
                and len(tag) == 8
                and not tag.strip("0123456789abcdef")
                and entry.is_dir()
                and not entry.is_symlink()
                and not _alive(int(pid))
            ):
                leftovers.append((kind, entry))
    for kind, entry in sorted(leftovers):
        if kind == _OLD and not out.exists():
            os.rename(entry, out)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a leftover of this process's pid is from an earlier process (pid reuse)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
