"""The `fairshare` command (and `python -m fairshare`): interrupts are handled from the first
instant, before the slow imports (click, numpy), so a Ctrl-C or SIGTERM at any moment ends the
command with its exit code and one line, never a traceback (README "Limits and bad input")."""

from __future__ import annotations

from ._entry import run


def _cli() -> None:
    from .cli import main as cli  # imported once the interrupt handlers are in place

    cli()


def main() -> None:
    run(_cli)


if __name__ == "__main__":
    main()
