"""What every command shares at run time: clean interrupts (Ctrl-C exits 130, SIGTERM 143, after
the `with` blocks on the way out have removed what was not finished), input warnings printed as
`warning: <file>: <where>: <message>`, and the progress of the replays."""

from __future__ import annotations

import signal
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from . import interrupts
from .errors import InputWarning
from .interrupts import Terminated

EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Input warnings as `warning: <file>: <where>: <message>`; others without a source path."""
    click.echo(f"warning: {message}", err=True)


class Main(click.Group):
    """The command group: input warnings printed plainly, and clean interrupts. Ctrl-C exits 130
    and SIGTERM 143, after every command has removed what it had not finished (README)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with interrupts.handled(), warnings.catch_warnings():
                warnings.simplefilter("always", InputWarning)
                warnings.showwarning = _show_warning
                result = super().invoke(ctx)
                interrupts.check()  # an interrupt whose exception was lost (in a finalizer)
                return result
        except KeyboardInterrupt:
            _exit_interrupted(ctx, signal.SIGINT)
        except Terminated:
            _exit_interrupted(ctx, signal.SIGTERM)
        except Exception:
            # the interrupt's exception can come out as another one where it landed (SIGTERM during
            # a C extension's import gives "ImportError: initialization failed"): still the interrupt
            sig = interrupts.received()
            if sig is None:
                raise
            _exit_interrupted(ctx, sig)


def _exit_interrupted(ctx: click.Context, sig: int) -> None:
    if sig == signal.SIGINT:
        click.echo("\ninterrupted: nothing unfinished was left behind", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    click.echo("terminated: nothing unfinished was left behind", err=True)
    ctx.exit(EXIT_TERMINATED)


class Progress:
    """Progress of one comparison's replays: a bar on a terminal; elsewhere (CI, `2>file`) one
    line per finished replay, so a long run is never silent."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.bar: Any = None
        self.started = time.monotonic()
        if sys.stderr.isatty():
            self.bar = click.progressbar(length=total, label=f"{label:<18}", file=sys.stderr)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def finished(self, policy: str) -> None:
        if self.bar is None:
            took = time.monotonic() - self.started
            click.echo(f"replayed {self.label} under {policy} ({took:.1f} s)", err=True)
            self.started = time.monotonic()


@contextmanager
def progress(label: str, total: int) -> Iterator[Progress]:
    progress = Progress(label, total)
    if progress.bar is None:
        yield progress
        return
    with progress.bar:
        yield progress
