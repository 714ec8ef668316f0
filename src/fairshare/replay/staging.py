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
import json
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from .. import interrupts
from ..errors import InputError
from .outputs import MARKER, REPLAY_FILES, read_marker

REPORT = "report.html"
_TMP = ".tmp-"
_OLD = ".old-"


class StagedOutput:
    """`with StagedOutput(out) as stage:` write into `stage`; on a clean exit it becomes `out`.

    The constructor checks `out` (an InputError naming `option` when it cannot be used), so a bad
    `--out` is refused before any replay runs; `begin()` creates the temporary folder, and leaving
    the block swaps it in (an InputError if OUT cannot be replaced) or removes it.
    """

    def __init__(self, out: Path, command: str, option: str = "--out") -> None:
        self.shown = out
        self.option = option
        self.command = command
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
        with _signals_deferred():  # a Ctrl-C or SIGTERM now waits until OUT is in order
            if kind is not None:
                shutil.rmtree(stage, ignore_errors=True)
                return
            try:
                interrupts.check()  # an interrupt whose exception was lost: do not swap
                _write_root_marker(stage, self.command)
                _swap(stage, self.out)
            except OSError as err:  # e.g. OUT is a mount point: it cannot be renamed
                shutil.rmtree(stage, ignore_errors=True)
                raise InputError(
                    self.option, str(self.shown), f"cannot be replaced: {err.strerror or err}"
                ) from None
            except BaseException:
                shutil.rmtree(stage, ignore_errors=True)
                raise


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
    shown = str(out)
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
    for up in (full, *full.parents):
        if up.exists() and not up.is_dir():
            what = "is a file" if up == full else f"is under {up}, which is a file"
            raise InputError(option, shown, f"{what}: give a folder")
    if full.is_dir():
        _check_replaceable(full, option, shown)
    return full


def _check_replaceable(out: Path, option: str, shown: str) -> None:
    """An existing OUT must be empty or the output of an earlier run: nothing else is deleted."""
    marker = read_marker(out)
    if marker is not None and marker.get("fairshare_output") == "output":
        return
    try:
        for entry in sorted(out.iterdir()):
            stray = _stray(entry, depth=0)
            if stray is not None:
                raise InputError(
                    option,
                    shown,
                    f"already holds {stray}, which is not a fairshare output: a run replaces its output "
                    "folder as a whole, so --out must be a new or empty folder or the output of an earlier "
                    "run",
                )
    except OSError as exc:
        raise InputError(option, shown, f"cannot be read: {exc.strerror or exc}") from None


def _stray(entry: Path, depth: int) -> Path | None:
    """The first entry below `entry` that an output folder would not hold (None: all fine).
    An output holds report.html and complete.json at the top, replay folders (holding only
    replay files) one or two levels down, and hidden leftovers of interrupted runs."""
    if entry.name.startswith("."):
        return None
    if entry.is_file():
        ok = entry.name in (REPORT, MARKER) if depth == 0 else entry.name in (*REPLAY_FILES, MARKER)
        return None if ok else entry
    if not entry.is_dir() or depth >= 2:
        return entry
    for sub in sorted(entry.iterdir()):
        stray = _stray(sub, depth + 1)
        if stray is not None:
            return stray
    return None


def _write_root_marker(stage: Path, command: str) -> None:
    folders = sorted(
        str(p.parent.relative_to(stage).as_posix())
        for p in [*stage.glob(f"*/{MARKER}"), *stage.glob(f"*/*/{MARKER}")]
        if not any(part.startswith(".") for part in p.relative_to(stage).parts)
    )
    body: dict[str, Any] = {
        "fairshare_output": "output",
        "command": command,
        "folders": folders,
        "report": REPORT if (stage / REPORT).is_file() else None,
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
            if rest.startswith(kind):
                pid = rest[len(kind) :].split("-", 1)[0]
                if pid.isdigit() and not _alive(int(pid)):
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
