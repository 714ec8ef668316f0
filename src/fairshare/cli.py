"""The `fairshare` command line (click)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ._cli_runtime import BoundedInt, Main, progress
from ._units import fmt_duration, instant
from .client.job_cli import job as _job_commands
from .core.strategies import STRATEGIES
from .core.tree import TreeIndex
from .errors import InputError
from .inputs import limits
from .inputs._validation import load_yaml, validate
from .inputs.policy import Policy, review_warnings
from .inputs.slurmacct.cli import import_group as _import_commands
from .replay.results import Comparison
from .service.service_cli import register as register_service_commands
from .slurm.slurm_cli import slurm as _slurm_commands
from .sweep.command import register as register_sweep

if TYPE_CHECKING:
    from .replay.runner import Inputs

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


def _source_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The input options shared by compare and replay: files, formats, a named trace and its window."""
    from .inputs.formats import CLUSTER_FORMATS, TRACES, WORKLOAD_FORMATS

    options = [
        click.option(
            "--from",
            "site",
            type=click.Path(path_type=Path),
            help="A site folder from `fairshare import slurm --out` (policy, cluster, workload, history, "
            "incumbent settings; docs/own-cluster.md). Enables the as-run policy.",
        ),
        click.option(
            "--trace",
            help=f"A public trace under $FAIRSHARE_TRACES (default ../shared/traces): {', '.join(TRACES)}. "
            "Its loader supplies a default policy and cluster unless --policy/--cluster are given.",
        ),
        click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Policy YAML."),
        click.option(
            "--cluster", type=click.Path(path_type=Path), help="Cluster file (see --cluster-format)."
        ),
        click.option(
            "--workload", type=click.Path(path_type=Path), help="Workload file (see --workload-format)."
        ),
        click.option(
            "--workload-format",
            help=f"Format of --workload: {', '.join(WORKLOAD_FORMATS)} (default native: CSV or JSON Lines).",
        ),
        click.option(
            "--cluster-format",
            help=f"Format of --cluster: {', '.join(CLUSTER_FORMATS)} (default native: YAML).",
        ),
        click.option(
            "--jobs",
            "jobs_window",
            metavar="FIRST:END",
            help="Trace formats: replay jobs FIRST..END-1 in submit order (zero-based, END excluded).",
        ),
        click.option(
            "--round-gpus", is_flag=True, help="Trace formats: round GPUs up to 1/2/4/8, above 8 to 8k."
        ),
        click.option(
            "--clip-duration",
            metavar="MIN:MAX",
            help="Trace formats: clip run times to [MIN, MAX], e.g. 1s:24h (a side may be empty).",
        ),
        click.option(
            "--repeat",
            type=BoundedInt(1, limits.MAX_REPEAT),
            default=1,
            metavar="N",
            show_default=True,
            help="Trace formats: replay the window N times back to back (same arrival rate).",
        ),
        click.option(
            "--rebase/--no-rebase",
            default=True,
            show_default=True,
            help="Trace formats: the window's first arrival is t = 0 (else the file's first).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _estimate_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """What the scheduler is told of run times: --overstate LOW:HIGH, and --forecast N."""
    f = click.option(
        "--overstate",
        metavar="LOW:HIGH",
        help="Declared run times (estimates, like Slurm time limits) are the true ones times a factor "
        f"drawn per job from LOW..HIGH (log-uniform; e.g. 2:10; each from {limits.MIN_OVERSTATE:g} to "
        f"{limits.MAX_OVERSTATE:g}, the estimate at most 10 years). Default: estimates as the "
        "workload gives them (the true run time when absent).",
    )(f)
    return click.option(
        "--forecast",
        type=BoundedInt(0, limits.MAX_FORECAST),
        default=0,
        show_default=True,
        metavar="N",
        help="Forecast the start of about N jobs, sampled evenly, when they arrive, and report how far "
        "the actual starts were (metrics.json 'forecast'; `explain` shows a job's). 0: off.",
    )(f)


def _overstate_factors(overstate: str | None) -> tuple[float, float] | None:
    """--overstate LOW:HIGH checked (before any input is read): the factors, or None."""
    if overstate is None:
        return None
    head, sep, tail = overstate.partition(":")
    try:
        if not sep:
            raise ValueError
        low, high = float(head), float(tail)
    except ValueError:
        raise InputError("--overstate", overstate, "expected LOW:HIGH factors, e.g. 2:10") from None
    lo, hi = limits.MIN_OVERSTATE, limits.MAX_OVERSTATE
    if not (lo <= low <= high <= hi):
        raise InputError(
            "--overstate", overstate, f"expected {lo:g} <= LOW <= HIGH <= {hi:g} (factors), e.g. 2:10"
        )
    return low, high


def _overstated(inputs: Inputs, factors: tuple[float, float] | None, seed: int) -> Inputs:
    """The inputs with estimates overstated per --overstate LOW:HIGH (None: as they are)."""
    if factors is None:
        return inputs
    from .replay.runner import overstate_estimates

    return overstate_estimates(inputs, *factors, seed)


def _window_options(
    jobs_window: str | None, round_gpus: bool, clip: str | None, rebase: bool, repeat: int = 1
) -> Any:
    from ._units import parse_duration
    from .inputs.formats import TraceOptions

    first, count = 0, None
    if jobs_window is not None:
        text = jobs_window.strip()
        head, sep, tail = text.partition(":")
        try:
            if not sep:
                raise ValueError
            first = int(head) if head.strip() else 0
            end = int(tail) if tail.strip() else None
        except ValueError:
            raise InputError(
                "--jobs", jobs_window, "expected FIRST:END (zero-based, END excluded), e.g. 20000:36000"
            ) from None
        if first < 0 or (end is not None and end <= first):
            raise InputError("--jobs", jobs_window, "expected 0 <= FIRST < END")
        count = None if end is None else end - first
    lo = hi = None
    if clip is not None:
        head, sep, tail = clip.partition(":")
        try:
            if not sep:
                raise ValueError("expected MIN:MAX, e.g. 1s:24h")
            lo = parse_duration(head) if head.strip() else None
            hi = parse_duration(tail) if tail.strip() else None
        except ValueError as exc:
            raise InputError("--clip-duration", clip, str(exc)) from None
        for side, x in (("MIN", lo), ("MAX", hi)):
            if x is not None and not 0 < x <= limits.MAX_DURATION:
                raise InputError(
                    "--clip-duration",
                    clip,
                    f"{side} must be a run time above 0 and at most {limits.fmt_limit(limits.MAX_DURATION)}"
                    f", got {fmt_duration(x) if x else '0s'}",
                )
        if lo is not None and hi is not None and hi < lo:
            raise InputError("--clip-duration", clip, "MAX is below MIN")
    return TraceOptions(
        first=first, count=count, round_gpus=round_gpus, clip=(lo, hi), rebase=rebase, repeat=repeat
    )


def _file_inputs(
    command: str,
    trace: str | None,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    workload_format: str | None,
    cluster_format: str | None,
    options: Any,
    site: Path | None = None,
) -> Any:
    """Inputs from --from (a site folder), --trace, or --workload of any format, with
    --policy/--cluster or the loader's defaults."""
    from .inputs.formats import TraceOptions
    from .replay.runner import inputs_from_files, inputs_from_sources, inputs_from_trace

    if site is not None:
        from .replay.site import inputs_from_site

        others = (trace, policy_path, cluster, workload, workload_format, cluster_format)
        return inputs_from_site(site, any(others) or options != TraceOptions())
    if cluster_format is not None and cluster is None:
        raise InputError("--cluster-format", cluster_format, "give the cluster file with --cluster")
    if trace is not None:
        if workload is not None or workload_format is not None:
            raise InputError(
                "--trace",
                trace,
                "use either --trace or --workload/--workload-format (a trace has its format)",
            )
        return inputs_from_trace(
            trace,
            policy=policy_path,
            cluster=cluster,
            cluster_format=cluster_format or "native",
            options=options,
        )
    if workload is None or (workload_format in (None, "native") and not (policy_path and cluster)):
        raise InputError(
            command,
            "",
            "give --scenario, or all of --policy, --cluster and --workload, or --from DIR (a site "
            "folder), or --trace NAME, or "
            "--workload with a trace --workload-format (philly, openb)",
        )
    if workload_format is None and cluster_format is None and options == TraceOptions():
        assert policy_path is not None and cluster is not None
        return inputs_from_files(policy_path, cluster, workload)
    return inputs_from_sources(
        workload,
        workload_format=workload_format or "native",
        policy=policy_path,
        cluster=cluster,
        cluster_format=cluster_format or "native",
        options=options,
    )


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
@_source_options
@click.option(
    "--policies",
    default=DEFAULT_POLICIES,
    show_default=True,
    help=f"Comma-separated, from: {', '.join(STRATEGIES)}, as-run (with --from).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@_estimate_options
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
        factors = _overstate_factors(overstate)
        staged = StagedOutput(out, "compare")
        options = _window_options(jobs_window, round_gpus, clip_duration, rebase, repeat)
        jobs: list[tuple[str, Inputs]] = []  # (folder under OUT, inputs)
        if scenario is not None:
            if policy_path or cluster or workload or trace or site:
                raise InputError(
                    "--scenario", "", "use either --scenario or --trace or --policy/--cluster/--workload"
                )
            chosen = list(SCENARIOS) if scenario == "all" else [scenario]
            for s in chosen:
                if s not in SCENARIOS:
                    raise InputError(
                        "--scenario", s, f"unknown scenario (known: all, {', '.join(SCENARIOS)})"
                    )
                jobs.append((s, _overstated(inputs_from_scenario(SCENARIOS[s](seed)), factors, seed)))
        else:
            inputs = _file_inputs(
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
            inputs = _overstated(inputs, factors, seed)
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
@_source_options
@click.option(
    "--policy-name",
    default="fairshare",
    show_default=True,
    help=f"The scheduling policy to replay, one of: {', '.join(STRATEGIES)}, as-run (with --from).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@_estimate_options
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
        factors = _overstate_factors(overstate)
        staged = StagedOutput(out, "replay")
        options = _window_options(jobs_window, round_gpus, clip_duration, rebase, repeat)
        inputs = _file_inputs(
            "replay", trace, policy_path, cluster, workload, workload_format, cluster_format, options, site
        )
        inputs = _overstated(inputs, factors, 1)
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
    required=True,
    help="A replay output folder (or a compare folder holding policy folders).",
)
@click.option("--job", required=True, help="Job id.")
def explain(out: Path, job: str) -> None:
    """Show the decisions that touched a job, with their evidence, and why it waited."""
    from .report.explain import explain_all

    try:
        text = explain_all(out, job)
    except InputError as exc:
        _fail(exc)
    click.echo(text)


register_service_commands(main)  # token, policy, audit, review (docs/service.md)
register_sweep(main, _source_options, _window_options)  # fairshare sweep (docs/decisions.md)

if __name__ == "__main__":
    from .__main__ import run

    run(main)
