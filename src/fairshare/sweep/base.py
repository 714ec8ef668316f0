"""The base of a sweep: the policy and cluster files every variant edits, the workload they share, and
the `compare` options that stay the same for every variant.

A variant is run as the `compare` it would be alone: the same source options with `--policy` and
`--cluster` pointing at the variant's files. So a variant of a trace replay keeps its window
(`--trace philly --jobs 20000:36000 ...`), and its files are the trace loader's default policy and
cluster when the user gave none (written out, so every variant's command can be run by hand).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.tree import TreeIndex
from ..errors import InputError
from ..inputs._validation import load_yaml, validate
from ..inputs.cluster import ClusterSpec, build_cluster
from ..inputs.formats import TraceOptions, get_cluster_format, get_workload_format, trace_file
from ..inputs.formats.registry import LoadedWorkload
from ..inputs.formats.traces import ENV, traces_root
from ..inputs.policy import Policy
from ..inputs.workload import load_workload
from ..replay.runner import dump_policy


@dataclass(frozen=True)
class Source:
    """The source options of `compare` as the user gave them (the names `_source_options` uses)."""

    trace: str | None = None
    policy_path: Path | None = None
    cluster: Path | None = None
    workload: Path | None = None
    workload_format: str | None = None
    cluster_format: str | None = None
    jobs_window: str | None = None
    round_gpus: bool = False
    clip_duration: str | None = None
    repeat: int = 1
    rebase: bool = True
    site: Path | None = None  # --from: a site folder (`fairshare import slurm`)

    def shared_args(self) -> list[str]:
        """The compare options every variant keeps (paths made absolute: a variant may run on
        another host of a Slurm cluster, or from another folder)."""
        args: list[str] = []
        if self.site is not None:
            return args  # a variant is a site folder of its own (--from)
        if self.trace is not None:
            args += ["--trace", self.trace]
        if self.workload is not None:
            args += ["--workload", str(self.workload.resolve())]
        if self.workload_format is not None:
            args += ["--workload-format", self.workload_format]
        if self.jobs_window is not None:
            args += ["--jobs", self.jobs_window]
        if self.round_gpus:
            args.append("--round-gpus")
        if self.clip_duration is not None:
            args += ["--clip-duration", self.clip_duration]
        if self.repeat != 1:
            args += ["--repeat", str(self.repeat)]
        if not self.rebase:
            args.append("--no-rebase")
        return args


@dataclass
class Base:
    """The files a sweep varies (as the dicts their YAML holds) and how to check a variant of them."""

    source: Source
    policy: dict[str, Any]
    cluster: dict[str, Any]
    policy_where: str
    cluster_where: str
    loaded: LoadedWorkload | None  # a trace or foreign format, read once; None: a native workload

    def env(self) -> tuple[tuple[str, str], ...]:
        """What a variant's process needs in its environment: where the traces are, as an absolute
        path (the sweep found them relative to its own folder; a Slurm job may start elsewhere)."""
        if self.source.trace is None:
            return ()
        root, _ = traces_root()
        return ((ENV, str(root.resolve())),)

    def check(self, policy: dict[str, Any], cluster: dict[str, Any], where: str) -> int:
        """Validate a variant's files and its jobs against them (as compare would, errors naming
        `where`); the number of jobs."""
        if self.source.site is not None:
            from ..replay.site import inputs_from_site

            where_site = f"{where}: {self.source.site}"
            try:
                n = len(inputs_from_site(self.source.site, policy_data=policy, cluster_data=cluster).jobs)
            except InputError as exc:
                raise InputError(f"{where_site}: {exc.where}", exc.at, exc.message) from None
            return n
        pol = validate(Policy, policy, f"{where}: policy")
        tree = TreeIndex.build(pol.tree)
        spec = validate(ClusterSpec, cluster, f"{where}: cluster")
        built = build_cluster(spec, f"{where}: cluster", pol)
        if self.loaded is not None:
            jobs = self.loaded.jobs(pol, tree, built)
        else:
            assert self.source.workload is not None
            jobs = load_workload(self.source.workload, pol, tree, built)
        if not jobs:
            raise InputError(where, "", "the workload has no jobs")
        return len(jobs)


def resolve(source: Source, options: TraceOptions) -> Base:
    """The base files of a sweep from compare's source options (errors as compare gives them)."""
    if source.site is not None:
        others = (source.trace, source.policy_path, source.cluster, source.workload, source.workload_format)
        if any(x is not None for x in others) or not options.is_default():
            raise InputError(
                "--from", str(source.site), "a site folder holds every input: give no other input"
            )
        policy, cluster = load_yaml(source.site / "policy.yaml"), load_yaml(source.site / "cluster.yaml")
        if not isinstance(policy, dict) or not isinstance(cluster, dict):
            raise InputError("--from", str(source.site), "policy.yaml and cluster.yaml must be mappings")
        return Base(
            source, policy, cluster, str(source.site / "policy.yaml"), str(source.site / "cluster.yaml"), None
        )
    native = source.workload_format in (None, "native")
    if source.trace is None and source.workload is None:
        raise InputError(
            "sweep",
            "",
            "give --policy, --cluster and --workload, or --trace NAME, or --workload with a trace "
            "--workload-format (philly, openb)",
        )
    if source.trace is not None and (source.workload is not None or source.workload_format is not None):
        raise InputError("--trace", source.trace, "use either --trace or --workload/--workload-format")
    loaded: LoadedWorkload | None = None
    if source.trace is not None or not native:
        if source.trace is not None:
            path, spec = trace_file(source.trace)
            wf = get_workload_format(spec.workload_format)
        else:
            assert source.workload is not None
            path, wf = source.workload, get_workload_format(source.workload_format or "native")
        loaded = wf.read(path, options)
    elif not options.is_default():
        raise InputError(
            "--jobs/--round-gpus/--clip-duration",
            "",
            "these options shape a trace; a native workload takes none",
        )
    elif source.policy_path is None or source.cluster is None:
        raise InputError("sweep", "", "a native --workload needs --policy and --cluster")

    if source.cluster is not None:
        fmt = get_cluster_format(source.cluster_format or "native")
        read = fmt.read(source.cluster)
        cluster, cluster_where = dict(read.spec), read.where
    elif loaded is not None and loaded.default_cluster is not None:
        read = loaded.default_cluster()
        cluster, cluster_where = dict(read.spec), read.where
    else:
        raise InputError("--cluster", "", "this workload format has no default cluster: give --cluster PATH")

    if source.policy_path is not None:
        raw = load_yaml(source.policy_path)
        if not isinstance(raw, dict):
            raise InputError(str(source.policy_path), "", "expected a mapping (a policy file)")
        policy, policy_where = raw, str(source.policy_path)
    elif loaded is not None and loaded.default_policy is not None:
        types = sorted({str(p.get("gpu_type")) for p in cluster.get("pools", []) if isinstance(p, dict)})
        policy, policy_where = loaded.default_policy(types), f"{loaded.where}: default policy"
    else:
        raise InputError("--policy", "", "this workload format has no default policy: give --policy PATH")
    return Base(source, policy, cluster, policy_where, cluster_where, loaded)


#: A site folder's files a variant shares with its base (hard-linked where the file system allows).
SITE_SHARED = ("workload.csv", "history.csv", "incumbent.yaml", "import.json")


def write_files(
    folder: Path, policy: dict[str, Any], cluster: dict[str, Any], site: Path | None = None
) -> tuple[Path, Path]:
    """A variant's policy.yaml and cluster.yaml (names that look like numbers quoted); for a site
    source, the variant folder is a site folder: the other files are the base's (hard links, else
    copies)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in SITE_SHARED:
        if site is None:
            break
        src, dst = site / name, folder / name
        if not src.is_file() or dst.exists():
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
    p, c = folder / "policy.yaml", folder / "cluster.yaml"
    p.write_text(dump_policy(policy), encoding="utf-8")
    c.write_text(yaml.safe_dump(cluster, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return p, c
