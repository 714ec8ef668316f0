"""`fairshare slurm ...`: the Slurm driver's commands.

    fairshare slurm dev-cluster up|down|status   a local 4-node, 32-GPU Slurm to try fairshare on
    fairshare slurm check --policy P             Slurm's settings, accounts, QOS and GPU types vs P
    fairshare slurm jobs --policy P              how fairshare reads the queue (leaf, class, contract)
    fairshare slurm reset-priorities --policy P  roll back: pending jobs get Slurm's own priority again

This module stays light (click only): each command imports what it needs when it runs.
Exit codes: 0 ok, 1 `check` found a required item wrong, 2 bad input or Slurm unreachable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from ..inputs.policy import Policy
    from .client import CliBackend

DEFAULT_DIR = "/tmp/fairshare-slurm"


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _policy(path: Path) -> Policy:
    from ..errors import InputError
    from ..inputs.policy import load_policy

    try:
        return load_policy(path)
    except InputError as exc:
        _fail(str(exc))


def _backend(timeout: float) -> CliBackend:
    from .client import CliBackend

    return CliBackend(timeout=timeout)


@click.group("slurm")
def slurm() -> None:
    """Drive a Slurm cluster: check its settings, try it on a local dev cluster."""


# ---------------------------------------------------------------------- dev-cluster

_dir_option = click.option(
    "--dir",
    "base",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_DIR,
    envvar="FAIRSHARE_SLURM_DIR",
    show_default=True,
    help="Folder holding the dev cluster's configuration, state, logs and pids.",
)


@slurm.group("dev-cluster")
def dev_cluster() -> None:
    """A local Slurm (4 nodes x 8 fake A100, slurmdbd + MariaDB) on 127.0.0.1; needs root."""


@dev_cluster.command("up")
@_dir_option
@click.option(
    "--policy",
    type=click.Path(path_type=Path, dir_okay=False),
    default="examples/slurm-policy.yaml",
    show_default=True,
    help="Create the Slurm accounts of this policy (and a QOS per job class).",
)
@click.option("--fresh", is_flag=True, help="Start from empty state (no old jobs, accounts or usage).")
def up(base: Path, policy: Path, fresh: bool) -> None:
    """Install what is missing, start every daemon, create the accounts; returns when nodes are idle.

    Prints the `export SLURM_CONF=...` the client commands need:
    eval "$(fairshare slurm dev-cluster up)"
    """
    from .devcluster import DevCluster, DevClusterError
    from .devconf import DevClusterSpec

    if not policy.exists():
        _fail(f"--policy {policy}: file not found (run from the repository, or pass --policy)")
    pol = _policy(policy)
    cluster = DevCluster(DevClusterSpec(base=base.absolute()))
    try:
        result = cluster.up(pol, fresh=fresh)
    except DevClusterError as exc:
        _fail(str(exc))
    if result.already:
        click.echo(f"dev cluster already up (state in {base})", err=True)
    else:
        installed = (
            f"; installed {' '.join(result.installed)} in {result.install_seconds:.0f}s"
            if result.installed
            else ""
        )
        click.echo(f"dev cluster up in {result.seconds:.1f}s{installed}; state in {base}", err=True)
    click.echo(cluster.spec.env_lines(), nl=False)


@dev_cluster.command("down")
@_dir_option
def down(base: Path) -> None:
    """Stop the processes `up` started (by recorded pid), cancelling their jobs first."""
    from .devcluster import DevCluster
    from .devconf import DevClusterSpec

    stopped = DevCluster(DevClusterSpec(base=base.absolute())).down()
    click.echo(f"stopped {', '.join(stopped)}" if stopped else f"nothing to stop in {base}")


@dev_cluster.command("status")
@_dir_option
def status(base: Path) -> None:
    """Each recorded daemon and whether it runs; exit 1 unless the cluster is fully up."""
    from .devcluster import DevCluster
    from .devconf import DevClusterSpec

    cluster = DevCluster(DevClusterSpec(base=base.absolute()))
    st = cluster.status()
    if not st:
        click.echo(f"not running (no pids in {cluster.spec.pids})")
        sys.exit(1)
    for name, running in sorted(st.items()):
        click.echo(f"{name:<12} {'running' if running else 'stopped'}")
    if not cluster.is_up():
        sys.exit(1)
    click.echo(cluster.spec.env_lines(), nl=False)


# ---------------------------------------------------------------------- check / jobs

_policy_option = click.option(
    "--policy", type=click.Path(path_type=Path, dir_okay=False), required=True, help="The policy file."
)
_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds per Slurm command.",
)


@slurm.command("check")
@_policy_option
@_timeout_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(policy: Path, timeout: float, as_json: bool) -> None:
    """Check Slurm's settings, accounts, QOS and GPU types against the policy (SLURM_CONF).

    Each item is ok, WRONG (with the fix), warn or info; exit 1 when a required item is wrong.
    """
    from .check import run_check
    from .slurm_errors import SlurmError

    pol = _policy(policy)
    try:
        report = run_check(_backend(timeout), pol)
    except SlurmError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        click.echo(f"cluster {report.cluster} (Slurm {report.version}), policy {policy}")
        click.echo(report.text())
    sys.exit(0 if report.ok else 1)


@slurm.command("jobs")
@_policy_option
@_timeout_option
def jobs(policy: Path, timeout: float) -> None:
    """How fairshare reads the queue: each job's leaf, class, GPUs and contract, or why not."""
    from .._units import fmt_duration
    from .mapping import Mapper, memory_is_allocated
    from .slurm_errors import SlurmError

    pol = _policy(policy)
    backend = _backend(timeout)
    try:
        config = backend.read_config()
        parents = {a.account: a.parent for a in backend.read_associations() if a.user is None and a.parent}
        view = Mapper(pol, parents, memory_is_allocated(config)).view(
            backend.read_nodes(), backend.read_jobs()
        )
    except SlurmError as exc:
        _fail(str(exc))
    free = sum(n.gpus - n.gpus_used for n in view.nodes if n.schedulable)
    click.echo(
        f"{len(view.nodes)} nodes, {sum(n.gpus for n in view.nodes)} GPUs ({free} free on schedulable nodes)"
    )
    for r in view.running:
        q = r.request
        nodes = ",".join(f"{a.node}:{a.gpus}" for a in r.alloc)
        click.echo(
            f"running {q.slurm_id:>7} {q.leaf:<16} {q.cls:<8} {q.gpus:>3} GPU  charge {r.charge:g}  "
            f"on {nodes}  protected {fmt_duration(q.protected)}"
        )
    for q in view.pending:
        types = ",".join(q.gpu_types) if q.gpu_types else "any"
        limit = fmt_duration(q.estimate) if q.estimate is not None else "unlimited"
        state = "held   " if q.held else "pending"
        resumable = "  resumable" if q.resumable else ""
        click.echo(
            f"{state} {q.slurm_id:>7} {q.leaf:<16} {q.cls:<8} {q.gpus:>3} GPU ({types}) x{q.nodes}  "
            f"limit {limit}  protected {fmt_duration(q.protected)}{resumable}  priority {q.priority}"
        )
    for q in (*view.pending, *(r.request for r in view.running)):
        for note in q.notes:
            click.echo(f"note    {q.slurm_id:>7} {note}")
    for u in view.unmapped:
        click.echo(f"skipped {u.slurm_id:>7} ({u.state.lower()}): {u.reason}")
    for note in view.notes:
        click.echo(f"note    {note}")


@slurm.command("reset-priorities")
@_policy_option
@_timeout_option
@click.option("--yes", is_flag=True, help="Do it (without --yes: list the jobs only).")
def reset(policy: Path, timeout: float, yes: bool) -> None:
    """Roll back: give every pending job whose priority fairshare set (inside the policy's band)
    Slurm's computed priority again (hold + release). Stop `fairshare serve` first."""
    from .accounts import section_of
    from .priority import Band, ResetIncomplete, in_band, priorities_of, reset_priorities
    from .slurm_errors import SlurmError

    section = section_of(_policy(policy))
    band = Band(section.priority_min, section.priority_max, section.priority_step)
    backend = _backend(timeout)
    try:
        jobs = in_band(priorities_of(backend.read_jobs()), band)
        click.echo(
            f"{len(jobs)} pending job(s) with a priority in [{band.low}, {band.high}]: "
            + (" ".join(map(str, jobs)) or "none")
        )
        if not yes or not jobs:
            if jobs:
                click.echo("run again with --yes to reset them")
            return
        results = reset_priorities(backend, jobs)
    except ResetIncomplete as exc:
        _fail(str(exc))
    except SlurmError as exc:
        _fail(str(exc))
    done = [r.job_id for r in results if r.ok]
    gone = [f"{r.job_id} ({r.outcome})" for r in results if not r.ok]
    click.echo(f"reset {len(done)} job(s)" + (f"; skipped {', '.join(gone)}" if gone else ""))
