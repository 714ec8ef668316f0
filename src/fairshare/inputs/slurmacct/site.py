"""What the readers found, turned into the site folder (/work/coord/site-contract.md).

`build_site` takes the records of the sacct files (streamed), the associations, the settings and the
nodes; it groups records by JobID (with `sacct -D` a requeued job has one record per run), keeps the
jobs that ran, counts the others by reason, and returns the folder's files as text.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...errors import InputError, warn
from .. import limits
from ._text import Anonymizer, iso, num
from .assoc import Associations
from .nodes import Node
from .sacct import PARTITION_LIMIT, Record, expand_nodes
from .settings import Settings, incumbent

WORKLOAD_COLUMNS = (
    "job_id",
    "submit",
    "group",
    "user",
    "class",
    "gpus",
    "nodes",
    "gpu_type",
    "cpus",
    "mem_gb",
    "work",
    "estimate",
)
HISTORY_COLUMNS = ("job_id", "start", "end", "end_reason", "nodes")
END_REASONS = {
    "COMPLETED": "finished",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "failed",
    "TIMEOUT": "timeout",
    "CANCELLED": "cancelled",
    "PREEMPTED": "preempted",
    "REQUEUED": "requeued",
    "NODE_FAIL": "node_fail",
    "RUNNING": "running",
    "SUSPENDED": "running",
    "COMPLETING": "running",
    "CONFIGURING": "running",
}
#: Why a job is not imported (the keys of import.json `jobs.skipped`), in the order printed.
REASONS = {
    "cancelled_before_start": "cancelled before it started",
    "pending_at_end": "still pending at the end of the span",
    "never_started": "ended without starting (e.g. a dependency never met)",
    "no_gpus": "asked for no GPU (fairshare schedules GPUs)",
    "unknown_account": "account not in the associations",
    "uneven_gang": "GPUs do not divide evenly over its nodes",
    "ran_on_unknown_node": "ran on a node not in the nodes file (or one without GPUs)",
    "fits_no_pool": "fits no pool of the nodes file",
    "bad_row": "a bad row (--skip-bad)",
}


@dataclass
class Options:
    class_from: str = "qos"  # or "partition"
    leaves: str = "account"  # or "user"
    anonymizer: Anonymizer = field(default_factory=lambda: Anonymizer(False))
    span_start: float | None = None
    span_end: float | None = None
    tz: dt.tzinfo = dt.UTC  # of the ISO times in the files (BOOT_TIME as sacct's)


@dataclass(frozen=True)
class Pool:
    name: str
    gpu_type: str
    gpus: int
    cpus: int
    mem_gb: float
    nodes: tuple[str, ...]  # Slurm names, sorted


@dataclass
class Site:
    files: dict[str, str]  # file name -> text
    summary: dict[str, Any]  # import.json


def pools_of(nodes: Sequence[Node]) -> tuple[list[Pool], dict[str, str], int]:
    """Pools of identical GPU nodes, the Slurm -> cluster node names, and the nodes without GPUs."""
    groups: dict[tuple[str, int, int, float], list[str]] = {}
    cpu_only = 0
    for n in nodes:
        if n.gpus <= 0:
            cpu_only += 1
            continue
        groups.setdefault((n.gpu_type, n.gpus, n.cpus, n.mem_gb), []).append(n.name)
    pools: list[Pool] = []
    used: Counter[str] = Counter()
    for key in sorted(groups):
        gpu_type, gpus, cpus, mem = key
        base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in gpu_type) or "gpu"
        used[base] += 1
        name = base if used[base] == 1 else f"{base}-{used[base]}"
        pools.append(Pool(name, gpu_type, gpus, cpus, mem, tuple(_natural(groups[key]))))
    names = {slurm: f"{p.name}-{i:03d}" for p in pools for i, slurm in enumerate(p.nodes)}
    return pools, names, cpu_only


def _natural(names: list[str]) -> list[str]:
    import re

    return sorted(
        names, key=lambda s: [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", s)]
    )


class _Tree:
    """The account tree of the associations, and the leaf path of each (account, user)."""

    def __init__(
        self, assocs: Associations | None, job_accounts: set[str], opts: Options, cluster: str, where: str
    ) -> None:
        self.notes: list[str] = []
        anon = opts.anonymizer
        accounts: dict[str, tuple[str, float]] = {}  # account -> (parent, share)
        users: dict[str, list[tuple[str, float]]] = {}  # account -> [(user, share)]
        if assocs is None:
            for a in sorted(job_accounts):
                accounts[a] = ("root", 1.0)
            self.notes.append("no --assoc: a flat tree of the accounts with jobs, share 1 each")
        else:
            rows = [r for r in assocs.rows if not cluster or not r.cluster or r.cluster == cluster]
            if not assocs.has_parents:
                self.notes.append(
                    "the associations have no ParentName column: the tree is flat (use "
                    "`sacctmgr -P show assoc format=Cluster,Account,User,ParentName,Share` or a dump)"
                )
            for r in rows:
                share = self._share(r.share, r.account, r.user)
                if r.user:
                    users.setdefault(r.account, []).append((r.user, share))
                elif r.account != "root":
                    parent = r.parent if assocs.has_parents and r.parent else "root"
                    accounts.setdefault(r.account, (parent, share))
        children: dict[str, list[str]] = {}
        for a, (parent, _) in sorted(accounts.items()):
            children.setdefault(parent if parent in accounts else "root", []).append(a)
        self.leaf: dict[tuple[str, str], str] = {}  # (account, user or "") -> path
        self.slurm_accounts: dict[str, str] = {}  # leaf path -> Slurm account, where names differ
        self.top: list[dict[str, Any]] = []

        def node(a: str, path: str, depth: int) -> dict[str, Any]:
            if depth > limits.MAX_TREE_DEPTH:
                raise InputError(where, a, f"the account tree is deeper than {limits.MAX_TREE_DEPTH} levels")
            name = anon.name("account", a)
            here = f"{path}/{name}" if path else name
            out: dict[str, Any] = {"name": name, "share": accounts[a][1]}
            kids = [node(c, here, depth + 1) for c in children.get(a, [])]
            if opts.leaves == "user" and users.get(a):
                for u, share in sorted(users[a]):
                    uname = anon.name("user", u)
                    kids.append({"name": uname, "share": share})
                    self.leaf[(a, u)] = f"{here}/{uname}"
                    self.slurm_accounts[f"{here}/{uname}"] = name
            elif kids and a in job_accounts:  # jobs on an account with sub-accounts: a leaf of its own
                share = sum(s for _, s in users.get(a, [])) or 1.0
                kids.append({"name": name, "share": share})
                self.leaf[(a, "")] = f"{here}/{name}"
            elif not kids:
                self.leaf[(a, "")] = here
            if kids:
                out["children"] = _unique(kids)
            return out

        self.top = [node(a, "", 1) for a in children.get("root", [])]
        if not self.top:
            raise InputError(where, "", "holds no account below root: nothing to build a budget tree from")

    def _share(self, text: str, account: str, user: str) -> float:
        if not text:
            return 1.0
        if text.lower() == "parent":
            self.notes.append(f"Fairshare=parent on {account}{'/' + user if user else ''}: taken as share 1")
            return 1.0
        v = float(text)
        if v <= 0:
            self.notes.append(
                f"Fairshare={text} on {account}{'/' + user if user else ''}: "
                f"taken as share {limits.MIN_SHARE:g}"
            )
            return limits.MIN_SHARE
        return v

    def path_of(self, account: str, user: str) -> str | None:
        return self.leaf.get((account, user)) or self.leaf.get((account, ""))


def _unique(kids: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for k in kids:
        if k["name"] not in seen:
            seen.add(k["name"])
            out.append(k)
    return out


def _cluster_nodes(nodelist: str, names: dict[str, str]) -> str | None:
    """A NodeList as cluster.yaml node names joined by "|"; None if a node is not in the cluster."""
    out = []
    for h in expand_nodes(nodelist):
        x = names.get(h)
        if x is None:
            return None
        out.append(x)
    return "|".join(sorted(out))


def _fits(pools: Sequence[Pool], gpus: int, nodes: int, gpu_type: str, cpus: float, mem: float) -> bool:
    per = gpus / nodes
    return any(
        (not gpu_type or p.gpu_type == gpu_type)
        and per <= p.gpus
        and nodes <= len(p.nodes)
        and (not cpus or cpus / nodes <= p.cpus)
        and (not mem or mem / nodes <= p.mem_gb)
        for p in pools
    )


def build_site(
    records: Iterable[Record],
    latest: Any,
    assocs: Associations | None,
    settings: Settings | None,
    nodes: Sequence[Node],
    opts: Options,
    where: dict[str, str],
) -> Site:
    """The site folder's files. `latest()` gives the latest time seen once the records are read."""
    pools, node_names, cpu_only = pools_of(nodes)
    fit_memo: dict[tuple[int, int, str, float, float], bool] = {}
    host_memo: dict[str, str | None] = {"": ""}  # NodeList -> cluster nodes joined by "|"
    if not pools:
        raise InputError(
            where["nodes"], "", "holds no node with GPUs (Gres=gpu:...): no cluster to replay on"
        )
    jobs: dict[str, Record | list[Record]] = {}
    for r in records:
        got = jobs.get(r.job_id)
        if got is None:
            jobs[r.job_id] = r
        elif isinstance(got, list):
            got.append(r)
        else:
            jobs[r.job_id] = [got, r]
    span_end = opts.span_end if opts.span_end is not None else latest()
    cluster_name = settings.get("ClusterName") if settings is not None else ""
    job_accounts = {(r if isinstance(r, Record) else r[-1]).account for r in jobs.values()}
    tree = _Tree(assocs, job_accounts, opts, cluster_name, where.get("assoc", "--assoc"))
    skipped: Counter[str] = Counter()
    anon = opts.anonymizer
    work_rows: list[tuple[Any, ...]] = []
    hist_rows: list[tuple[float, str, float, str, str]] = []
    classes: Counter[str] = Counter()
    for job_id, got in jobs.items():
        recs = got if isinstance(got, list) else [got]
        if len(recs) > 1:
            recs.sort(key=lambda r: (r.start if r.started and r.start is not None else math.inf, r.line))
        runs = [r for r in recs if r.started]
        final = recs[-1]
        if not runs:
            skipped[
                "pending_at_end"
                if final.state == "PENDING"
                else "cancelled_before_start"
                if final.state == "CANCELLED"
                else "never_started"
            ] += 1
            continue
        if final.state == "PENDING" or (not final.started and final.state in ("REQUEUED", "REQUEUE_HOLD")):
            skipped["pending_at_end"] += 1
            continue
        last = runs[-1]
        path = tree.path_of(last.account, last.user)
        if path is None:
            skipped["unknown_account"] += 1
            continue
        if last.gpus <= 0:
            skipped["no_gpus"] += 1
            continue
        n_nodes = max(last.nodes, 1)
        if last.gpus % n_nodes:
            skipped["uneven_gang"] += 1
            continue
        run_nodes = []
        for r in runs:
            hosts = host_memo.get(r.nodelist, "")
            if hosts == "":
                hosts = host_memo[r.nodelist] = _cluster_nodes(r.nodelist, node_names)
            if hosts is None:
                break
            run_nodes.append(hosts)
        if len(run_nodes) < len(runs):
            skipped["ran_on_unknown_node"] += 1
            continue
        shape = (last.gpus, n_nodes, last.gpu_type, last.cpus, last.mem_gb)
        fits = fit_memo.get(shape)
        if fits is None:
            fits = fit_memo[shape] = _fits(pools, *shape)
        if not fits:
            skipped["fits_no_pool"] += 1
            continue
        first = recs[0]
        submit = min(r.submit for r in recs)
        eligible = first.eligible
        if eligible is not None and eligible > submit:
            submit = min(eligible, runs[0].start or eligible)
        cls = (last.partition if opts.class_from == "partition" else last.qos) or last.partition or "default"
        classes[cls] += 1
        limit = last.limit
        if limit == PARTITION_LIMIT:
            limit = settings.partition_max_time(last.partition) if settings is not None else None
        for i, (r, hosts) in enumerate(zip(runs, run_nodes, strict=True)):
            assert r.start is not None
            end = r.end
            reason = END_REASONS.get(r.state, "failed")
            if end is None or reason == "running":
                end, reason = max(span_end, r.start), "running"
            if i < len(runs) - 1 and reason not in ("preempted", "node_fail"):
                reason = "requeued"
            hist_rows.append((r.start, job_id, end, reason, hosts))
        last_end = hist_rows[-1][2]
        work = max(last_end - (last.start or last_end), 1.0)
        work_rows.append(
            (
                submit,
                job_id,
                path,
                anon.name("user", last.user),
                cls,
                last.gpus,
                n_nodes,
                last.gpu_type,
                last.cpus,
                last.mem_gb,
                work,
                limit if limit and limit > 0 else None,
            )
        )
    imported = len(work_rows)
    if not imported:
        raise InputError(
            where["sacct"], "", f"no job could be imported (skipped: {_counts(skipped) or 'none read'})"
        )
    first = min(w[0] for w in work_rows)
    epoch = math.floor(first / 60) * 60
    work_rows.sort(key=lambda w: (w[0], w[1]))
    hist_rows.sort(key=lambda h: (h[0], h[1]))
    files = {
        "workload.csv": _workload_csv(work_rows, epoch),
        "history.csv": _history_csv(hist_rows, epoch),
        "cluster.yaml": _cluster_yaml(pools, epoch),
        "policy.yaml": _policy_yaml(tree, sorted(classes), pools, settings, epoch, cluster_name, opts),
        "incumbent.yaml": _dump(
            incumbent(settings, where.get("config", "--config"), epoch, opts.tz, first)
            if settings is not None
            else incumbent(Settings("defaults", {}), "--config")
        ),
    }
    for note in tree.notes:
        warn(where.get("assoc", "--assoc"), "", note)
    summary: dict[str, Any] = {
        "format": 1,
        "sources": {},
        "span": {
            "start": iso(epoch if opts.span_start is None else opts.span_start),
            "end": iso(max(span_end, epoch)),
        },
        "jobs": {"read": len(jobs), "imported": imported, "skipped": dict(sorted(skipped.items()))},
        "steps_skipped": 0,
        "nodes": {s: node_names[s] for s in sorted(node_names)},
        "nodes_without_gpus": cpu_only,
        "accounts": {anon.name("account", a): p for (a, u), p in sorted(tree.leaf.items()) if not u},
        "anonymized": anon.enabled,
    }
    return Site(files, summary)


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


def _workload_csv(rows: list[tuple[Any, ...]], epoch: float) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(WORKLOAD_COLUMNS)
    for submit, job_id, path, user, cls, gpus, nodes, gpu_type, cpus, mem, work, est in rows:
        w.writerow(
            (
                job_id,
                num(submit - epoch),
                path,
                user,
                cls,
                gpus,
                nodes,
                gpu_type,
                num(cpus) if cpus else "",
                num(mem) if mem else "",
                num(work),
                num(est) if est else "",
            )
        )
    return out.getvalue()


def _history_csv(rows: list[tuple[float, str, float, str, str]], epoch: float) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(HISTORY_COLUMNS)
    for start, job_id, end, reason, hosts in rows:
        w.writerow((job_id, num(start - epoch), num(end - epoch), reason, hosts))
    return out.getvalue()


def _cluster_yaml(pools: Sequence[Pool], epoch: float) -> str:
    body = {
        "pools": [
            {
                "name": p.name,
                "count": len(p.nodes),
                "gpus": p.gpus,
                "gpu_type": p.gpu_type,
                "cpus": p.cpus,
                "mem_gb": p.mem_gb,
            }
            for p in pools
        ],
        "epoch": iso(epoch),
    }
    return "# written by `fairshare import slurm`: one pool per kind of GPU node\n" + _dump(body)


def _policy_yaml(
    tree: _Tree,
    classes: list[str],
    pools: Sequence[Pool],
    settings: Settings | None,
    epoch: float,
    cluster: str,
    opts: Options,
) -> str:
    window = 7.0
    if settings is not None:
        from .settings import _seconds

        try:
            window = max(1, round(_seconds(settings.get("PriorityDecayHalfLife")) / 86400))
        except ValueError:
            window = 7
    review = (dt.datetime.fromtimestamp(epoch, dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    top = []
    for g in tree.top:
        top.append(
            {
                **{"name": g["name"], "share": g["share"]},
                "owner": "TODO",
                "review": review,
                "hypothesis": "TODO: what this group's share is for",
                **({"children": g["children"]} if "children" in g else {}),
            }
        )
    body: dict[str, Any] = {
        "window": f"{int(window)}d",
        "gpu_rates": {t: 1.0 for t in sorted({p.gpu_type for p in pools})},
        "tree": top,
        "classes": {c: {} for c in classes},
    }
    slurm: dict[str, Any] = {}
    if tree.slurm_accounts:
        slurm["accounts"] = dict(sorted(tree.slurm_accounts.items()))
    if cluster and not opts.anonymizer.enabled:
        slurm["cluster_name"] = cluster
    if slurm:
        body["slurm"] = slurm
    head = (
        "# written by `fairshare import slurm`: the account tree with Slurm's Fairshare values as shares.\n"
        "# To fill in: each top-level group's owner, review date and hypothesis (the review date is set\n"
        "# before the history so `fairshare check` flags it), and each class's contract (one per "
        + ("partition" if opts.class_from == "partition" else "QOS")
        + "; none is protected or resumable until you say so).\n"
    )
    return head + _dump(body)


def _dump(body: Any) -> str:
    return yaml.safe_dump(body, sort_keys=False, default_flow_style=False, allow_unicode=True)


def import_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=1, sort_keys=False) + "\n"
