"""The `fairshare` command line (click)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ._cli_inputs import (
    estimate_options,
    file_inputs,
    overstate_factors,
    overstate_option,
    overstated,
    scenario_names,
    source_options,
    window_options,
)
from ._cli_runtime import BoundedInt, Main, progress
from ._units import fmt_duration, instant
from .client.job_cli import job as _job_commands
from .core.strategies import STRATEGIES
from .core.tree import TreeIndex
from .errors import InputError
from .import_cli import import_group as _import_commands
from .inputs import limits
from .inputs._validation import load_yaml, validate
from .inputs.policy import Policy, review_warnings
from .replay.results import Comparison
from .service.ops_cli import register as register_ops_commands
from .service.service_cli import register as register_service_commands
from .slurm.slurm_cli import slurm as _slurm_commands
from .sweep.command import sweep as _sweep_command

if TYPE_CHECKING:
    from .replay.loaded import Inputs

DEFAULT_POLICIES = "fairshare,slurm-multifactor,priority-labels,fifo"
CHART_WORKER_MIN_JOBS = 2000  # jobs x policies: below this the replays are too short to hide a worker's start


def _fail(exc: InputError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fairshare")
def main() -> None:
    """Budget-based fair-share scheduling for GPU clusters: check policies, replay and compare."""


main.add_command(_slurm_commands)  # light: each slurm command imports its modules when it runs
main.add_command(_import_commands)  # `fairshare import slurm` (docs/own-cluster.md)
main.add_command(_job_commands)  # `fairshare job progress|checkpoint|resumed` (docs/progress.md)


@main.command()
@click.argument("policy", type=click.Path(path_type=Path))
@click.option("--cluster", type=click.Path(path_type=Path), help="Also check against this cluster file.")
@click.option(
    "--workload", type=click.Path(path_type=Path), help="Also check this workload (needs --cluster)."
)
def check(policy: Path, cluster: Path | None, workload: Path | None) -> None:
    """Validate a policy file; print the budget tree with static fractions."""
    try:
        pol = validate(Policy, load_yaml(policy), str(policy))
        tree = TreeIndex.build(pol.tree)
        click.echo(_tree_text(pol, tree))
        if cluster is not None:
            from .inputs.cluster import load_cluster
            from .inputs.policy import resolve_exceptions

            cl = load_cluster(cluster, pol)
            resolve_exceptions(pol, tree, cl.epoch, str(policy), strict=True)
            review_warnings(pol, str(policy), cl.epoch, f"before the cluster's epoch, {cl.epoch.date()}")
            click.echo(
                f"cluster {cluster}: {len(cl.nodes)} nodes, {cl.total_gpus()} GPUs "
                f"({', '.join(cl.gpu_types)})"
            )
            for pool in cl.pools:
                untracked = [k for k in ("cpus", "mem_gb") if not getattr(pool, k)]
                if untracked:
                    click.echo(
                        f"note: pool {pool.name} gives no {' or '.join(untracked)} (0 = not tracked): jobs' "
                        f"{' and '.join(untracked)} are neither checked against its nodes nor charged there"
                    )
            if workload is not None:
                from .inputs.workload import check_workload

                checked = check_workload(workload, pol, tree, cl)  # streams: no job list kept
                click.echo(f"workload {workload}: {checked.jobs} jobs")
                if checked.first_capped is not None:
                    first = checked.first_capped.request
                    click.echo(
                        f"note: {checked.capped} job(s) asked for more protection than their class's "
                        f"max_protected and were capped (first: {first.id}, to "
                        f"{fmt_duration(first.protected)})"
                    )
        elif workload is not None:
            raise InputError("--workload", "", "checking a workload needs --cluster too")
        else:
            _warn_past_expiries(pol, policy)
    except InputError as exc:
        _fail(exc)
    click.echo("ok")


def _warn_past_expiries(pol: Policy, where: Path) -> None:
    """Without a cluster there is no epoch: dates are judged against today, which the output says
    (so it changes with the day)."""
    today = dt.datetime.now(dt.UTC)
    if pol.exceptions or _has_review(pol.tree):
        click.echo(
            f"note: no --cluster, so no epoch: expiry and review dates are judged against today, "
            f"{today.date()} (give --cluster to judge them against the replay's epoch)"
        )
    review_warnings(pol, str(where), today, f"before today, {today.date()}")
    for i, ex in enumerate(pol.exceptions):
        try:
            t = instant(ex.expires, today)
        except ValueError:
            continue
        if t <= 0:
            click.echo(
                f"warning: {where}: exceptions[{i}].expires: the exception for {ex.group} has already "
                f"expired",
                err=True,
            )


def _has_review(nodes: Any) -> bool:
    return any(n.review is not None or _has_review(n.children) for n in nodes)


def _tree_text(pol: Policy, tree: TreeIndex) -> str:
    lines = [
        f"window {fmt_duration(pol.window)}; {len(tree.leaves)} leaves; classes: {', '.join(pol.classes)}"
    ]
    nodes = {}

    def collect(items: Any, prefix: str) -> None:
        for n in items:
            path = f"{prefix}/{n.name}" if prefix else n.name
            nodes[path] = n
            collect(n.children, path)

    collect(pol.tree, "")
    for i, path in enumerate(tree.paths):
        n = nodes[path]
        extra = sum(e.extra_share for e in pol.exceptions if e.group == path)
        meta = ", ".join(
            x
            for x in (
                f"owner {n.owner}" if n.owner else "",
                f"review {n.review}" if n.review else "",
                f"+{extra:g} share by exception" if extra else "",
            )
            if x
        )
        lines.append(
            f"{'  ' * tree.depth[i]}{path.rsplit('/', 1)[-1]:<20} share {n.share:<6g} "
            f"static {100 * tree.static_frac[i]:6.2f}%" + (f"  ({meta})" if meta else "")
        )
    return "\n".join(lines)


@main.command()
def scenarios() -> None:
    """List the built-in scenarios, one line each."""
    from .inputs.scenarios import DESCRIPTIONS

    for name, text in DESCRIPTIONS.items():
        click.echo(f"{name:<18} {text}")


@main.command()
@click.option("--scenario", help="A built-in scenario name, or 'all'.")
@click.option(
    "--seed",
    type=BoundedInt(0, limits.MAX_SEED),
    metavar="N",
    default=1,
    show_default=True,
    help="Seed of the scenario generator.",
)
@source_options
@click.option(
    "--policies",
    default=DEFAULT_POLICIES,
    show_default=True,
    help=f"Comma-separated, from: {', '.join(STRATEGIES)}, as-run (with --from).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@estimate_options
@click.option("--require-gates", is_flag=True, help="Exit 1 when a fairshare rollout gate fails.")
def compare(
    scenario: str | None,
    seed: int,
    site: Path | None,
    trace: str | None,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    workload_format: str | None,
    cluster_format: str | None,
    jobs_window: str | None,
    round_gpus: bool,
    clip_duration: str | None,
    rebase: bool,
    repeat: int,
    policies: str,
    out: Path,
    overstate: str | None,
    forecast: int,
    require_gates: bool,
) -> None:
    """Replay the same arrivals under several policies; write outputs and report.html.

    Inputs: a built-in --scenario; or --policy, --cluster and --workload files; or a public --trace
    (philly, openb) or a trace file (--workload PATH --workload-format philly|openb), whose loader
    supplies the cluster and policy you do not give. See docs/traces.md.
    """
    from .inputs.scenarios import SCENARIOS
    from .replay.runner import check_policies, inputs_from_scenario
    from .replay.runner import compare as run_compare
    from .replay.staging import StagedOutput
    from .report.html import ChartPool, write_report
    from .report.table import format_comparison

    try:
        names = check_policies(policies.split(","))
        factors = overstate_factors(overstate)
        staged = StagedOutput(out, "compare")
        options = window_options(jobs_window, round_gpus, clip_duration, rebase, repeat)
        jobs: list[tuple[str, Inputs]] = []  # (folder under OUT, inputs)
        if scenario is not None:
            files = bool(policy_path or cluster or workload or trace or site)
            for s in scenario_names(scenario, files, allow_all=True):
                jobs.append((s, overstated(inputs_from_scenario(SCENARIOS[s](seed)), factors, seed)))
        else:
            inputs = file_inputs(
                "compare",
                trace,
                policy_path,
                cluster,
                workload,
                workload_format,
                cluster_format,
                options,
                site,
            )
            inputs = overstated(inputs, factors, seed)
            _echo_notes(inputs.notes)
            jobs.append(("", inputs))
        stage = staged.begin()
    except InputError as exc:
        _fail(exc)
    # a chart worker starts now and imports matplotlib while the replays run, unless they are short
    replayed = sum(len(inputs.jobs) for _, inputs in jobs) * len(names)
    comparisons: list[Comparison] = []
    try:
        with staged, ChartPool(None if replayed >= CHART_WORKER_MIN_JOBS else 0) as pool:
            for folder, inputs in jobs:
                with progress(inputs.name, len(inputs.jobs) * len(names)) as bar:
                    comp = run_compare(
                        inputs,
                        names,
                        stage / folder,
                        bar.update,
                        forecast,
                        finished=bar.finished,
                        final=out / folder,
                    )
                comparisons.append(comp)
                click.echo(format_comparison(comp))
                click.echo("")
                _echo_fidelity(comp)
            write_report(stage / "report.html", comparisons, pool=pool)
    except InputError as exc:  # found while replaying, or OUT could not be replaced
        _fail(exc)
    click.echo(f"wrote {out / 'report.html'}")
    if require_gates:
        failed = [
            (c.scenario, g)
            for c in comparisons
            for r in c.results
            if r.strategy == "fairshare"
            for g, v in r.metrics["gates"].items()
            if not v["pass"]
        ]
        if failed:
            for s, g in failed:
                click.echo(f"gate failed: {s}: fairshare {g}", err=True)
            sys.exit(1)


def _echo_fidelity(comp: Comparison) -> None:
    from .replay.fidelity import fidelity_text

    if comp.fidelity:
        click.echo(fidelity_text(comp.fidelity) + "\n")


def _echo_notes(notes: tuple[str, ...]) -> None:
    for line in notes:
        click.echo(line)
    if notes:
        click.echo("")


@main.command()
@source_options
@click.option(
    "--policy-name",
    default="fairshare",
    show_default=True,
    help=f"The scheduling policy to replay, one of: {', '.join(STRATEGIES)}, as-run (with --from).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@estimate_options
def replay(
    site: Path | None,
    trace: str | None,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    workload_format: str | None,
    cluster_format: str | None,
    jobs_window: str | None,
    round_gpus: bool,
    clip_duration: str | None,
    rebase: bool,
    repeat: int,
    policy_name: str,
    out: Path,
    overstate: str | None,
    forecast: int,
) -> None:
    """Replay one policy (default fairshare) on a trace or workload; write OUT/<policy>/.

    Same inputs as compare without --scenario: --trace NAME, or --workload with --workload-format,
    --policy and --cluster (a trace loader supplies the ones you leave out). No report.html: use
    compare for that.
    """
    from .replay.runner import check_policies
    from .replay.runner import compare as run_compare
    from .replay.staging import StagedOutput
    from .report.table import format_comparison

    try:
        names = check_policies([policy_name], "--policy-name")
        factors = overstate_factors(overstate)
        staged = StagedOutput(out, "replay")
        options = window_options(jobs_window, round_gpus, clip_duration, rebase, repeat)
        inputs = file_inputs(
            "replay", trace, policy_path, cluster, workload, workload_format, cluster_format, options, site
        )
        inputs = overstated(inputs, factors, 1)
        _echo_notes(inputs.notes)
        stage = staged.begin()
    except InputError as exc:
        _fail(exc)
    try:
        with staged, progress(inputs.name, len(inputs.jobs)) as bar:
            comp = run_compare(inputs, names, stage, bar.update, forecast, finished=bar.finished, final=out)
    except InputError as exc:  # found while replaying, or OUT could not be replaced
        _fail(exc)
    click.echo(format_comparison(comp))
    click.echo("")
    click.echo(f"wrote {out / names[0]}")


@main.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="A replay output folder (or a compare folder holding policy folders).",
)
@click.option("--job", required=True, help="Job id.")
@click.option(
    "--at",
    "at",
    metavar="TIME",
    help="Replay the inputs (--scenario, or the inputs of replay) to TIME (a duration from t = 0, "
    "such as 2d, or a date) and show the job's place in line then: in the queue, in its group's, "
    "and the groups whose jobs are ahead of it (the live explain's function).",
)
@click.option("--scenario", help="--at: a built-in scenario.")
@click.option(
    "--seed",
    type=BoundedInt(0, limits.MAX_SEED),
    metavar="N",
    default=1,
    show_default=True,
    help="--at: seed of the scenario generator.",
)
@source_options
@click.option(
    "--policy-name",
    default="fairshare",
    show_default=True,
    help=f"--at: the scheduling policy to replay, one of: {', '.join(STRATEGIES)}.",
)
@overstate_option
def explain(
    out: Path | None,
    job: str,
    at: str | None,
    scenario: str | None,
    seed: int,
    site: Path | None,
    trace: str | None,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    workload_format: str | None,
    cluster_format: str | None,
    jobs_window: str | None,
    round_gpus: bool,
    clip_duration: str | None,
    rebase: bool,
    repeat: int,
    policy_name: str,
    overstate: str | None,
) -> None:
    """Show the decisions that touched a job, with their evidence, and why it waited (--out); its
    place in line at a time (--at, with the inputs)."""
    from .report.explain import explain_all, explain_at

    try:
        if out is None and at is None:
            raise InputError("explain", "", "give --out (a replay's folder) or --at TIME with the inputs")
        if at is None:
            _reject_given_without_at(click.get_current_context())
        texts = [explain_all(out, job)] if out is not None else []
        if at is not None:
            inputs = _explain_inputs(
                scenario, seed, site, trace, policy_path, cluster, workload, workload_format,
                cluster_format, window_options(jobs_window, round_gpus, clip_duration, rebase, repeat),
            )  # fmt: skip
            # the estimates compare --seed N and replay (seed 1) drew: --at replays the same run
            inputs = overstated(inputs, overstate_factors(overstate), seed)
            if policy_name not in STRATEGIES:
                raise InputError(
                    "--policy-name", policy_name, f"--at replays one of: {', '.join(STRATEGIES)} (as-run "
                    "replays the recorded history: it has no queue)",
                )  # fmt: skip
            try:
                t = instant(at, inputs.cluster.epoch)
            except ValueError as exc:
                raise InputError("--at", at, str(exc)) from None
            if not 0 <= t <= limits.MAX_TIME:
                raise InputError("--at", at, f"must be within t = 0 .. {limits.fmt_limit(limits.MAX_TIME)}")
            texts.append(explain_at(inputs, policy_name, job, t))
    except InputError as exc:
        _fail(exc)
    click.echo("\n\n".join(texts))


def _reject_given_without_at(ctx: click.Context) -> None:
    """explain without --at reads a finished replay's folder: the options that choose what --at
    replays (inputs, seed, policy, overstatement) would be ignored, so giving one is an error
    that names it (the first, in the command's option order)."""
    for param in ctx.command.params:
        if param.name in ("out", "job", "at") or not isinstance(param, click.Option):
            continue
        if ctx.get_parameter_source(param.name or "") in (
            click.core.ParameterSource.COMMANDLINE,
            click.core.ParameterSource.ENVIRONMENT,
        ):
            flag = max(param.opts, key=len)
            raise InputError(
                flag, "", "is used with --at only (without it, explain reads the replay in --out as it ran)"
            )


def _explain_inputs(
    scenario: str | None,
    seed: int,
    site: Path | None,
    trace: str | None,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    workload_format: str | None,
    cluster_format: str | None,
    options: Any,
) -> Inputs:
    """The inputs `explain --at` replays: a built-in --scenario, or the inputs of replay."""
    from .inputs.scenarios import SCENARIOS
    from .replay.runner import inputs_from_scenario

    if scenario is None:
        inputs: Inputs = file_inputs(
            "explain --at",
            trace,
            policy_path,
            cluster,
            workload,
            workload_format,
            cluster_format,
            options,
            site,
        )
        return inputs
    (name,) = scenario_names(scenario, bool(policy_path or cluster or workload or trace or site))
    return inputs_from_scenario(SCENARIOS[name](seed))


register_service_commands(main)  # token, policy, audit, review (docs/service.md)
main.add_command(_sweep_command)  # fairshare sweep (docs/decisions.md)
register_ops_commands(main)  # status, jobs, exception, policy diff over the API (docs/service.md)

if __name__ == "__main__":
    from ._entry import run

    run(main)
