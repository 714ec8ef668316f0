"""Loading inputs (files or built-in scenarios) and comparing strategies on them."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..core.strategies import STRATEGIES
from ..core.tree import TreeIndex
from ..errors import InputError
from ..inputs._validation import load_yaml, read_yaml_text, validate
from ..inputs.cluster import ClusterSpec, build_cluster
from ..inputs.formats import (
    WORKLOAD_FORMATS,
    TraceOptions,
    get_cluster_format,
    get_workload_format,
    trace_file,
)
from ..inputs.limits import MAX_DURATION
from ..inputs.policy import Policy, review_warnings
from ..inputs.scenarios import ScenarioData
from ..inputs.workload import jobs_from_dicts, load_workload
from .loaded import Inputs
from .outputs import write_replay
from .results import Comparison, ReplayOutput
from .sim import Simulator


def inputs_from_files(
    policy_path: Path, cluster_path: Path, workload_path: Path, name: str = "workload"
) -> Inputs:
    raw = load_yaml(policy_path)
    policy = validate(Policy, raw, str(policy_path))
    tree = TreeIndex.build(policy.tree)
    cluster = build_cluster(
        validate(ClusterSpec, load_yaml(cluster_path), str(cluster_path)), str(cluster_path), policy
    )
    review_warnings(policy, str(policy_path), cluster.epoch, f"before the epoch, {cluster.epoch.date()}")
    jobs = load_workload(workload_path, policy, tree, cluster)
    return Inputs(
        name,
        f"{workload_path.name} on {cluster_path.name}",
        policy,
        read_yaml_text(policy_path),
        str(policy_path),
        tree,
        cluster,
        jobs,
    )


def inputs_from_sources(
    workload: Path,
    *,
    workload_format: str = "native",
    policy: Path | None = None,
    cluster: Path | None = None,
    cluster_format: str = "native",
    options: TraceOptions | None = None,
    name: str = "workload",
) -> Inputs:
    """Inputs from a workload of any registered format.

    A trace format may supply the cluster and policy: its defaults are used for whichever of
    `policy` / `cluster` is None. `options` (window, rounding, clipping) apply to trace formats only.
    """
    options = options or TraceOptions()
    wf = get_workload_format(workload_format)
    cf = get_cluster_format(cluster_format)
    if not wf.window and not options.is_default():
        traces = ", ".join(n for n, f in WORKLOAD_FORMATS.items() if f.window)
        raise InputError(
            "--jobs/--round-gpus/--clip-duration",
            "",
            f"these options shape a trace ({traces}); the {wf.name} workload format takes none of them",
        )
    if wf.name == "native" and cf.name == "native" and policy is not None and cluster is not None:
        return inputs_from_files(policy, cluster, workload, name)
    loaded = wf.read(workload, options)
    if cluster is not None:
        source = cf.read(cluster)
    elif loaded.default_cluster is not None:
        source = loaded.default_cluster()
    else:
        raise InputError(
            "--cluster", "", f"the {wf.name} workload format has no default cluster: give --cluster PATH"
        )
    spec = validate(ClusterSpec, source.spec, source.where)
    notes = list(loaded.summary) + list(source.summary)
    if policy is not None:
        raw = load_yaml(policy)
        text = read_yaml_text(policy)
        policy_where = str(policy)
    elif loaded.default_policy is not None:
        raw = loaded.default_policy(sorted({p.gpu_type for p in spec.pools}))
        policy_where = f"{loaded.where}: default policy"
        text = (
            f"# The {wf.name} loader's default policy for {workload} (fairshare.inputs.formats.{wf.name};\n"
            "# the shares, classes and GPU rates are explained in docs/traces.md).\n" + dump_policy(raw)
        )
        notes.append(f"policy: the {wf.name} default ({len(raw['tree'])} groups; see docs/traces.md)")
    else:
        raise InputError(
            "--policy", "", f"the {wf.name} workload format has no default policy: give --policy PATH"
        )
    pol = validate(Policy, raw, policy_where)
    tree = TreeIndex.build(pol.tree)
    built = build_cluster(spec, source.where, pol)
    review_warnings(pol, policy_where, built.epoch, f"before the epoch, {built.epoch.date()}")
    jobs = loaded.jobs(pol, tree, built)
    if not jobs:
        raise InputError(loaded.where, "", "the workload has no jobs")
    cluster_name = Path(source.where).name if cluster is not None else f"the {wf.name} default cluster"
    shaped = options.describe()
    return Inputs(
        name,
        f"{workload.name} ({wf.name}{'; ' + shaped if shaped else ''}) on {cluster_name}",
        pol,
        text,
        policy_where,
        tree,
        built,
        jobs,
        tuple(notes),
    )


class _PolicyDumper(yaml.SafeDumper):
    """Quotes strings a YAML 1.2 reader would take for numbers (team names such as 6214e9, 103959)."""


_NUMBERLIKE = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = '"' if _NUMBERLIKE.match(data) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_PolicyDumper.add_representer(str, _represent_str)


def dump_policy(policy: dict[str, Any]) -> str:
    """A policy dict as YAML, names that look like numbers quoted."""
    return yaml.dump(policy, Dumper=_PolicyDumper, sort_keys=False, allow_unicode=True)


def inputs_from_trace(
    trace: str,
    *,
    policy: Path | None = None,
    cluster: Path | None = None,
    cluster_format: str = "native",
    options: TraceOptions | None = None,
) -> Inputs:
    """Inputs from a named public trace under $FAIRSHARE_TRACES (formats.traces)."""
    path, spec = trace_file(trace)
    return inputs_from_sources(
        path,
        workload_format=spec.workload_format,
        policy=policy,
        cluster=cluster,
        cluster_format=cluster_format,
        options=options,
        name=trace,
    )


def inputs_from_scenario(data: ScenarioData) -> Inputs:
    where = f"scenario {data.name}"
    policy = validate(Policy, data.policy, f"{where}: policy")
    tree = TreeIndex.build(policy.tree)
    cluster = build_cluster(
        validate(ClusterSpec, data.cluster, f"{where}: cluster"), f"{where}: cluster", policy
    )
    jobs = jobs_from_dicts(data.jobs, policy, tree, cluster, where=f"{where}: workload")
    text = yaml.safe_dump(data.policy, sort_keys=False)
    return Inputs(data.name, data.description, policy, text, f"{where}: policy", tree, cluster, jobs)


def overstate_estimates(inputs: Inputs, low: float, high: float, seed: int = 1) -> Inputs:
    """The same inputs with every job's declared estimate set to its true run time times a factor
    drawn log-uniformly from [low, high] (users overstate their time limits, 2-10x is common).
    The factor of a job depends only on the seed and the job's id, so it is the same for every
    strategy and whatever other jobs there are."""
    if not (0 < low <= high) or not (math.isfinite(low) and math.isfinite(high)):
        raise InputError("--overstate", f"{low:g}:{high:g}", "expected 0 < LOW <= HIGH, e.g. 2:10")
    jobs = []
    for job in inputs.jobs:
        digest = hashlib.sha256(f"{seed}/{job.id}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        factor = low * (high / low) ** u
        estimate = min(job.work * factor, max(job.work, MAX_DURATION))  # a duration: 10 years at most
        jobs.append(dataclasses.replace(job, request=dataclasses.replace(job.request, estimate=estimate)))
    note = f"estimates: every job's declared run time is its true run time x {low:g}-{high:g} (seed {seed})"
    return dataclasses.replace(inputs, jobs=jobs, notes=(*inputs.notes, note))


def check_policies(names: Sequence[str], option: str = "--policies") -> list[str]:
    """The policy names, each known and given once; errors name the option the user typed."""
    out: list[str] = []
    for raw in names:
        n = raw.strip()
        if not n:
            raise InputError(option, ",".join(names), "an empty policy name (a comma too many?)")
        if n not in STRATEGIES and n != "as-run":
            raise InputError(option, n, f"unknown policy (known: {', '.join(STRATEGIES)}, as-run)")
        if n in out:
            raise InputError(option, ",".join(names), f"{n} is given twice: each policy is replayed once")
        out.append(n)
    return out


def simulator(inputs: Inputs, strategy: str, **options: Any) -> Simulator:
    """A Simulator of the inputs under one named strategy (fairshare, fifo, ...); `options` are
    Simulator's keywords (progress, forecast, keep_order, ...)."""
    return Simulator(
        inputs.policy,
        inputs.tree,
        inputs.cluster,
        inputs.jobs,
        strategy,
        scenario=inputs.name,
        where=inputs.policy_where,
        **options,
    )


def run_strategy(
    inputs: Inputs, strategy: str, progress: Callable[[int], None] | None = None, forecast: int = 0
) -> ReplayOutput:
    """Replay the inputs under one named strategy (fairshare, fifo, ...); `forecast` > 0 also
    measures the start forecast on about that many jobs (Simulator)."""
    return simulator(inputs, strategy, progress=progress, forecast=forecast).run()


def compare(
    inputs: Inputs,
    strategies: Sequence[str],
    out: Path | None,
    progress: Callable[[int], None] | None = None,
    forecast: int = 0,
    *,
    finished: Callable[[str], None] | None = None,
    final: Path | None = None,
) -> Comparison:
    """The same arrivals under each strategy, writing `out/<strategy>/` when `out` is given.

    `progress(n)` hears of jobs done, `len(inputs.jobs)` per strategy in all (jobs still running
    at the horizon count as done when the replay ends); `finished(strategy)` of each replay
    written. `final` is where `out` will be once in place (a staged output), for the results'
    `out_dir`. `forecast` > 0 also measures start forecasts (Simulator).
    """
    results = []
    actual = None  # as-run's output, run first when asked for: the others are measured against it
    if "as-run" in strategies:
        from .asrun import run_as_run
        from .fidelity import observe

        as_run = run_as_run(inputs)
        actual = observe(as_run.events)
    fid: dict[str, Any] = {}
    for name in strategies:
        told = 0

        def tick(n: int) -> None:
            nonlocal told
            told += n
            if progress is not None:
                progress(n)

        if name == "as-run":
            output = as_run
        else:
            output = run_strategy(inputs, name, tick if progress is not None else None, forecast)
            if actual is not None:
                fid[name] = _fidelity_of(inputs, actual, output)
                output.result.metrics["fidelity"] = fid[name]
        if progress is not None and told < len(inputs.jobs):
            progress(len(inputs.jobs) - told)
        folder = None
        if out is not None:
            write_replay(out / name, inputs.cluster, inputs.policy_text, output)
            folder = (final or out) / name
        if finished is not None:
            finished(name)
        r = output.result
        results.append(
            type(r)(
                r.strategy,
                r.scenario,
                r.metrics,
                r.series,
                r.waits,
                r.lost_gpu_h,
                str(folder) if folder else None,
            )
        )
    return Comparison(inputs.name, inputs.description, tuple(results), inputs.notes, fid, inputs.not_modelled)


def _fidelity_of(inputs: Inputs, actual: Any, output: ReplayOutput) -> dict[str, Any]:
    from .fidelity import fidelity, observe

    leaves = [inputs.tree.paths[i] for i in inputs.tree.leaves]
    gpus = sum(n.gpus for n in inputs.cluster.nodes)
    return fidelity(inputs.jobs, leaves, gpus, actual, observe(output.events))
