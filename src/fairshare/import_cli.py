"""`fairshare import slurm`: a Slurm site's files (or, with --live, its commands) -> a site folder."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from .errors import InputError

LIVE_ASSOC_FORMAT = "Cluster,Account,User,ParentName,Share"


@click.group("import")
def import_group() -> None:
    """Import a site's own history and settings (docs/own-cluster.md)."""


def _fail(exc: InputError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


@import_group.command("slurm")
@click.option(
    "--sacct",
    "sacct_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="`sacct -a -X -P [-D] --format=...` output (repeat for several files).",
)
@click.option(
    "--assoc",
    type=click.Path(path_type=Path, dir_okay=False),
    help="`sacctmgr -P show assoc` output or a `sacctmgr dump` file.",
)
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="`scontrol show config` output or slurm.conf.",
)
@click.option(
    "--nodes",
    type=click.Path(path_type=Path, dir_okay=False),
    help="`scontrol -o show node` output or slurm.conf (default: --config when it is a slurm.conf).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="The site folder to write.")
@click.option(
    "--live",
    is_flag=True,
    help="Run the four read-only commands (sacct, sacctmgr, scontrol) here instead of reading files.",
)
@click.option(
    "-S", "--start", "start", help="The span's start (ISO date or datetime; with --live passed to sacct -S)."
)
@click.option(
    "-E", "--end", "end", help="The span's end (default: the latest time in the history; with --live: now)."
)
@click.option("--skip-bad", is_flag=True, help="Skip bad rows with a counted warning instead of failing.")
@click.option(
    "--anonymize", is_flag=True, help="Replace users and accounts by stable pseudonyms (keyed hashes)."
)
@click.option(
    "--anonymize-key",
    envvar="FAIRSHARE_ANONYMIZE_KEY",
    default="fairshare",
    show_default=False,
    help="The key of the pseudonyms (env FAIRSHARE_ANONYMIZE_KEY); the same key gives the same names.",
)
@click.option(
    "--class-from",
    type=click.Choice(["qos", "partition"]),
    default="qos",
    show_default=True,
    help="A job's class: its QOS or its partition.",
)
@click.option(
    "--leaves",
    type=click.Choice(["account", "user"]),
    default="account",
    show_default=True,
    help="Leaves of the budget tree: accounts, or each user association.",
)
@click.option(
    "--tz",
    default="UTC",
    show_default=True,
    help="The time zone sacct printed its times in (sacct prints its host's local time).",
)
def slurm(
    sacct_files: tuple[Path, ...],
    assoc: Path | None,
    config: Path | None,
    nodes: Path | None,
    out: Path,
    live: bool,
    start: str | None,
    end: str | None,
    skip_bad: bool,
    anonymize: bool,
    anonymize_key: str,
    class_from: str,
    leaves: str,
    tz: str,
) -> None:
    """Write a site folder (policy.yaml, cluster.yaml, workload.csv, history.csv, incumbent.yaml,
    import.json) from a Slurm site's accounting, associations, settings and nodes.

    \b
    fairshare import slurm --sacct history.txt --assoc assoc.txt \\
        --config config.txt --nodes nodes.txt --out site/
    fairshare import slurm --live -S 2026-10-01 -E 2026-11-01 --out site/
    """
    from .inputs.slurmacct._text import Anonymizer, timezone
    from .inputs.slurmacct.run import Sources, run_import
    from .replay.outputs import write_files_marker
    from .replay.staging import StagedOutput

    try:
        zone = timezone(tz)
        stage = StagedOutput(out, "import slurm", root_marker=False)
        with stage as folder:
            if live:
                if sacct_files or assoc or config or nodes:
                    raise InputError(
                        "--live", "", "reads the commands itself: give no --sacct/--assoc/--config/--nodes"
                    )
                sources = _live(folder / "sources", start, end)
                zone = dt.UTC
            else:
                if not sacct_files:
                    raise InputError("--sacct", "", "is required (or --live on a Slurm host)")
                if nodes is None and config is None:
                    raise InputError(
                        "--nodes",
                        "",
                        "is required (or a slurm.conf as --config, which holds the NodeName lines)",
                    )
                sources = Sources(list(sacct_files), assoc, config, nodes or config)
            report = run_import(
                sources,
                folder,
                zone,
                skip_bad=skip_bad,
                anonymizer=Anonymizer(anonymize, anonymize_key.encode()),
                class_from=class_from,
                leaves=leaves,
                start=_when(start, zone, "--start"),
                end=_when(end, zone, "--end") if not live or _is_iso(end) else None,
            )
            write_files_marker(folder, "import slurm")
    except InputError as exc:
        _fail(exc)
    for line in report:
        click.echo(line)


def _is_iso(text: str | None) -> bool:
    try:
        return text is not None and bool(dt.datetime.fromisoformat(text))
    except ValueError:
        return False  # e.g. sacct's `now-7days`, passed to sacct as it is


def _when(text: str | None, zone: dt.tzinfo, option: str) -> float | None:
    if text is None:
        return None
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            option, text, "is not an ISO date or datetime (2026-10-01, 2026-10-01T08:00)"
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=zone)).timestamp()


def _live(where: Path, start: str | None, end: str | None) -> Any:
    """Run the site commands (read-only), keep their output under the site folder's sources/."""
    from .inputs.slurmacct.run import Sources
    from .inputs.slurmacct.sacct import NARROW_FORMAT

    where.mkdir()
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    span = ["-S", start or "now-30days", "-E", end or "now"]
    commands = {
        "sacct.txt": ["sacct", "-a", "-X", "-D", "-P", f"--format={NARROW_FORMAT}", *span],
        "assoc.txt": ["sacctmgr", "-P", "show", "assoc", f"format={LIVE_ASSOC_FORMAT}"],
        "config.txt": ["scontrol", "show", "config"],
        "nodes.txt": ["scontrol", "-o", "show", "node"],
    }
    for name, cmd in commands.items():
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError("--live", " ".join(cmd), f"could not run: {exc}") from None
        if done.returncode != 0:
            raise InputError("--live", " ".join(cmd), f"exit {done.returncode}: {done.stderr.strip()[:300]}")
        (where / name).write_text(done.stdout, encoding="utf-8")
    return Sources([where / "sacct.txt"], where / "assoc.txt", where / "config.txt", where / "nodes.txt")
