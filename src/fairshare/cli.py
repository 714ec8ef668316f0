"""The `fairshare` command line (click)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ._units import fmt_duration, instant
from ._validation import load_yaml, validate
from .errors import InputError
from .policy import Policy, TreeIndex
from .results import Comparison
from .strategies import STRATEGIES

DEFAULT_POLICIES = "fairshare,priority-labels,fifo"


def _fail(exc: InputError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fairshare")
def main() -> None:
    """Budget-based fair-share scheduling for GPU clusters: check policies, replay and compare."""


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
            from .cluster import load_cluster
            from .policy import resolve_exceptions

            cl = load_cluster(cluster, pol)
            resolve_exceptions(pol, tree, cl.epoch, str(policy), strict=True)
            click.echo(
                f"cluster {cluster}: {len(cl.nodes)} nodes, {cl.total_gpus()} GPUs "
                f"({', '.join(cl.gpu_types)})"
            )
            if workload is not None:
                from .workload import load_workload

                jobs = load_workload(workload, pol, tree, cl)
                click.echo(f"workload {workload}: {len(jobs)} jobs")
                capped = [j for j in jobs if j.protected_capped]
                if capped:
                    click.echo(
                        f"note: {len(capped)} job(s) asked for more protection than their class's "
                        f"max_protected and were capped (first: {capped[0].id}, to "
                        f"{fmt_duration(capped[0].protected)})"
                    )
        elif workload is not None:
            raise InputError("--workload", "", "checking a workload needs --cluster too")
        else:
            _warn_past_expiries(pol, policy)
    except InputError as exc:
        _fail(exc)
    click.echo("ok")


def _warn_past_expiries(pol: Policy, where: Path) -> None:
    today = dt.datetime.now(dt.UTC)
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
    from .scenarios import DESCRIPTIONS

    for name, text in DESCRIPTIONS.items():
        click.echo(f"{name:<18} {text}")


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[[int], None] | None]:
    if not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        yield bar.update


@main.command()
@click.option("--scenario", help="A built-in scenario name, or 'all'.")
@click.option("--seed", default=1, show_default=True, help="Seed of the scenario generator.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Policy YAML.")
@click.option("--cluster", type=click.Path(path_type=Path), help="Cluster YAML.")
@click.option("--workload", type=click.Path(path_type=Path), help="Workload CSV or JSON Lines.")
@click.option(
    "--policies",
    default=DEFAULT_POLICIES,
    show_default=True,
    help=f"Comma-separated, from: {', '.join(STRATEGIES)}.",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option("--require-gates", is_flag=True, help="Exit 1 when a fairshare rollout gate fails.")
def compare(
    scenario: str | None,
    seed: int,
    policy_path: Path | None,
    cluster: Path | None,
    workload: Path | None,
    policies: str,
    out: Path,
    require_gates: bool,
) -> None:
    """Replay the same arrivals under several policies; write outputs and report.html."""
    from .report import write_report
    from .runner import check_policies, inputs_from_files, inputs_from_scenario
    from .runner import compare as run_compare
    from .scenarios import SCENARIOS
    from .table import format_comparison

    try:
        names = check_policies(policies.split(","))
        jobs: list[tuple[Path, Any]] = []
        if scenario is not None:
            if policy_path or cluster or workload:
                raise InputError("--scenario", "", "use either --scenario or --policy/--cluster/--workload")
            chosen = list(SCENARIOS) if scenario == "all" else [scenario]
            for s in chosen:
                if s not in SCENARIOS:
                    raise InputError(
                        "--scenario", s, f"unknown scenario (known: all, {', '.join(SCENARIOS)})"
                    )
                jobs.append((out / s, lambda s=s: inputs_from_scenario(SCENARIOS[s](seed))))
        else:
            if not (policy_path and cluster and workload):
                raise InputError(
                    "compare", "", "give --scenario, or all of --policy, --cluster and --workload"
                )
            inputs = inputs_from_files(policy_path, cluster, workload)
            jobs.append((out, lambda: inputs))
        comparisons: list[Comparison] = []
        for folder, make in jobs:
            inputs = make()
            with _progress(f"{inputs.name:<18}", len(inputs.jobs) * len(names)) as bar:
                comp = run_compare(inputs, names, folder, bar)
            comparisons.append(comp)
            click.echo(format_comparison(comp))
            click.echo("")
    except InputError as exc:
        _fail(exc)
    out.mkdir(parents=True, exist_ok=True)
    write_report(out / "report.html", comparisons)
    click.echo(f"wrote {out / 'report.html'}")
    if require_gates:
        failed = [
            (c.scenario, g)
            for c in comparisons
            for r in c.results
            if r.policy == "fairshare"
            for g, v in r.metrics["gates"].items()
            if not v["pass"]
        ]
        if failed:
            for s, g in failed:
                click.echo(f"gate failed: {s}: fairshare {g}", err=True)
            sys.exit(1)


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
    from .explain import explain as explain_job
    from .explain import replay_folders

    try:
        texts = [explain_job(f, job) for f in replay_folders(out)]
    except InputError as exc:
        _fail(exc)
    click.echo("\n\n".join(texts))


if __name__ == "__main__":
    main()
