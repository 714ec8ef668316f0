"""What every command shares at run time: clean interrupts (Ctrl-C exits 130, SIGTERM 143, after
the `with` blocks on the way out have removed what was not finished), input warnings printed as
`warning: <file>: <where>: <message>`, and the progress of the replays."""

from __future__ import annotations

import math
import signal
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from . import interrupts
from .errors import InputWarning
from .inputs.limits import fmt_limit
from .interrupts import Terminated, WorkerDied

EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15
EXIT_WORKER_DIED = 3  # a worker process died (e.g. the OOM killer): README "Limits and bad input"


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
    """The command group: every error in one line (click's usage errors too: `error: --repeat: 0:
    ...`, exit 2), input warnings printed plainly, and clean interrupts. Ctrl-C exits 130 and
    SIGTERM 143, after every command has removed what it had not finished (README)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        with interrupts.handled():
            try:
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
                interrupts.check()  # an interrupt whose exception was lost (in a finalizer)
            except click.exceptions.NoArgsIsHelpError as exc:
                click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
                sys.exit(2)
            except click.ClickException as exc:
                click.echo(f"error: {one_line(exc)}", err=True)
                sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
            except click.Abort:  # Ctrl-C while click parsed the command line
                _exit_interrupted(interrupts.received() or signal.SIGINT)
            except WorkerDied as exc:
                sig = interrupts.received()  # a worker ended by the same Ctrl-C or SIGTERM
                if sig is not None:
                    _exit_interrupted(sig)
                click.echo(f"error: {exc}: nothing was written, the previous output is as it was", err=True)
                sys.exit(EXIT_WORKER_DIED)
            except KeyboardInterrupt:
                _exit_interrupted(signal.SIGINT)
            except Terminated:
                _exit_interrupted(signal.SIGTERM)
            except Exception:
                # the interrupt's exception can come out as another one where it landed (SIGTERM
                # during a C extension's import gives "ImportError: initialization failed"): still
                # the interrupt
                sig = interrupts.received()
                if sig is None:
                    raise
                _exit_interrupted(sig)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("always", InputWarning)
            warnings.showwarning = _show_warning
            return super().invoke(ctx)


def one_line(exc: click.ClickException) -> str:
    """A click error as the README's one line: `<option or argument>: <message>` (no usage
    block; the message on one line)."""
    message = " ".join(exc.format_message().split()) if not isinstance(exc, click.BadParameter) else ""
    where = ""
    if isinstance(exc, click.BadParameter):
        param = exc.param
        hint = exc.param_hint
        where = _param_name(param) if param is not None else hint if isinstance(hint, str) else ""
        message = " ".join(exc.message.split())
        if isinstance(exc, click.MissingParameter):
            kind = "argument" if isinstance(param, click.Argument) else "option"
            message = f"missing: the {kind} is required"
    elif isinstance(exc, click.NoSuchOption):
        where = exc.option_name
        near = f" (did you mean {', '.join(sorted(exc.possibilities or ()))}?)" if exc.possibilities else ""
        message = f"no such option{near}"
    elif isinstance(exc, click.BadOptionUsage):
        where = exc.option_name
    elif isinstance(exc, click.UsageError) and exc.ctx is not None:
        where = exc.ctx.command_path
    hint = ""
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        hint = f" (see `{ctx.command_path} --help`)"
    return f"{where}: {message}{hint}" if where else f"{message}{hint}"


class BoundedInt(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2
    """A whole number from `low` to `high`, its errors said as `VALUE: expected ...`."""

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            text = str(value).strip()
            if not text.lstrip("+-").isdigit() or len(text) > 40:
                self.fail(f"{value}: expected a whole number from {self.low:,} to {self.high:,}", param, ctx)
            n = int(text)
        if not self.low <= n <= self.high:
            self.fail(f"{value}: expected a whole number from {self.low:,} to {self.high:,}", param, ctx)
        return n


class BoundedFloat(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2
    """A finite number from `low` to `high` (NaN and infinities refused), its errors said as
    `VALUE: expected ...`."""

    name = "number"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(value, bool) or not math.isfinite(x) or not self.low <= x <= self.high:
            self.fail(
                f"{value}: expected a number from {fmt_limit(self.low)} to {fmt_limit(self.high)}", param, ctx
            )
        return x


def _exit_interrupted(sig: int) -> NoReturn:
    if sig == signal.SIGINT:
        click.echo("\ninterrupted: nothing unfinished was left behind", err=True)
        sys.exit(EXIT_INTERRUPTED)
    click.echo("terminated: nothing unfinished was left behind", err=True)
    sys.exit(EXIT_TERMINATED)


def _param_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return (param.human_readable_name or param.name or "").upper()


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
