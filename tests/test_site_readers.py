"""The site-import readers (src/fairshare/inputs/slurmacct) on real output of the dev Slurm cluster
(tests/data/slurm-site, captured by its capture.sh from Slurm 22.05.8), plus generated variants."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairshare.errors import InputError
from fairshare.inputs.slurmacct._text import BadRows, time_parser
from fairshare.inputs.slurmacct.assoc import Assoc, read_assoc
from fairshare.inputs.slurmacct.nodes import read_nodes
from fairshare.inputs.slurmacct.sacct import PARTITION_LIMIT, Record, SacctFile, expand_nodes, read_sacct
from fairshare.inputs.slurmacct.settings import incumbent, read_settings

DATA = Path(__file__).parent / "data" / "slurm-site"


def _records(name: str, text: str | None = None, skip: bool = False) -> tuple[list[Record], SacctFile]:
    info = SacctFile(name)
    body = (DATA / name).read_text() if text is None else text
    recs = list(read_sacct(io.StringIO(body), name, dt.UTC, BadRows(name, skip), info))
    return recs, info


def _by_id(recs: list[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in recs:
        out.setdefault(r.job_id, []).append(r)
    return out


# ------------------------------------------------------------------------- sacct


@pytest.mark.parametrize(
    "name, form",
    [
        ("sacct-all.txt", "sacct -P, ISO times"),
        ("sacct-duplicates.txt", "sacct -P, ISO times"),
        ("sacct-epoch.txt", "sacct -P, epoch times"),
    ],
    ids=["format-all", "narrow-with-duplicates", "epoch-times"],
)
def test_sacct_forms_are_detected_from_the_content(name: str, form: str) -> None:
    recs, info = _records(name)
    assert info.form == form
    assert info.steps == 0
    jobs = _by_id(recs)
    # the dev cluster's run: 30 jobs, a gang, a 4-task array, a CPU-only job, a het job (2
    # components), the requeued job, the job cancelled while pending, one cancelled running, one timeout
    assert {"31", "32_0", "32_3", "33", "34+0", "34+1", "36", "37", "41", "42"} <= set(jobs)
    assert len(jobs) == 42


def test_epoch_and_iso_times_give_the_same_records() -> None:
    iso, _ = _records("sacct-duplicates.txt")
    epoch, _ = _records("sacct-epoch.txt")
    assert [(r.job_id, r.submit, r.start, r.end) for r in iso] == [
        (r.job_id, r.submit, r.start, r.end) for r in epoch
    ]


def test_duplicates_give_one_record_per_run_of_a_requeued_job() -> None:
    with_d = _by_id(_records("sacct-duplicates.txt")[0])
    without = _by_id(_records("sacct-all.txt")[0])
    assert [r.state for r in with_d["36"]] == ["REQUEUED", "COMPLETED"]
    assert [r.state for r in without["36"]] == ["COMPLETED"]
    first, second = with_d["36"]
    assert first.end is not None and second.start is not None and first.end <= second.start


def test_steps_are_counted_and_skipped() -> None:
    recs, info = _records("sacct-steps.txt")
    assert info.steps == sum(
        1 for line in (DATA / "sacct-steps.txt").read_text().splitlines()[1:] if "." in line.split("|")[0]
    )
    assert info.steps > 0
    assert all("." not in r.job_id for r in recs)


@pytest.mark.parametrize(
    "job, started, gpus, nodes, limit",
    [
        ("1", True, 1, 1, 120.0),
        ("31", True, 16, 2, 120.0),  # the 2-node gang
        ("32_2", True, 1, 1, 86400.0),  # an array task, --time=1-00:00:00
        ("33", True, 0, 1, 60.0),  # CPU-only
        ("34+1", True, 2, 1, 60.0),  # a het component
        ("37", False, 0, 4, 60.0),  # cancelled while pending: no allocation
        ("42", True, 1, 1, 60.0),  # timed out
    ],
    ids=["plain", "gang", "array-task", "cpu-only", "het-component", "cancelled-pending", "timeout"],
)
def test_sacct_record_fields(job: str, started: bool, gpus: int, nodes: int, limit: float) -> None:
    r = _by_id(_records("sacct-duplicates.txt")[0])[job][-1]
    assert (r.started, r.gpus, r.nodes, r.limit) == (started, gpus, nodes, limit)
    assert r.account in ("product", "research", "platform")


HEADER = "JobID|Account|User|Submit|Start|End|State|AllocTRES|NNodes|Timelimit|NodeList|ReqTRES"
GOOD = (
    "7|acct|u|2026-10-01T00:00:00|2026-10-01T00:01:00|2026-10-01T01:00:00|COMPLETED|"
    "cpu=2,gres/gpu=2,node=1|1|1-00:00|gpu[01-03,07],cpu1|gres/gpu:a100=2"
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("UNLIMITED", PARTITION_LIMIT),
        ("Partition_Limit", PARTITION_LIMIT),
        ("2-00:00:00", 172800.0),
        ("1-00:00", 86400.0),
        ("30", 1800.0),
        ("00:30:00", 1800.0),
        ("Unknown", None),
    ],
    ids=["unlimited", "partition-limit", "d-hh-mm-ss", "d-hh-mm", "minutes", "hh-mm-ss", "unknown"],
)
def test_time_limits(text: str, expected: float | None) -> None:
    recs, _ = _records("x", HEADER + "\n" + GOOD.replace("|1-00:00|", f"|{text}|") + "\n")
    assert recs[0].limit == expected


def test_minimal_columns_hostlists_and_typed_gres() -> None:
    recs, _ = _records("x", HEADER + "\n" + GOOD + "\n")
    (r,) = recs
    assert r.gpu_type == "a100" and r.gpus == 2
    assert expand_nodes(r.nodelist) == ("gpu01", "gpu02", "gpu03", "gpu07", "cpu1")


@pytest.mark.parametrize(
    "head, row",
    [
        ("JobName|" + HEADER + "|Comment", "a|b|" + GOOD + "|c"),
        ("JobName|" + HEADER + "|Comment", "ab|" + GOOD + "|c|d|e"),
        (HEADER + "|SubmitLine", GOOD + "|sbatch --wrap 'ls | wc'"),
    ],
    ids=["in-the-job-name", "in-the-comment", "in-the-submit-line"],
)
def test_a_pipe_inside_free_text_stays_in_its_column(head: str, row: str) -> None:
    recs, info = _records("x", f"{head}\n{row}\n")
    assert len(recs) == 1 and info.bad == 0
    assert recs[0].gpus == 2 and recs[0].nodelist == "gpu[01-03,07],cpu1"


BAD_CASES = [
    ("submit-not-a-time", 4, "yesterday", "line 2, column 4 (Submit)", "is not a time"),
    ("submit-unknown", 4, "Unknown", "line 2, column 4 (Submit)", "every job record has a submit time"),
    ("end-before-start", 6, "2026-10-01T00:00:30", "line 2, column 6 (End)", "before the start"),
    ("bad-state", 7, "12", "line 2, column 7 (State)", "is not a job state"),
    ("bad-tres", 8, "cpu=x", "line 2, column 8 (AllocTRES)", "is not a TRES list"),
    ("bad-node-count", 9, "two", "line 2, column 9 (NNodes)", "is not a node count"),
    ("bad-time-limit", 10, "soon", "line 2, column 10 (Timelimit)", "is not a time limit"),
    ("bad-hostlist", 11, "gpu[a-b]", "line 2, column 11 (NodeList)", "bad host range"),
    ("bad-job-id", 1, "abc", "line 2, column 1 (JobID)", "is not a Slurm job id"),
]


@pytest.mark.parametrize(
    "col, value, place, words", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_a_bad_sacct_value_names_file_line_and_column(col: int, value: str, place: str, words: str) -> None:
    cells = GOOD.split("|")
    cells[col - 1] = value
    text = HEADER + "\n" + "|".join(cells) + "\n"
    with pytest.raises(InputError) as err:
        _records("history.txt", text)
    assert str(err.value).startswith(f"history.txt: {place}: ")
    assert words in str(err.value)
    # with --skip-bad it is a counted warning and the row is left out
    with pytest.warns(UserWarning, match="row skipped"):
        recs, info = _records("history.txt", text + GOOD + "\n", skip=True)
    assert (len(recs), info.bad) == (1, 1)


@pytest.mark.parametrize(
    "text, message",
    [
        ("JobID Account User\n1 a u\n", "no '|' in the header line"),
        ("1|a|u|x\n", "has no header line"),
        (
            "JobID|Account|User\n",
            "lacks the column(s) Submit, Start, End, State, AllocTRES, NNodes, Timelimit",
        ),
        ("", "is empty"),
    ],
    ids=["not-parsable", "no-header", "missing-columns", "empty"],
)
def test_files_that_are_not_sacct_output(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _records("h.txt", text)


def test_a_row_with_a_wrong_field_count_names_its_line() -> None:
    with pytest.raises(InputError, match=r"^h.txt: line 3: has 3 fields where the header has 12$"):
        _records("h.txt", f"{HEADER}\n{GOOD}\n1|2|3\n")


@given(st.integers(min_value=0, max_value=4_000_000_000))
def test_iso_and_epoch_times_agree(t: int) -> None:
    parse = time_parser(dt.UTC)
    text = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert parse(text) == float(t)
    assert parse(str(t)) == (None if t == 0 else float(t))


@given(st.integers(min_value=60, max_value=365 * 86400))
def test_time_limits_round_trip(seconds: int) -> None:
    seconds -= seconds % 60
    d, rest = divmod(seconds, 86400)
    text = (f"{d}-" if d else "") + f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:00"
    recs, _ = _records("x", HEADER + "\n" + GOOD.replace("|1-00:00|", f"|{text}|") + "\n")
    assert recs[0].limit == float(seconds)


def test_a_time_zone_shifts_iso_times_only() -> None:
    berlin = time_parser(__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert berlin("2026-10-01T02:00:00") == dt.datetime(2026, 10, 1, tzinfo=dt.UTC).timestamp()
    assert berlin("1790000000") == 1790000000.0


# ------------------------------------------------------------------------- associations


def test_show_assoc_and_dump_give_the_same_accounts_and_shares() -> None:
    show = read_assoc((DATA / "assoc.txt").read_text(), "assoc.txt", BadRows("a", False))
    dump = read_assoc((DATA / "assoc-dump.cfg").read_text(), "assoc-dump.cfg", BadRows("a", False))
    assert (show.form, dump.form) == ("sacctmgr -P show assoc", "sacctmgr dump")

    def accounts(rows: list[Assoc]) -> dict[str, str]:
        return {a.account: a.share for a in rows if not a.user and a.account != "root"}

    assert accounts(show.rows) == accounts(dump.rows) == {"platform": "20", "product": "50", "research": "30"}
    assert not show.has_parents  # the default `show assoc` columns hold no ParentName
    assert {a.account: a.parent for a in dump.rows if not a.user} == {
        "platform": "root",
        "product": "root",
        "research": "root",
    }
    assert sorted((a.account, a.user) for a in dump.rows if a.user) == sorted(
        (a.account, a.user) for a in show.rows if a.user
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "Cluster|Account|User|ParentName|Share\nc|a||root|lots\n",
            "assoc.txt: line 2, column 5 (Share): 'lots'",
        ),
        ("Cluster|Account|User\nc|a\n", "assoc.txt: line 2: has 2 fields where the header has 3"),
        (
            "Cluster - 'c'\nParent - 'root'\nAccount - 'a':Fairshare=x\n",
            "assoc.txt: line 3, column 25 (Fairshare)",
        ),
        ("Cluster - 'c'\nwhat\n", "assoc.txt: line 2: is not a `sacctmgr dump` line"),
        ("hello\n", "is neither `sacctmgr -P show assoc` output nor a `sacctmgr dump` file"),
    ],
    ids=["bad-share", "short-row", "dump-bad-fairshare", "dump-bad-line", "neither"],
)
def test_bad_associations(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_assoc(text, "assoc.txt", BadRows("assoc.txt", False))
    assert message in str(err.value)


# ------------------------------------------------------------------------- settings and nodes


def test_scontrol_config_and_slurm_conf_give_the_same_incumbent() -> None:
    shown = read_settings((DATA / "config.txt").read_text(), "config.txt")
    conf = read_settings((DATA / "slurm.conf").read_text(), "slurm.conf")
    assert (shown.form, conf.form) == ("scontrol show config", "slurm.conf")
    a, b = incumbent(shown, "config.txt"), incumbent(conf, "slurm.conf")
    a.pop("slurm_version")
    b.pop("slurm_version")
    assert a == b
    assert a["decay_half_life"] == "7d" and a["decay_period"] == "1m" and a["bf_interval"] == "5s"
    assert a["sched_interval"] == "5s" and a["bf_continue"] is False and a["not_modelled"] == []


def _utc(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(
    ("epoch", "first", "phase", "noted"),
    [
        # BOOT_TIME 13:26:43, PriorityCalcPeriod 1 min: ticks at :43 past every minute
        ("2026-12-02T13:30:00", "2026-12-02T13:30:05", "43s", False),
        ("2026-12-02T13:30:30", "2026-12-02T13:30:35", "13s", False),
        # slurmctld started after the first submission: the phase holds only from its start
        ("2026-12-02T13:26:00", "2026-12-02T13:26:10", "43s", True),
    ],
    ids=["booted-before", "epoch-mid-minute", "booted-after-first-submit"],
)
def test_boot_time_gives_the_decay_ticks_phase(epoch: str, first: str, phase: str, noted: bool) -> None:
    shown = read_settings((DATA / "config.txt").read_text(), "config.txt")
    inc = incumbent(shown, "config.txt", _utc(epoch), dt.UTC, _utc(first))
    assert inc["decay_phase"] == phase and inc["slurmctld_boot"] == "2026-12-02T13:26:43"
    assert [n["key"] for n in inc["not_modelled"]] == (["BOOT_TIME"] if noted else [])


def test_a_settings_file_without_boot_time_says_the_phase_is_unknown() -> None:
    conf = read_settings((DATA / "slurm.conf").read_text(), "slurm.conf")
    inc = incumbent(conf, "slurm.conf", _utc("2026-12-02T13:30:00"))
    assert "decay_phase" not in inc
    assert [n["key"] for n in inc["not_modelled"]] == ["BOOT_TIME"]


def test_a_bad_boot_time_names_the_key() -> None:
    text = (DATA / "config.txt").read_text().replace("2026-12-02T13:26:43", "yesterday")
    with pytest.raises(InputError) as err:
        incumbent(read_settings(text, "config.txt"), "config.txt", 0.0)
    assert "config.txt" in str(err.value) and "BOOT_TIME" in str(err.value)


def test_settings_the_model_lacks_are_named() -> None:
    conf = read_settings(
        "PriorityType=priority/multifactor\nPriorityWeightQOS=500\nPriorityFavorSmall=YES\n"
        "SchedulerParameters=bf_continue,bf_max_job_user=10,bf_window=2880\n",
        "slurm.conf",
    )
    inc = incumbent(conf, "slurm.conf")
    assert inc["bf_continue"] is True and inc["bf_window"] == "2d" and inc["weight_qos"] == 500
    assert [n["key"] for n in inc["not_modelled"]] == [
        "PriorityWeightQOS",
        "PriorityFavorSmall",
        "SchedulerParameters",
    ]
    # Slurm's defaults fill what a slurm.conf leaves out
    assert inc["decay_period"] == "5m" and inc["bf_max_job_test"] == 500 and inc["sched_interval"] == "1m"


def test_scontrol_nodes_and_slurm_conf_nodes_agree() -> None:
    f1, shown = read_nodes((DATA / "nodes.txt").read_text(), "nodes.txt", BadRows("n", False))
    f2, conf = read_nodes((DATA / "slurm.conf").read_text(), "slurm.conf", BadRows("n", False))
    assert (f1, f2) == ("scontrol -o show node", "slurm.conf")
    key = [(n.name, n.gpus, n.gpu_type, n.cpus, n.mem_gb, n.partitions) for n in shown]
    assert key == [(n.name, n.gpus, n.gpu_type, n.cpus, n.mem_gb, n.partitions) for n in conf]
    assert key[0] == ("n1", 8, "a100", 16, 62.5, ("gpu",))


def test_slurm_conf_node_defaults_and_untyped_gres() -> None:
    text = (
        "NodeName=DEFAULT CPUs=64 RealMemory=512000\nNodeName=g[01-02] Gres=gpu:4\n"
        "NodeName=c1 CPUs=8\nPartitionName=p Nodes=g[01-02] MaxTime=2-00:00:00\n"
    )
    _, nodes = read_nodes(text, "slurm.conf", BadRows("n", False))
    assert [(n.name, n.gpus, n.gpu_type, n.cpus) for n in nodes] == [
        ("c1", 0, "", 8),
        ("g01", 4, "gpu", 64),
        ("g02", 4, "gpu", 64),
    ]
    assert read_settings(text, "slurm.conf").partition_max_time("p") == 172800.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("NodeName=n1 CPUTot=many RealMemory=1 Gres=gpu:a100:8\n", "nodes.txt: line 1, column 20 (cputot)"),
        ("NodeName=n[1-x] CPUs=4\n", "nodes.txt: line 1, column 10 (NodeName)"),
        ("ClusterName=x\n", "holds no nodes"),
    ],
    ids=["bad-cpus", "bad-hostlist", "no-nodes"],
)
def test_bad_nodes(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_nodes(text, "nodes.txt", BadRows("nodes.txt", False))
    assert message in str(err.value)
