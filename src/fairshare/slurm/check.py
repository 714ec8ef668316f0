"""`fairshare slurm check`: does this Slurm have what fairshare needs to drive it?

Reads `scontrol show config`, sacctmgr (accounts, QOS, the caller's admin level) and sinfo, and
reports every item as ok / wrong (required; with the fix) / warn (works, but not as intended) /
info. `require_ready` is what `fairshare serve --cluster slurm` calls before its first cycle: it
raises SlurmNotReady when a required item is wrong.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..inputs.policy import Policy
from .accounts import account_plan, sacctmgr_commands, section_of
from .client import SlurmBackend
from .mapping import Mapper
from .model import Association, Qos, SlurmNode

Status = Literal["ok", "wrong", "warn", "info"]
RESTART = "in slurm.conf, then restart slurmctld"
RECONFIGURE = "in slurm.conf, then `scontrol reconfigure`"
VERIFIED_VERSIONS = ("22.05",)


@dataclass(frozen=True)
class Finding:
    item: str  # a slurm.conf key, or "account <name>", "qos <name>", ...
    status: Status
    value: str  # what Slurm has
    want: str = ""  # what fairshare needs
    why: str = ""
    fix: str = ""


@dataclass(frozen=True)
class CheckReport:
    cluster: str
    version: str
    findings: tuple[Finding, ...]

    @property
    def wrong(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "wrong")

    @property
    def ok(self) -> bool:
        return not self.wrong

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "wrong": 0, "warn": 0, "info": 0}
        for f in self.findings:
            out[f.status] += 1
        return out

    def text(self) -> str:
        label = {"ok": "ok", "wrong": "WRONG", "warn": "warn", "info": "info"}
        width = max((len(f.item) for f in self.findings), default=10)
        lines = []
        for f in self.findings:
            value = f.value + (f" (want {f.want})" if f.status in ("wrong", "warn") and f.want else "")
            lines.append(f"{label[f.status]:<6} {f.item:<{width}}  {value}".rstrip())
            if f.status != "ok" and f.why:
                lines.append(f"{'':<6} {'':<{width}}  {f.why}")
            if f.status in ("wrong", "warn") and f.fix:
                lines.append(f"{'':<6} {'':<{width}}  fix: {f.fix}")
        c = self.counts()
        verdict = (
            "fairshare can drive this cluster"
            if self.ok
            else "fairshare will not drive this cluster until the wrong items are fixed"
        )
        lines.append(f"{c['ok']} ok, {c['wrong']} wrong, {c['warn']} warnings, {c['info']} notes: {verdict}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "version": self.version,
            "ok": self.ok,
            "counts": self.counts(),
            "findings": [asdict(f) for f in self.findings],
        }


class SlurmNotReady(Exception):
    def __init__(self, report: CheckReport) -> None:
        self.report = report
        items = ", ".join(f.item for f in report.wrong)
        super().__init__(f"Slurm is not set up for fairshare ({items}); run `fairshare slurm check`")


def _has(config: Mapping[str, str], key: str) -> str:
    v = config.get(key, "")
    return "" if v in ("(null)", "N/A") else v


def _words(value: str) -> set[str]:
    return {w.strip().lower() for w in re.split(r"[,\s]+", value) if w.strip()}


def _weight_sum(config: Mapping[str, str]) -> int:
    keys = ("Age", "Assoc", "FairShare", "JobSize", "Partition", "QOS")
    total = 0
    for k in keys:
        v = _has(config, f"PriorityWeight{k}")
        total += int(v) if v.isdigit() else 0
    for item in _has(config, "PriorityWeightTRES").split(","):
        _, _, w = item.partition("=")
        total += int(float(w)) if w.replace(".", "", 1).isdigit() else 0
    return total


def check_config(config: Mapping[str, str], policy: Policy) -> list[Finding]:
    """The slurm.conf settings (pure: the parsed `scontrol show config` in, findings out)."""
    section = section_of(policy)
    out: list[Finding] = []

    def need(key: str, ok: bool, want: str, why: str, fix: str, warn: bool = False) -> None:
        value = _has(config, key) or "(unset)"
        out.append(Finding(key, "ok" if ok else ("warn" if warn else "wrong"), value, want, why, fix))

    version = config.get("SLURM_VERSION", "")
    out.append(
        Finding(
            "SLURM_VERSION",
            "ok" if version.startswith(VERIFIED_VERSIONS) else "warn",
            version or "(unknown)",
            " or ".join(VERIFIED_VERSIONS),
            "fairshare reads squeue/sinfo/sacct --json as Slurm 22.05 prints it; "
            "other versions are not verified",
            "run fairshare in --dry-run first and compare `fairshare slurm check` with squeue",
        )
    )
    ptype = _has(config, "PriorityType")
    need(
        "PriorityType",
        ptype == "priority/multifactor",
        "priority/multifactor",
        "priority/basic gives new jobs priorities near 2^32, above fairshare's band, "
        "so they would jump the order",
        f"PriorityType=priority/multifactor {RESTART}",
    )
    weights = _weight_sum(config)
    out.append(
        Finding(
            "PriorityWeight*",
            "ok" if weights < section.priority_min else "wrong",
            f"sum {weights}",
            f"< slurm.priority_min ({section.priority_min})",
            "Slurm's computed priorities (at most about the sum of the weights) must stay below the band "
            "fairshare sets, so a job fairshare has not placed yet never overtakes the order",
            f"lower the PriorityWeight* values {RECONFIGURE}, or raise slurm.priority_min in the policy",
        )
    )
    site = _has(config, "PrioritySiteFactorPlugin")
    if site:
        out.append(
            Finding(
                "PrioritySiteFactorPlugin",
                "warn",
                site,
                "(unset)",
                "a site factor is unbounded: computed priorities may reach fairshare's band",
                "remove it, or make sure it stays below slurm.priority_min",
            )
        )
    need(
        "PreemptType",
        _has(config, "PreemptType") in ("preempt/none", ""),
        "preempt/none",
        "Slurm's own QOS/partition preemption would preempt runs inside their protected window and "
        "outside the fair-share order; fairshare requeues runs itself",
        f"PreemptType=preempt/none {RESTART}",
    )
    mode = _has(config, "PreemptMode")
    need(
        "PreemptMode",
        mode.upper() in ("OFF", ""),
        "OFF",
        "a preemption or gang mode lets Slurm suspend, requeue or cancel jobs on its own",
        f"PreemptMode=OFF {RECONFIGURE}",
    )
    preempts = policy.scheduling.preemption != "none"
    requeue = _has(config, "JobRequeue")
    out.append(
        Finding(
            "JobRequeue",
            "ok" if requeue == "1" else ("wrong" if preempts else "info"),
            requeue or "(unset)",
            "1",
            "fairshare preempts by `scontrol requeue`; with JobRequeue=0 a batch job submitted without "
            "--requeue cannot be requeued" + ("" if preempts else " (the policy does not preempt)"),
            f"JobRequeue=1 {RECONFIGURE}",
        )
    )
    sched = _has(config, "SchedulerType")
    need(
        "SchedulerType",
        sched == "sched/backfill",
        "sched/backfill",
        "sched/builtin starts strictly in order: GPUs stay idle behind a large job that cannot start yet",
        f"SchedulerType=sched/backfill {RESTART}",
        warn=True,
    )
    params = _words(_has(config, "SchedulerParameters"))
    if "enable_user_top" in params:
        out.append(
            Finding(
                "SchedulerParameters",
                "warn",
                "enable_user_top",
                "without enable_user_top",
                "users may reorder their own jobs with `scontrol top`, changing the priorities fairshare set "
                "until its next cycle",
                f"remove enable_user_top from SchedulerParameters {RECONFIGURE}",
            )
        )
    need(
        "SelectType",
        _has(config, "SelectType") == "select/cons_tres",
        "select/cons_tres",
        "GPUs must be allocated per job and node (gres) for usage and placement",
        f"SelectType=select/cons_tres {RESTART}",
    )
    need(
        "GresTypes",
        "gpu" in _words(_has(config, "GresTypes")),
        "gpu",
        "GPUs are read from the gpu gres",
        f"GresTypes=gpu {RESTART}",
    )
    need(
        "AccountingStorageType",
        _has(config, "AccountingStorageType") == "accounting_storage/slurmdbd",
        "accounting_storage/slurmdbd",
        "accounts, QOS and the usage fairshare charges (sacct) come from slurmdbd",
        f"AccountingStorageType=accounting_storage/slurmdbd {RESTART}",
    )
    enforce = _words(_has(config, "AccountingStorageEnforce"))
    need(
        "AccountingStorageEnforce",
        "associations" in enforce,
        "associations (with limits,qos)",
        "without it a job may run under an account fairshare does not know, charged to no budget",
        f"AccountingStorageEnforce=associations,limits,qos {RESTART}",
    )
    need(
        "AccountingStorageTRES",
        "gres/gpu" in _words(_has(config, "AccountingStorageTRES")),
        "gres/gpu",
        "sacct must report each run's GPUs to charge it",
        f"add gres/gpu to AccountingStorageTRES {RESTART}",
    )
    if section.cluster_name is not None:
        need(
            "ClusterName",
            _has(config, "ClusterName") == section.cluster_name,
            section.cluster_name,
            "the policy names another cluster (slurm.cluster_name)",
            "point SLURM_CONF at the right cluster, or fix slurm.cluster_name in the policy",
        )
    if section.default_class is None and len(policy.classes) > 1:
        out.append(
            Finding(
                "slurm.default_class",
                "wrong",
                "(unset)",
                f"one of {', '.join(policy.classes)}",
                "a job without class= in its comment and without a class-named QOS would have no class",
                "set slurm.default_class in the policy",
            )
        )
    return out


def check_accounts(assocs: Sequence[Association], policy: Policy) -> list[Finding]:
    plan = account_plan(policy)
    accounts = {a.account: a for a in assocs if a.user is None}
    out = []
    for a in plan:
        cmd = " ".join(sacctmgr_commands([a])[0])
        if a.leaf_path is not None:
            present = a.name in accounts
            out.append(
                Finding(
                    f"account {a.name}",
                    "ok" if present else "wrong",
                    f"leaf {a.leaf_path}" + ("" if present else ": missing"),
                    "an account per leaf",
                    "jobs are charged to a leaf through its account",
                    f"{cmd}, then add the team's users to it",
                )
            )
        elif a.name not in accounts:
            out.append(
                Finding(
                    f"account {a.name}",
                    "info",
                    f"group {a.path}: no account",
                    "",
                    "optional: a parent account per group makes sshare show the same tree",
                    cmd,
                )
            )
    mapper = Mapper(policy, {a.account: a.parent for a in assocs if a.user is None and a.parent})
    planned = {a.name for a in plan}
    for name in sorted(set(accounts) - planned - {"root"}):
        leaf, why = mapper.accounts.leaf_of(name)
        out.append(
            Finding(
                f"account {name}",
                "ok" if leaf is not None else "info",
                f"charged to leaf {leaf} ({why})" if leaf is not None else "not in the policy",
                "",
                "" if leaf is not None else why,
            )
        )
    return out


def check_qos(qos: Sequence[Qos], policy: Policy) -> list[Finding]:
    section = section_of(policy)
    names = {q.name for q in qos}
    out = []
    for name, cls in sorted(section.qos_classes.items()):
        out.append(
            Finding(
                f"qos {name}",
                "ok" if name in names else "wrong",
                f"class {cls}" + ("" if name in names else ": no such QOS"),
                "",
                "slurm.qos_classes names a QOS Slurm does not have",
                f"sacctmgr -i add qos {name} (or remove it from slurm.qos_classes)",
            )
        )
    for q in qos:
        if q.preempt or q.preempt_mode.lower() not in ("cluster", "off", ""):
            out.append(
                Finding(
                    f"qos {q.name}",
                    "info",
                    f"Preempt={','.join(q.preempt) or '-'} PreemptMode={q.preempt_mode}",
                    "",
                    "inactive while PreemptType=preempt/none",
                )
            )
    return out


def check_nodes(nodes: Iterable[SlurmNode], policy: Policy) -> list[Finding]:
    mapper = Mapper(policy)
    section = section_of(policy)
    out = []
    seen_parts: set[str] = set()
    types: dict[str | None, list[str]] = {}
    for n in nodes:
        seen_parts.update(n.partitions)
        if not mapper.in_scope(n.partitions) or not n.gpus:
            continue
        for typ in sorted({g or "" for g in n.gpu_types}):
            types.setdefault(typ or None, []).append(n.name)
    for part in section.partitions:
        out.append(
            Finding(
                f"partition {part}",
                "ok" if part in seen_parts else "wrong",
                "present" if part in seen_parts else "no node is in it",
                "",
                "slurm.partitions names a partition without nodes",
                "fix slurm.partitions in the policy",
            )
        )
    if not types:
        out.append(
            Finding("gpu nodes", "wrong", "none", "nodes with gpu gres", "no node in scope has GPUs", "")
        )
    for t, names in sorted(types.items(), key=lambda kv: kv[0] or ""):
        mapped = mapper.gpu_type(t)
        label = t or "(untyped)"
        out.append(
            Finding(
                f"gpu type {label}",
                "ok" if mapped is not None else "wrong",
                f"{len(names)} node(s) -> rate {policy.gpu_rates[mapped]:g} ({mapped})"
                if mapped is not None
                else f"{len(names)} node(s), no rate",
                "",
                "usage is priced per GPU type: every type needs a gpu_rates entry",
                f"add {label} to gpu_rates, or map it under slurm.gpu_types",
            )
        )
    return out


def check_permission(user: str, uid: int, level: str | None, config: Mapping[str, str]) -> Finding:
    slurm_user = _has(config, "SlurmUser").split("(")[0]
    admin = uid == 0 or user == slurm_user or (level or "").lower() in ("operator", "administrator")
    return Finding(
        "permission",
        "ok" if admin else "wrong",
        f"user {user} (AdminLevel {level or 'unknown to Slurm'})",
        "root, SlurmUser, or AdminLevel Operator/Administrator",
        "setting priorities and requeueing other users' jobs needs an operator",
        f"sacctmgr -i modify user {user} set adminlevel=operator",
    )


def current_user() -> tuple[str, int]:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid


def run_check(backend: SlurmBackend, policy: Policy, user: tuple[str, int] | None = None) -> CheckReport:
    """Read Slurm and check everything; SlurmError (e.g. controller down) propagates."""
    config = backend.read_config()
    name, uid = user or current_user()
    findings = check_config(config, policy)
    findings.append(check_permission(name, uid, backend.admin_level(name), config))
    findings += check_accounts(backend.read_associations(), policy)
    findings += check_qos(backend.read_qos(), policy)
    findings += check_nodes(backend.read_nodes(), policy)
    return CheckReport(config.get("ClusterName", "?"), config.get("SLURM_VERSION", "?"), tuple(findings))


def require_ready(backend: SlurmBackend, policy: Policy) -> CheckReport:
    """For `serve --cluster slurm`: the report, or SlurmNotReady when a required item is wrong."""
    report = run_check(backend, policy)
    if not report.ok:
        raise SlurmNotReady(report)
    return report
