"""Interrupts (Ctrl-C, SIGTERM) that every part of a command sees, even when the exception they
raise is lost.

A signal handler raises where the program happens to be; inside a finalizer or a weakref callback
Python prints "Exception ignored" and goes on, and the interrupt would be lost. So the handlers
here also remember the signal: `check()` raises it again at the points that must not go on after
an interrupt (before an output folder is swapped into place), and `quiet_unraisable` keeps the
lost exception off the terminal.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class Terminated(BaseException):
    """SIGTERM, raised where the program is so that every `with` block cleans up on the way out."""


class WorkerDied(Exception):
    """A worker process of the command ended before its work was done (killed, e.g. by the OOM
    killer). The CLI ends with one `error:` line and exit code 3 (README)."""


_received: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def received() -> int | None:
    """The first signal received while `handled()` was active, or None."""
    return _received[0] if _received else None


_watchers: list[Callable[[], None]] = []


def check() -> None:
    """Raise the interrupt again if one was received (its first raise may have been lost), or
    what a watcher raises (a worker process found dead). Long loops call it often (the replay
    every few hundred instants), so an interrupt is acted on within a second wherever it landed."""
    sig = received()
    if sig is not None:
        raise KeyboardInterrupt if sig == signal.SIGINT else Terminated
    for watcher in list(_watchers):
        watcher()


def watch(watcher: Callable[[], None]) -> None:
    """Call `watcher` at every check() until unwatch(); it raises to end the command."""
    _watchers.append(watcher)


def unwatch(watcher: Callable[[], None]) -> None:
    if watcher in _watchers:
        _watchers.remove(watcher)


def _quiet_unraisable(hook: Any) -> Any:
    def quiet(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt | Terminated):
            return  # remembered in `_received`; `check()` raises it where it can be handled
        hook(unraisable)

    return quiet


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt and Terminated, and are remembered (main thread
    only; elsewhere nothing changes)."""
    try:
        previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    hook = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(hook)
    if previous[signal.SIGINT] is not _handler:  # not nested in an outer handled() (the entry point)
        _received.clear()
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for s, h in previous.items():
            signal.signal(s, h)


def install() -> None:
    """The entry point's first act (fairshare.__main__): SIGINT and SIGTERM raise and are
    remembered for the whole life of the process, before the slow imports, and are unblocked
    (a process inherits its parent thread's signal mask)."""
    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
    if hasattr(signal, "pthread_sigmask"):  # inherited blocked (a parent's thread that deferred
        # them when it started us): a held signal would never reach the handler
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)
    early = getattr(sys.modules.get("fairshare"), "_early", None)  # the package's first instants
    if early and not _received:
        _received.append(early[0])


def exit_on_signal(flush: Callable[[], None]) -> None:
    """From now on a SIGINT or SIGTERM ends the process at once, with 128 + the signal (the
    command has finished: only the interpreter's shutdown is left, where a raised interrupt would
    print a traceback). `flush` is called first so the output is not lost."""

    def now(signum: int, frame: FrameType | None) -> None:
        try:
            flush()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGINT, now)
    signal.signal(signal.SIGTERM, now)
