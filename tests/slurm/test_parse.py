"""Parsing what Slurm 22.05 prints; the files in data/ were recorded from the dev cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairshare.slurm.model import Gres, NodeAlloc
from fairshare.slurm.parse import (
    expand_hostlist,
    gpus_of_tres,
    parse_associations,
    parse_config,
    parse_duration_text,
    parse_gres,
    parse_jobs,
    parse_nodes,
    parse_qos,
    parse_runs,
    parse_tres,
)
from fairshare.slurm.slurm_errors import SlurmOutputError, SlurmUnavailable

DATA = Path(__file__).parent / "data"


def text(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(
    ("hosts", "names"),
    [
        ("n3", ("n3",)),
        ("n[3-4]", ("n3", "n4")),
        ("n[1,3-5],gpu-[08-10]", ("n1", "n3", "n4", "n5", "gpu-08", "gpu-09", "gpu-10")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("None assigned", ()),
        ("", ()),
    ],
)
def test_hostlists(hosts: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(hosts) == names


def test_bad_hostlist_range_raises() -> None:
    with pytest.raises(ValueError, match="bad host range"):
        expand_hostlist("n[a-b]")


def test_gres_and_tres_strings() -> None:
    assert parse_gres("gpu:a100:8(S:0-1)") == (Gres("gpu", "a100", 8),)
    assert parse_gres("gres:gpu:4") == (Gres("gpu", None, 4),)
    assert parse_gres("gpu:a100:4,gpu:h100:4,shard:2") == (
        Gres("gpu", "a100", 4),
        Gres("gpu", "h100", 4),
        Gres("shard", None, 2),
    )
    assert parse_gres("gpu:a100:3(IDX:4-6)") == (Gres("gpu", "a100", 3),)
    # GPUs not next to each other: a comma inside the index list (seen on the dev cluster)
    assert parse_gres("gpu:a100:3(IDX:0-1,7),shard:2") == (Gres("gpu", "a100", 3), Gres("shard", None, 2))
    assert parse_gres("(null)") == ()
    t = parse_tres("cpu=2,mem=125G,node=2,billing=8,gres/gpu=8")
    assert t == {"cpu": 2, "mem": 128000, "node": 2, "billing": 8, "gres/gpu": 8}
    assert gpus_of_tres(parse_tres("cpu=1,gres/gpu:a100=2,gres/gpu:h100=1")) == 3


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 1800),
        ("1:30", 90),
        ("02:00:00", 7200),
        ("1-00:00:00", 86400),
        ("2-3", 2 * 86400 + 3 * 3600),
        ("UNLIMITED", None),
        ("10 sec", 600),
    ],
)
def test_slurm_durations(value: str, seconds: int | None) -> None:
    assert parse_duration_text(value) == seconds


def test_squeue_json_jobs() -> None:
    jobs = {j.job_id: j for j in parse_jobs(text("squeue.json"))}
    assert sorted(jobs) == [1, 2, 3, 4, 5, 6, 7, 8]  # 22.05 lists finished jobs until MinJobAge
    pending = jobs[5]
    assert (pending.state, pending.reason, pending.account, pending.qos) == (
        "PENDING",
        "Resources",
        "research",
        "train",
    )
    assert pending.comment == "fairshare:protect=3h,checkpoint=10m,resumable"
    assert (pending.gpus, pending.nodes, pending.gpu_type, pending.time_limit_s) == (8, 2, "a100", 1800)
    assert pending.start_time is None and pending.alloc == () and not pending.held
    running = jobs[7]
    assert running.running and running.start_time == 1796139412
    assert running.alloc == (
        NodeAlloc("n2", 8, "a100", 1),
        NodeAlloc("n3", 8, "a100", 1),
        NodeAlloc("n4", 8, "a100", 1),
    )
    assert (running.gpus, running.nodes, running.qos, running.time_limit_s) == (24, 3, "debug", 600)
    held = jobs[8]
    assert held.held and held.priority == 0 and held.reason == "JobHeldUser" and held.time_limit_s is None
    requeued = jobs[6]
    assert requeued.state == "COMPLETING" and requeued.restarts == 1 and requeued.time_limit_s == 86400


def test_sinfo_json_nodes() -> None:
    nodes = {n.name: n for n in parse_nodes(text("sinfo.json"))}
    assert sorted(nodes) == ["n1", "n2", "n3", "n4"]
    assert all(n.gpus == 8 and n.gpu_types == ("a100",) and n.partitions == ("gpu",) for n in nodes.values())
    assert nodes["n4"].drain and nodes["n4"].reason == "maint" and not nodes["n4"].down
    assert not nodes["n2"].drain and nodes["n2"].gpus_used == 8
    assert "COMPLETING" in nodes["n1"].flags


def test_sacct_json_runs_one_per_start_and_skips_runs_without_a_start() -> None:
    runs = parse_runs(text("sacct.json"))
    by_job: dict[int, list[tuple[int, int | None, str]]] = {}
    for r in runs:
        by_job.setdefault(r.job_id, []).append((r.start, r.end, r.state))
    assert by_job[4] == [(1796139107, 1796139109, "REQUEUED"), (1796139122, 1796139122, "COMPLETED")]
    assert by_job[1] == [(1796139100, 1796139400, "COMPLETED")]
    one = next(r for r in runs if r.job_id == 1)
    assert (one.account, one.nodes, one.gpus, one.cpus, one.memory_mb) == (
        "research",
        ("n1", "n2"),
        8,
        2,
        None,
    )
    assert all(r.start > 0 for r in runs)


def test_sacctmgr_and_config_text() -> None:
    assoc = parse_associations(text("assoc.txt"))
    accounts = {a.account: a for a in assoc if a.user is None}
    assert accounts["research"].parent == "root" and accounts["research"].shares == "30"
    users = [a for a in assoc if a.user == "root" and a.account == "platform"]
    assert users[0].qos == ("debug", "eval", "normal", "train")
    assert [q.name for q in parse_qos(text("qos.txt"))] == ["debug", "eval", "normal", "train"]
    config = parse_config(text("config.txt"))
    assert config["PriorityType"] == "priority/multifactor"
    assert config["SLURM_VERSION"] == "22.05.8"
    assert config["SlurmctldHost[0]"].startswith("vm")


def test_json_errors_from_an_unreachable_controller_are_not_an_empty_queue() -> None:
    # what squeue --json prints (exit 0!) when slurmctld is down, recorded from 22.05.8
    down = json.dumps(
        {
            "meta": {},
            "errors": [
                {
                    "description": "Failed while looking for jobs",
                    "error_number": -1,
                    "error": "Unspecified error",
                    "source": "slurm_load_jobs",
                }
            ],
            "jobs": [],
        }
    )
    with pytest.raises(SlurmUnavailable) as info:
        parse_jobs(down, ("squeue", "--json"))
    assert info.value.command == ("squeue", "--json")
    assert "Failed while looking for jobs" in info.value.stderr


def test_sacct_finding_nothing_is_no_runs() -> None:
    # recorded: what 22.05's sacct --json prints for a window without runs
    nothing = {
        "description": "Nothing found",
        "error_number": 9003,
        "error": "Nothing found with query",
        "source": "slurmdb_jobs_get",
    }
    assert parse_runs(json.dumps({"errors": [nothing], "jobs": []})) == []


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("not json", "invalid JSON"),
        ("[]", "not an object"),
        ('{"errors": []}', "without a 'jobs' list"),
        ('{"jobs": [{"job_id": 1}]}', "unexpected job 1"),
    ],
)
def test_unexpected_output_raises_naming_the_command(output: str, words: str) -> None:
    with pytest.raises(SlurmOutputError) as info:
        parse_jobs(output, ("squeue", "--json"))
    assert words in str(info.value) and "`squeue --json`" in str(info.value)


def test_sacctmgr_rows_of_the_wrong_width_raise() -> None:
    with pytest.raises(SlurmOutputError, match="2 fields, expected 5"):
        parse_qos("normal|0\n")
