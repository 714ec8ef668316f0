"""How the `fairshare` command runs a click command (`run`): interrupts are handled from the first
instant, before the slow imports (click, numpy), so a Ctrl-C or SIGTERM at any moment ends the
command with its exit code and one line, never a traceback (README "Limits and bad input").
fairshare.__main__ runs the CLI with it; `python -m fairshare.cli` too."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from . import interrupts

_CODES: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}
_SAID: dict[int, str] = {signal.SIGINT: "\ninterrupted", signal.SIGTERM: "terminated"}


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def run(command: Callable[[], Any]) -> None:
    """Run the click command (called after the handlers are in place: it may import the CLI) and
    exit with its code; an interrupt anywhere, imports included, exits 130 or 143 with one line."""
    interrupts.install()
    code: str | int | None = 0
    try:
        interrupts.check()  # one that came while the package was imported
        command()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int | str) or exc.code is None else 1
        if code in (130, 143) or interrupts.received() is not None:
            _end_now(code)
    except (KeyboardInterrupt, interrupts.Terminated, Exception):
        sig = interrupts.received()
        if sig is None:  # not an interrupt: a bug, shown as Python shows it
            raise
        sys.stderr.write(f"{_SAID[sig]}: nothing unfinished was left behind\n")
        _end_now(_CODES[sig])
    interrupts.exit_on_signal(_flush)
    sys.exit(code)


def _end_now(code: object) -> None:
    """Interrupted: every `with` block has cleaned up. End now, while the exception still holds
    the replay's objects: freeing millions of them (and the interpreter's own teardown) would
    take seconds on a loaded machine."""
    interrupts.exit_on_signal(_flush)
    _multiprocessing_clean_up()
    _flush()
    os._exit(code if isinstance(code, int) else 1)


def _multiprocessing_clean_up() -> None:
    """What os._exit skips of multiprocessing's own exit: its finalizers (exit priority 0 and up),
    which unlink the named semaphores of a worker pool's queues. The exception being handled can
    still hold them (an interrupt raised while the chart workers were being set up keeps that
    frame's queues alive), and a semaphore not unlinked makes multiprocessing's resource tracker
    print "leaked semaphore objects" after the command's last line."""
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        with contextlib.suppress(Exception):
            util._run_finalizers(0)
