"""Slurm jobs, nodes and runs in the engine's terms: leaves, classes, contracts, GPU types, charges."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from fairshare.inputs._validation import validate
from fairshare.inputs.policy import Policy
from fairshare.slurm.comment import parse_comment
from fairshare.slurm.mapping import Mapper, SlurmRequest, UnmappedJob, memory_is_allocated
from fairshare.slurm.model import Gres, NodeAlloc, SlurmJob, SlurmNode, SlurmRun
from fairshare.slurm.parse import parse_jobs, parse_nodes

DATA = Path(__file__).parent / "data"
T0 = 1_800_000_000


def policy(**slurm: Any) -> Policy:
    return validate(
        Policy,
        {
            "gpu_rates": {"A100": 1.0, "H100": 2.5},
            "tree": [
                {"name": "product", "share": 50},
                {"name": "research", "share": 50, "children": [{"name": "vision", "share": 1}]},
            ],
            "classes": {
                "debug": {"protected": "10m", "max_protected": "15m"},
                "train": {
                    "protected": "1h",
                    "max_protected": "2h",
                    "resumable": True,
                    "checkpoint": "30m",
                    "restore": "2m",
                },
                "eval": {"protected": "20m", "deadline": "4h"},
            },
            "slurm": {"default_class": "train", **slurm},
        },
        "p.yaml",
    )


def node(name: str, gpus: int = 8, gpu_type: str | None = "a100", **kw: Any) -> SlurmNode:
    base = SlurmNode(name, "idle", (), 64, 0, 512 * 1024, (Gres("gpu", gpu_type, gpus),), 0, ("gpu",), "")
    return dataclasses.replace(base, **kw)


def job(job_id: int = 1, account: str = "product", **kw: Any) -> SlurmJob:
    base = SlurmJob(
        job_id=job_id,
        name="j",
        user="alice",
        account=account,
        partition="gpu",
        qos="normal",
        state="PENDING",
        reason="Priority",
        priority=10_000,
        submit_time=T0,
        start_time=None,
        time_limit_s=3600,
        comment="",
        nodes=1,
        gpus=4,
        gpu_type=None,
        cpus=4,
        memory_mb=None,
        alloc=(),
        restarts=0,
        requeue=True,
        deadline=None,
        array_job_id=None,
        array_task_id=None,
        het_job_id=None,
    )
    return dataclasses.replace(base, **kw)


def req(m: Mapper, j: SlurmJob) -> SlurmRequest:
    r = m.request(j)
    assert isinstance(r, SlurmRequest), r
    return r


# --------------------------------------------------------------------------- comment


def test_comment_contract_word() -> None:
    c = parse_comment("my run; fairshare:protect=30m,checkpoint=10m,resumable,class=eval tail", "fairshare:")
    assert (c.protect, c.checkpoint, c.resumable, c.cls, c.problems, c.found) == (
        1800,
        600,
        True,
        "eval",
        (),
        True,
    )
    assert parse_comment("nothing here").found is False
    c = parse_comment("fairshare:resumable=no,restore=1m,deadline=2h,protected=5m")
    assert (c.resumable, c.restore, c.deadline, c.protect) == (False, 60, 7200, 300)


@pytest.mark.parametrize(
    ("word", "problem"),
    [
        ("protect=soon", "comment: protect: expected a duration"),
        ("protect", "comment: protect needs a duration"),
        ("prio=high", "comment: unknown key 'prio'"),
        ("resumable=maybe", "comment: resumable: expected yes or no"),
        ("class=", "comment: class needs a name"),
        ("protect=1m,protect=2m", "comment: protect given twice"),
    ],
)
def test_bad_comment_fields_are_named_and_ignored(word: str, problem: str) -> None:
    c = parse_comment(f"fairshare:{word},checkpoint=5m")
    assert any(p.startswith(problem) for p in c.problems), c.problems
    assert c.checkpoint == 300  # the rest still applies


# --------------------------------------------------------------------------- jobs


def test_a_plain_job_gets_the_default_class_contract_and_its_time_limit_as_estimate() -> None:
    r = req(Mapper(policy()), job())
    assert (r.id, r.leaf, r.cls, r.gpus, r.nodes, r.gpu_types) == ("1", "product", "train", 4, 1, None)
    assert (r.protected, r.resumable, r.checkpoint, r.restore, r.estimate) == (3600, True, 1800, 120, 3600)
    assert (r.deadline, r.protected_capped, r.notes, r.held) == (None, False, (), False)


def test_comment_overrides_the_class_and_protect_is_capped_with_a_note() -> None:
    m = Mapper(policy())
    r = req(m, job(comment="fairshare:protect=3h,checkpoint=10m,resumable"))
    assert (r.cls, r.protected, r.protected_capped, r.checkpoint) == ("train", 7200, True, 600)
    assert r.notes == ("protect 3h capped to 2h by class train's max_protected",)
    r = req(m, job(comment="fairshare:class=debug,protect=5m"))
    assert (r.cls, r.protected, r.resumable, r.checkpoint) == ("debug", 300, False, 0.0)


def test_class_from_qos_by_name_or_by_mapping_and_the_comment_wins() -> None:
    m = Mapper(policy(qos_classes={"long": "eval"}))
    assert req(m, job(qos="debug")).cls == "debug"
    assert req(m, job(qos="long")).cls == "eval"
    assert req(m, job(qos="long", comment="fairshare:class=debug")).cls == "debug"
    r = req(m, job(qos="long", comment="fairshare:class=nope"))
    assert r.cls == "eval" and r.notes[0].startswith("comment: unknown class 'nope'")


def test_without_any_class_the_job_is_reported_not_guessed() -> None:
    p = validate(Policy, {**policy().model_dump(exclude={"slurm"}), "slurm": {}}, "p.yaml")
    r = Mapper(p).request(job())
    assert isinstance(r, UnmappedJob) and r.reason.startswith("no class")


def test_unknown_and_inner_accounts_are_reported_with_the_reason() -> None:
    m = Mapper(policy())
    r = m.request(job(account="ops"))
    assert isinstance(r, UnmappedJob) and "maps to no leaf" in r.reason and r.slurm_id == 1
    r = m.request(job(account="research"))
    assert isinstance(r, UnmappedJob) and "not a leaf" in r.reason
    assert (
        req(Mapper(policy(), parents={"vision-a": "vision"}), job(account="vision-a")).leaf
        == "research/vision"
    )


def test_deadlines_slurm_first_then_comment_then_class() -> None:
    m = Mapper(policy())
    assert req(m, job(deadline=T0 + 99)).deadline == T0 + 99
    assert req(m, job(comment="fairshare:deadline=1h")).deadline == T0 + 3600
    assert req(m, job(qos="eval")).deadline == T0 + 4 * 3600


def test_resumable_without_a_checkpoint_is_not_resumable() -> None:
    r = req(Mapper(policy()), job(comment="fairshare:class=debug,resumable"))
    assert not r.resumable and r.checkpoint == 0 and "treated as not resumable" in r.notes[0]


def test_gpu_types_map_case_insensitively_or_by_the_table() -> None:
    assert req(Mapper(policy()), job(gpu_type="h100")).gpu_types == ("H100",)
    assert req(Mapper(policy(gpu_types={"hopper": "H100"})), job(gpu_type="hopper")).gpu_types == ("H100",)
    r = req(Mapper(policy()), job(gpu_type="v100"))
    assert r.gpu_types == ("v100",) and "no rate" in r.notes[0]


def test_memory_counts_only_when_slurm_allocates_it() -> None:
    j = job(memory_mb=128 * 1024)
    assert req(Mapper(policy()), j).mem_gb is None
    assert req(Mapper(policy(), count_memory=True), j).mem_gb == 128
    assert memory_is_allocated({"SelectTypeParameters": "CR_Core_Memory"})
    assert not memory_is_allocated({"SelectTypeParameters": "CR_CORE"})


def test_heterogeneous_jobs_are_reported() -> None:
    r = Mapper(policy()).request(job(het_job_id=7))
    assert isinstance(r, UnmappedJob) and "heterogeneous" in r.reason


# --------------------------------------------------------------------------- view, charges, usage


def test_view_of_the_recorded_dev_cluster() -> None:
    p = validate(
        Policy,
        {
            "gpu_rates": {"A100": 1.0},
            "tree": [{"name": n, "share": 1} for n in ("product", "research", "platform")],
            "classes": {
                "train": {"protected": "1h", "max_protected": "2h", "resumable": True, "checkpoint": "30m"},
                "debug": {"protected": "10m", "max_protected": "15m"},
            },
            "slurm": {"default_class": "train"},
        },
        "p.yaml",
    )
    nodes = parse_nodes((DATA / "sinfo.json").read_text())
    jobs = [j for j in parse_jobs((DATA / "squeue.json").read_text()) if j.state in ("PENDING", "RUNNING")]
    v = Mapper(p).view(nodes, jobs)
    assert [n.name for n in v.nodes if not n.schedulable] == ["n4"]  # drained
    assert [n.gpu_type for n in v.nodes] == ["A100"] * 4
    assert [q.slurm_id for q in v.pending] == [5, 8]
    five = v.pending[0]
    assert (five.leaf, five.cls, five.protected, five.protected_capped, five.gpu_types) == (
        "research",
        "train",
        7200,
        True,
        ("A100",),
    )
    assert v.pending[1].held
    (run,) = v.running
    assert (run.request.slurm_id, run.request.cls, run.start, run.charge) == (7, "debug", 1796139412, 24.0)
    assert run.protected_until == 1796139412 + 600
    assert [(a.node, a.gpus, a.gpu_type) for a in run.alloc] == [
        ("n2", 8, "A100"),
        ("n3", 8, "A100"),
        ("n4", 8, "A100"),
    ]
    assert v.unmapped == () and v.notes == ()


def test_charge_is_the_dominant_resource_priced_at_the_gpu_type() -> None:
    m = Mapper(policy(), count_memory=True)
    nodes = {"h1": m.node(node("h1", gpu_type="h100"))[0], "a1": m.node(node("a1"))[0]}
    j = job(state="RUNNING", start_time=T0, gpus=2, cpus=2, alloc=(NodeAlloc("h1", 2, "h100", 2),))
    assert m.running(j, req(m, j), nodes).charge == 5.0  # 2 GPUs x 2.5
    # 32 of the node's 64 CPUs = half the node = 4 GPUs' worth
    j = dataclasses.replace(j, alloc=(NodeAlloc("a1", 2, "a100", 32),))
    assert m.running(j, req(m, j), nodes).charge == 4.0
    # 384 GB of 512 GB = 6 GPUs' worth (memory counts: Slurm allocates it)
    j = dataclasses.replace(j, alloc=(NodeAlloc("a1", 2, "a100", 2),), memory_mb=384 * 1024)
    assert m.running(j, req(m, j), nodes).charge == 6.0


def test_nodes_with_an_unpriced_gpu_type_are_noted() -> None:
    v, notes = Mapper(policy()).node(node("x", gpu_type="v100"))
    assert v.gpu_type is None and "GPU type v100 has no rate" in notes[0]


def test_partitions_limit_the_scope() -> None:
    m = Mapper(policy(partitions=["gpu"]))
    v = m.view([node("a"), node("b", partitions=("cpu",))], [job(1), job(2, partition="cpu")])
    assert [n.name for n in v.nodes] == ["a"] and [q.slurm_id for q in v.pending] == [1]


def test_usage_intervals_are_charged_per_run_and_unknown_accounts_are_not() -> None:
    m = Mapper(policy(partitions=["gpu"]))
    nodes = {n: m.node(node(n, gpu_type="h100" if n == "h1" else "a100"))[0] for n in ("a1", "a2", "h1")}
    runs = [
        SlurmRun(3, "product", "u", "gpu", "normal", "REQUEUED", T0, T0 + 600, ("a1", "a2"), 8, 2, None),
        # sacct's first record of a run may lack partition and QOS (slurmdbd fills them in later)
        SlurmRun(3, "product", "u", "", "", "RUNNING", T0 + 700, None, ("h1",), 8, 1, None),
        SlurmRun(4, "ops", "u", "gpu", "normal", "COMPLETED", T0, T0 + 60, ("a1",), 1, 1, None),
        SlurmRun(5, "product", "u", "cpu", "normal", "COMPLETED", T0, T0 + 60, ("c1",), 0, 1, None),
    ]
    usage, unknown = m.usage(runs, nodes)
    assert [(u.key, u.leaf, u.charge, u.end) for u in usage] == [
        ((3, T0), "product", 8.0, T0 + 600),
        ((3, T0 + 700), "product", 20.0, None),
    ]
    assert usage[0].gpu_eq_seconds(T0 + 10_000) == 8 * 600
    assert usage[1].gpu_eq_seconds(T0 + 800) == 20 * 100
    assert [(u.slurm_id, u.account) for u in unknown] == [(4, "ops")]
