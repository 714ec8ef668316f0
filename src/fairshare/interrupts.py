"""Interrupts (Ctrl-C, SIGTERM) that every part of a command sees, even when the exception they
raise is lost.

A signal handler raises where the program happens to be; inside a finalizer or a weakref callback
Python prints "Exception ignored" and goes on, and the interrupt would be lost. So the handlers
here also remember the signal: `check()` raises it again at the points that must not go on after
an interrupt (before an output folder is swapped into place), and `quiet_unraisable` keeps the
lost exception off the terminal.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class Terminated(BaseException):
    """SIGTERM, raised where the program is so that every `with` block cleans up on the way out."""


_received: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def received() -> int | None:
    """The first signal received while `handled()` was active, or None."""
    return _received[0] if _received else None


def check() -> None:
    """Raise the interrupt again if one was received (its first raise may have been lost)."""
    sig = received()
    if sig is not None:
        raise KeyboardInterrupt if sig == signal.SIGINT else Terminated


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
    _received.clear()
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for s, h in previous.items():
            signal.signal(s, h)
