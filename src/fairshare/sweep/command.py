"""`fairshare sweep`: many variants of the policy and cluster files on the same arrivals, in parallel.

OUT holds `sweep.json` (what was asked: sources, policies, variants and each variant's compare
command), `inputs/<variant>/{policy,cluster}.yaml`, one compare output per variant in `<variant>/`
(exactly what that command writes alone), `logs/<variant>.log`, `summary.json` (the headline
figures, docs/decisions.md) and `report.html`. A sweep that stopped is continued with `--resume`:
variants whose compare output is complete are kept, the others run.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
import orjson

from .._cli_inputs import source_options, window_options
from ..errors import InputError
from ..inputs import limits

if TYPE_CHECKING:
    from .run import LocalExecutor, Outcome, SlurmExecutor, Task
    from .spec import Variant
    from .summary import Summary

SWEEP_FORMAT = 1
EXIT_FAILED = 1  # some variant failed after its retries (the others' outputs and the report are written)
# compare's source options that a sweep passes on (sweep.base.Source's fields)
_SOURCE_KEYS = (
    "trace",
    "policy_path",
    "cluster",
    "workload",
    "workload_format",
    "cluster_format",
    "jobs_window",
    "round_gpus",
    "clip_duration",
    "repeat",
    "rebase",
    "site",
)


def _fail(exc: InputError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


def _complete(folder: Path, names: list[str]) -> bool:
    """A compare output that finished: its root marker lists one folder per policy, and the sums
    it lists (the report, each folder's marker) match; anything else is run again."""
    from ..replay.outputs import load_marker, verified_output

    try:
        marker = load_marker(folder)
        if marker is None or marker.get("fairshare_output") != "output":
            return False
        return sorted(p.name for p in verified_output(folder, marker)) == sorted(names)
    except InputError:
        return False


def _plan(out: Path, shown: Path, spec: dict[str, Any], resume: bool) -> None:
    """Create OUT with its sweep.json, or check that a resumed OUT is the same sweep."""
    from .report import write

    marker = out / "sweep.json"
    if out.exists() and not out.is_dir():
        raise InputError("--out", str(shown), "is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not resume:
            raise InputError(
                "--out",
                str(shown),
                "is not empty: give a new folder, or --resume to continue the sweep there",
            )
        try:
            earlier = orjson.loads(marker.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            raise InputError(
                "--out", str(shown), "holds no sweep (no readable sweep.json): not resumed"
            ) from None
        if earlier != orjson.loads(orjson.dumps(spec)):
            raise InputError(
                "--out",
                str(out),
                "holds another sweep (its sweep.json differs: other sources, variants or "
                "policies); give a new folder",
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    write(marker, orjson.dumps(spec, option=orjson.OPT_INDENT_2).decode() + "\n")


@click.command()
@source_options
@click.option(
    "--vary",
    "varies",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="A key of the policy (or `cluster.` + a key of the cluster) and the values to try; "
    "several --vary make a grid. `+N`/`-N`: relative to the base number.",
)
@click.option(
    "--variants",
    "variants_path",
    type=click.Path(path_type=Path),
    help="A YAML list of variants instead of a grid: - {name: ..., set: {KEY: VALUE}}.",
)
@click.option(
    "--policies",
    default="fairshare,slurm-multifactor",
    show_default=True,
    help="Comma-separated strategies, replayed on every variant.",
)
@click.option("--seed", type=click.IntRange(0, limits.MAX_SEED), default=1, show_default=True)
@click.option("--overstate", metavar="LOW:HIGH", help="As compare's --overstate, for every variant.")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option("--resume", is_flag=True, help="Continue the sweep in OUT: completed variants are kept.")
@click.option("--executor", type=click.Choice(["local", "slurm"]), default="local", show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Local executor: variants at once (default: every core this process may use).",
)
@click.option("--partition", help="Slurm executor: the partition of the jobs (default: Slurm's default).")
@click.option(
    "--max-parallel",
    type=click.IntRange(1, 100_000),
    default=50,
    show_default=True,
    help="Slurm executor: jobs running at once.",
)
@click.option(
    "--timeout",
    "timeout_min",
    type=click.IntRange(1, 525_600),
    default=240,
    show_default=True,
    help="Slurm executor: each job's time limit, minutes.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Retries of a variant that crashed or was killed (bad input is not retried).",
)
def sweep(
    varies: tuple[str, ...],
    variants_path: Path | None,
    policies: str,
    seed: int,
    overstate: str | None,
    out: Path,
    resume: bool,
    executor: str,
    workers: int | None,
    partition: str | None,
    max_parallel: int,
    timeout_min: int,
    retries: int,
    **source_kwargs: Any,
) -> None:
    """Replay variants of the policy and cluster on the same arrivals and report the decisions.

    Each variant is the `fairshare compare` it would be alone (its command is in sweep.json and
    the report); they run on every local core, or as jobs on a Slurm cluster (--executor slurm).
    See docs/decisions.md.
    """
    from ..inputs._validation import load_yaml
    from ..replay.runner import check_policies
    from .base import Source, resolve, write_files
    from .run import LocalExecutor, SlurmExecutor, Task, default_workers
    from .spec import apply, grid, number_variants, parse_vary, variants_file
    from .summary import summarize

    try:
        names = check_policies(policies.split(","))
        known = {k: source_kwargs.pop(k) for k in _SOURCE_KEYS if k in source_kwargs}
        unsupported = {k: v for k, v in source_kwargs.items() if v not in (None, False)}
        if unsupported:
            raise InputError("sweep", "", f"not supported by sweep: {', '.join(sorted(unsupported))}")
        source = Source(**known)
        options = window_options(
            source.jobs_window, source.round_gpus, source.clip_duration, source.rebase, source.repeat
        )
        if varies and variants_path is not None:
            raise InputError("--variants", str(variants_path), "use either --vary or --variants")
        if variants_path is not None:
            combos = variants_file(load_yaml(variants_path), str(variants_path))
        elif varies:
            combos = grid([parse_vary(v) for v in varies])
        else:
            raise InputError("sweep", "", "give --vary KEY=V1,V2,... (one or more) or --variants FILE")
        base = resolve(source, options)
        variants = number_variants(combos, base.policy, base.cluster)
        files = {}
        for v in variants:  # every variant checked before anything runs
            policy, cluster = apply(v, base.policy, base.cluster)
            base.check(policy, cluster, f"variant {v.id} ({v.name})")
            files[v.id] = (policy, cluster)
        shown, out = out, out.resolve()
        extra = ["--seed", str(seed)] + (["--overstate", overstate] if overstate else [])
        argvs = {
            v.id: (
                "compare",
                *source.shared_args(),
                *_variant_inputs(out / "inputs" / v.id, source.site is not None),
                "--policies",
                ",".join(names),
                *extra,
                "--out",
                str(out / v.id),
            )
            for v in variants
        }
        commands = {vid: "fairshare " + shlex.join(a) for vid, a in argvs.items()}
        spec = {
            "format": SWEEP_FORMAT,
            "policies": names,
            "variants": [v.as_json() for v in variants],
            "commands": commands,
        }
        _plan(out, shown, spec, resume)
        for v in variants:
            write_files(out / "inputs" / v.id, *files[v.id], site=source.site)
    except InputError as exc:
        _fail(exc)

    env = base.env()
    todo = [
        Task(v.id, argvs[v.id], out / "logs" / f"{v.id}.log", env)
        for v in variants
        if not _complete(out / v.id, names)
    ]
    kept = len(variants) - len(todo)
    if kept:
        click.echo(f"resuming: {kept} of {len(variants)} variants already complete", err=True)
    runner: LocalExecutor | SlurmExecutor
    if executor == "local":
        runner = LocalExecutor(workers or default_workers(), retries)
    else:
        runner = SlurmExecutor(out / "slurm", partition, max_parallel, retries, timeout_min)
    outcomes = _run(runner, todo)

    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        codes = ", ".join(str(c) for c in o.attempts)
        click.echo(f"error: variant {o.task.id} failed (exit codes {codes}; see {o.task.log})", err=True)
    summaries = [
        summarize(out / v.id / p, v.id, p) for v in variants if _complete(out / v.id, names) for p in names
    ]
    _report(out, variants, summaries, names, commands)
    click.echo(f"wrote {shown / 'report.html'}")
    if failed:
        sys.exit(EXIT_FAILED)


def _variant_inputs(folder: Path, site: bool) -> tuple[str, ...]:
    """The compare options naming a variant's files: its site folder, or its policy and cluster."""
    if site:
        return ("--from", str(folder))
    return ("--policy", str(folder / "policy.yaml"), "--cluster", str(folder / "cluster.yaml"))


def _run(runner: LocalExecutor | SlurmExecutor, tasks: list[Task]) -> list[Outcome]:
    total = len(tasks)
    if not total:
        return []
    bar: Any = None
    done_count = 0
    if sys.stderr.isatty():
        bar = click.progressbar(length=total, label="variants", file=sys.stderr)
        bar.__enter__()

    def done(outcome: Outcome) -> None:
        nonlocal done_count
        done_count += 1
        if bar is not None:
            bar.update(1)
        else:
            state = "done" if outcome.ok else f"failed (exit {outcome.attempts[-1]})"
            retried = f" after {len(outcome.attempts)} attempts" if len(outcome.attempts) > 1 else ""
            click.echo(f"variant {outcome.task.id} {state}{retried} [{done_count}/{total}]", err=True)

    try:
        return runner.run(tasks, done)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


def _report(
    out: Path, variants: list[Variant], summaries: list[Summary], names: list[str], commands: dict[str, str]
) -> None:
    from . import report as report_mod
    from .charts import draw
    from .decide import decide

    decisions = decide(variants, summaries, names)
    report_mod.write(
        out / "summary.json",
        orjson.dumps(
            {
                "format": SWEEP_FORMAT,
                "policy": decisions.policy,
                "recommended": decisions.recommended,
                "passing": list(decisions.passing),
                "verdict": decisions.verdict,
                "summaries": [s.as_json() for s in summaries],
            },
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
        ).decode()
        + "\n",
    )
    charts = draw(summaries, decisions) if summaries else {}
    report_mod.write(
        out / "report.html",
        report_mod.render("fairshare sweep", variants, summaries, decisions, commands, charts),
    )
    click.echo(report_mod.terminal(variants, summaries, decisions))
