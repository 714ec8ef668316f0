"""A site folder (`fairshare import slurm --out DIR`, /work/coord/site-contract.md) as the inputs
of `compare --from DIR` and `replay --from DIR`: policy.yaml, cluster.yaml, workload.csv (the
usual FORMATS inputs), history.csv (what really ran, for `as-run`), incumbent.yaml (the site's
slurm-multifactor settings) and import.json (optional: what the import read and skipped).

The incumbent's settings become the policy's `scheduling:` knobs of the same names (they win over
the policy file's): only slurm-multifactor reads them, so every other strategy replays as it would
on policy.yaml alone. Its `not_modelled` list is carried to the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from ..core.tree import TreeIndex
from ..errors import InputError
from ..inputs._validation import StrictModel, load_yaml, read_text, validate
from ..inputs.cluster import ClusterSpec, build_cluster
from ..inputs.policy import Policy, Scheduling, review_warnings
from ..inputs.workload import load_workload
from .history import load_history
from .loaded import Inputs

FILES = ("policy.yaml", "cluster.yaml", "workload.csv", "history.csv", "incumbent.yaml")
#: incumbent.yaml keys that are the policy's `scheduling:` knobs (Scheduling)
KNOBS = (
    "decay_half_life",
    "decay_period",
    "decay_phase",
    "priority_max_age",
    "weight_fairshare",
    "weight_age",
    "bf_interval",
    "bf_window",
    "bf_resolution",
    "bf_max_job_test",
    "bf_continue",
    "sched_interval",
)


class NotModelled(StrictModel):
    key: str
    value: Any = None
    why: str = ""


class Incumbent(StrictModel):
    """incumbent.yaml: the knobs (checked as the policy's `scheduling:` checks them), the weights
    the model has no factor for, informational strings, and what the import found unmodelled."""

    decay_half_life: Any = None
    decay_period: Any = None
    decay_phase: Any = None
    priority_max_age: Any = None
    weight_fairshare: Any = None
    weight_age: Any = None
    bf_interval: Any = None
    bf_window: Any = None
    bf_resolution: Any = None
    bf_max_job_test: Any = None
    bf_continue: Any = None
    sched_interval: Any = None
    weight_job_size: float = Field(default=0.0, ge=0)
    weight_partition: float = Field(default=0.0, ge=0)
    weight_qos: float = Field(default=0.0, ge=0)
    slurm_version: str | None = None
    priority_type: str | None = None
    priority_flags: str | None = None
    slurmctld_boot: str | None = None
    not_modelled: tuple[NotModelled, ...] = ()


def _need(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise InputError(
            str(path),
            "",
            f"missing: a site folder holds {', '.join(FILES)} (written by `fairshare import slurm --out`)",
        )
    return path


def incumbent_knobs(path: Path) -> tuple[dict[str, Any], tuple[dict[str, str], ...], list[str]]:
    """(the scheduling knobs it sets, its not-modelled settings, notes) from incumbent.yaml."""
    where = str(path)
    inc = validate(Incumbent, load_yaml(path), where)
    knobs = {k: getattr(inc, k) for k in KNOBS if getattr(inc, k) is not None}
    validate(Scheduling, knobs, where)  # each value checked where it is written
    not_modelled = [{"key": n.key, "value": str(n.value), "why": n.why} for n in inc.not_modelled]
    listed = {n["key"] for n in not_modelled}
    for key, slurm_name in (
        ("weight_job_size", "PriorityWeightJobSize"),
        ("weight_partition", "PriorityWeightPartition"),
        ("weight_qos", "PriorityWeightQOS"),
    ):
        value = getattr(inc, key)
        if value and slurm_name not in listed:
            not_modelled.append(
                {"key": slurm_name, "value": f"{value:g}", "why": "the model has no such priority factor"}
            )
    if knobs.get("bf_continue"):
        not_modelled.append(
            {
                "key": "bf_continue",
                "value": "true",
                "why": "no effect in the model: its backfill cycle never yields its locks, so it never "
                "has to continue",
            }
        )
    parts = [f"{k} {v}" for k, v in knobs.items()]
    version = f" (Slurm {inc.slurm_version})" if inc.slurm_version else ""
    notes = [f"incumbent{version}: slurm-multifactor with {', '.join(parts) or 'its defaults'}"]
    if not_modelled:
        notes.append(
            "incumbent settings not modelled: " + "; ".join(f"{n['key']}={n['value']}" for n in not_modelled)
        )
    return knobs, tuple(not_modelled), notes


def inputs_from_site(
    folder: Path,
    other_inputs: bool = False,
    *,
    policy_data: dict[str, Any] | None = None,
    cluster_data: dict[str, Any] | None = None,
) -> Inputs:
    """The inputs of a site folder, incumbent settings applied and history loaded (`other_inputs`:
    the command line also gave inputs or trace options, an error). `policy_data`/`cluster_data`
    stand in for policy.yaml/cluster.yaml (a sweep's variant, checked before it is written)."""
    if other_inputs:
        raise InputError(
            "--from",
            str(folder),
            "a site folder holds every input: give no --trace, --policy, --cluster, --workload or "
            "trace option (--jobs, --round-gpus, --clip-duration, --repeat) with it",
        )
    if not folder.is_dir():
        raise InputError("--from", str(folder), "not a folder (a site folder from `fairshare import slurm`)")
    paths = {name: _need(folder, name) for name in FILES}
    knobs, not_modelled, notes = incumbent_knobs(paths["incumbent.yaml"])
    policy_path = paths["policy.yaml"]
    raw = load_yaml(policy_path) if policy_data is None else policy_data
    if not isinstance(raw, dict):
        raise InputError(str(policy_path), "", "expected a mapping (a policy file)")
    held = raw.get("scheduling")
    scheduling: dict[str, Any] = held if isinstance(held, dict) else {}
    raw = {**raw, "scheduling": {**scheduling, **knobs}}
    policy = validate(Policy, raw, str(policy_path))
    tree = TreeIndex.build(policy.tree)
    cluster_path = paths["cluster.yaml"]
    cluster = build_cluster(
        validate(
            ClusterSpec, load_yaml(cluster_path) if cluster_data is None else cluster_data, str(cluster_path)
        ),
        str(cluster_path),
        policy,
    )
    review_warnings(policy, str(policy_path), cluster.epoch, f"before the epoch, {cluster.epoch.date()}")
    jobs = load_workload(paths["workload.csv"], policy, tree, cluster)
    history = load_history(paths["history.csv"], jobs, cluster)
    notes = [*_import_notes(folder / "import.json"), *notes]
    if history.dropped:
        notes.append(f"history: {history.dropped} run(s) of no time that did not end their job left out")
    return Inputs(
        folder.name or "site",
        f"site folder {folder}",
        policy,
        read_text(policy_path),
        str(policy_path),
        tree,
        cluster,
        jobs,
        tuple(notes),
        history,
        not_modelled,
    )


def _import_notes(path: Path) -> list[str]:
    """A line on what the import read (import.json, optional)."""
    if not path.is_file():
        return []
    try:
        data = json.loads(read_text(path))
    except ValueError as exc:
        raise InputError(str(path), "", f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "", "expected a JSON object")
    jobs: dict[str, Any] = data["jobs"] if isinstance(data.get("jobs"), dict) else {}
    span: dict[str, Any] = data["span"] if isinstance(data.get("span"), dict) else {}
    skipped: dict[str, Any] = jobs["skipped"] if isinstance(jobs.get("skipped"), dict) else {}
    line = f"import: {jobs.get('imported', '?')} of {jobs.get('read', '?')} jobs"
    if span:
        line += f", {span.get('start', '?')} .. {span.get('end', '?')}"
    if skipped:
        line += "; skipped " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
    return [line]
