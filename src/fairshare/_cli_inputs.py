"""The input options `compare`, `replay` and `sweep` share: where the inputs come from (files, a
site folder, a named trace and its window) and what the scheduler is told of run times
(--overstate, --forecast), with the parsing of their values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._cli_runtime import BoundedInt
from ._units import fmt_duration
from .errors import InputError
from .inputs import limits

if TYPE_CHECKING:
    from .replay.loaded import Inputs


def source_options(f: Callable[..., Any]) -> Callable[..., Any]:
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


def overstate_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--overstate LOW:HIGH: declared run times are the true ones times a drawn factor (compare,
    replay, and explain --at, which must replay what they replayed)."""
    return click.option(
        "--overstate",
        metavar="LOW:HIGH",
        help="Declared run times (estimates, like Slurm time limits) are the true ones times a factor "
        f"drawn per job from LOW..HIGH (log-uniform; e.g. 2:10; each from {limits.MIN_OVERSTATE:g} to "
        f"{limits.MAX_OVERSTATE:g}, the estimate at most 10 years). Default: estimates as the "
        "workload gives them (the true run time when absent).",
    )(f)


def estimate_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """What the scheduler is told of run times: --overstate LOW:HIGH, and --forecast N."""
    return click.option(
        "--forecast",
        type=BoundedInt(0, limits.MAX_FORECAST),
        default=0,
        show_default=True,
        metavar="N",
        help="Forecast the start of about N jobs, sampled evenly, when they arrive, and report how far "
        "the actual starts were (metrics.json 'forecast'; `explain` shows a job's). 0: off.",
    )(overstate_option(f))


def scenario_names(scenario: str, files_given: bool, allow_all: bool = False) -> list[str]:
    """The built-in scenarios `--scenario` names (`all`: every one, where `allow_all`); an
    InputError when input files are given too or the name is unknown."""
    from .inputs.scenarios import SCENARIOS

    if files_given:
        raise InputError(
            "--scenario", "", "use either --scenario or --trace or --policy/--cluster/--workload"
        )
    if allow_all and scenario == "all":
        return list(SCENARIOS)
    if scenario not in SCENARIOS:
        known = ", ".join([*(["all"] if allow_all else []), *SCENARIOS])
        raise InputError("--scenario", scenario, f"unknown scenario (known: {known})")
    return [scenario]


def overstate_factors(overstate: str | None) -> tuple[float, float] | None:
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


def overstated(inputs: Inputs, factors: tuple[float, float] | None, seed: int) -> Inputs:
    """The inputs with estimates overstated per --overstate LOW:HIGH (None: as they are)."""
    if factors is None:
        return inputs
    from .replay.runner import overstate_estimates

    return overstate_estimates(inputs, *factors, seed)


def window_options(
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


def file_inputs(
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
