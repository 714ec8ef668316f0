"""Loading inputs (files or built-in scenarios) and running policy comparisons on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ._validation import load_yaml, validate
from .cluster import Cluster, ClusterSpec, build_cluster
from .errors import InputError
from .outputs import write_replay
from .policy import Policy, TreeIndex
from .results import Comparison
from .scenarios import ScenarioData
from .sim import ReplayOutput, Simulator
from .strategies import STRATEGIES
from .workload import Job, jobs_from_dicts, load_workload


@dataclass(frozen=True)
class Inputs:
    name: str
    description: str
    policy: Policy
    policy_text: str
    policy_where: str
    tree: TreeIndex
    cluster: Cluster
    jobs: list[Job]


def inputs_from_files(
    policy_path: Path, cluster_path: Path, workload_path: Path, name: str = "workload"
) -> Inputs:
    raw = load_yaml(policy_path)
    policy = validate(Policy, raw, str(policy_path))
    tree = TreeIndex.build(policy.tree)
    cluster = build_cluster(
        validate(ClusterSpec, load_yaml(cluster_path), str(cluster_path)), str(cluster_path), policy
    )
    jobs = load_workload(workload_path, policy, tree, cluster)
    return Inputs(
        name,
        f"{workload_path.name} on {cluster_path.name}",
        policy,
        policy_path.read_text(encoding="utf-8"),
        str(policy_path),
        tree,
        cluster,
        jobs,
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


def check_policies(names: Sequence[str]) -> list[str]:
    out = []
    for raw in names:
        n = raw.strip()
        if n not in STRATEGIES:
            raise InputError("--policies", n, f"unknown policy (known: {', '.join(STRATEGIES)})")
        out.append(n)
    return out


def run_policy(
    inputs: Inputs, policy_name: str, progress: Callable[[int], None] | None = None
) -> ReplayOutput:
    sim = Simulator(
        inputs.policy,
        inputs.tree,
        inputs.cluster,
        inputs.jobs,
        policy_name,
        scenario=inputs.name,
        where=inputs.policy_where,
        progress=progress,
    )
    return sim.run()


def compare(
    inputs: Inputs, policies: Sequence[str], out: Path | None, progress: Callable[[int], None] | None = None
) -> Comparison:
    results = []
    for name in policies:
        output = run_policy(inputs, name, progress)
        folder = None
        if out is not None:
            folder = out / name
            write_replay(folder, inputs.cluster, inputs.policy_text, output)
        r = output.result
        results.append(
            type(r)(
                r.policy,
                r.scenario,
                r.metrics,
                r.series,
                r.waits,
                r.lost_gpu_h,
                str(folder) if folder else None,
            )
        )
    return Comparison(inputs.name, inputs.description, tuple(results))
