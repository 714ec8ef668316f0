"""`fairshare job progress|checkpoint|resumed`: a job's reports from a job script (docs/progress.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from . import report

_JOB = click.option(
    "--job", default=None, help="The job's id (default: FAIRSHARE_JOB_ID, else SLURM_JOB_ID)."
)
_URL = click.option("--url", default=None, help="The service's URL (default: FAIRSHARE_URL).")


def _run(call: Callable[[report.Target], dict[str, Any]], job: str | None, url: str | None) -> None:
    try:
        out = call(report.Target.from_env(job=job, url=url))
    except report.ReportError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"job {out.get('id')}: {out.get('report')} {out.get('step')} {out.get('state')}")


@click.group("job")
def job() -> None:
    """Report a running job's progress to the fairshare service (from inside the job)."""


@job.command("progress")
@click.option("--step", type=click.IntRange(min=0), required=True, help="The job's counter now.")
@_JOB
@_URL
def progress_cmd(step: int, job: str | None, url: str | None) -> None:
    """The job's counter (steps, samples, tokens) reached STEP."""
    _run(lambda t: report.progress(step, t), job, url)


@job.command("checkpoint")
@click.option("--step", type=click.IntRange(min=0), required=True, help="The step the checkpoint saved.")
@click.option("--path", default=None, help="Where the checkpoint is (s3://..., a file).")
@_JOB
@_URL
def checkpoint_cmd(step: int, path: str | None, job: str | None, url: str | None) -> None:
    """A checkpoint of STEP was written and can be restored."""
    _run(lambda t: report.checkpoint(step, path, t), job, url)


@job.command("resumed")
@click.option(
    "--from-step", "from_step", type=click.IntRange(min=0), required=True, help="The step restored."
)
@_JOB
@_URL
def resumed_cmd(from_step: int, job: str | None, url: str | None) -> None:
    """On a restart: this run restored the checkpoint of FROM_STEP."""
    _run(lambda t: report.resumed(from_step, t), job, url)
