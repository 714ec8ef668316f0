"""Observed progress in the engine (docs/progress.md): progress, checkpoint and resumed reports,
the stall rule (the replay's hang watchdog), lost work from real checkpoints, victim choice by real
checkpoint age, and each class's recovery record; all journaled and rebuilt."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import a_request, job, make_inputs, tiny_cluster, tiny_policy
from fairshare.core import JobRequest, Knobs, Node, TreeIndex, decide, get_strategy
from fairshare.engine import EngineSetup, EngineState, Event
from fairshare.engine.progress import ProgressError
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.loaded import Inputs
from fairshare.replay.results import ReplayOutput
from fairshare.replay.runner import inputs_from_scenario
from fairshare.replay.sim import Simulator
from test_engine import Group

Report = tuple[float, str, tuple[Any, ...]]  # (t, call, args after the job id), or a submit/finish


def _setup() -> EngineSetup:
    tree = TreeIndex.build([Group("a", 50), Group("b", 50)])
    node = Node("n-000", "n", 8, "H100", 64.0, 512.0, "n-b0")
    return EngineSetup(tree, Knobs(), {"H100": 1.0}, (node,), 7 * 86400.0)


def _req(job_id: str, leaf: int, submit: float, gpus: int, **over: Any) -> JobRequest:
    fields: dict[str, Any] = {
        "id": job_id,
        "group": "ab"[leaf],
        "leaf": leaf,
        "submit": submit,
        "gpus": gpus,
        "charge": float(gpus),
        "seq": int(job_id[-1]),
    }
    return a_request(**{**fields, **over})


class Driver:
    """Drives an engine through instants: its own events at their times and the engine's timers;
    every start and preemption carried out at once (kept: what the core's lost work implies)."""

    def __init__(self) -> None:
        self.journal: list[Event] = []
        self.engine = EngineState(_setup(), get_strategy("fairshare"), journal=self.journal)
        self.audit: list[dict[str, Any]] = []

    def run(self, events: list[tuple[float, str, Any]], until: float) -> None:
        e = self.engine
        todo = sorted(events, key=lambda ev: ev[0])
        while True:
            t = todo[0][0] if todo else None
            nt = e.next_time()
            if nt is not None and (t is None or nt < t):
                t = nt
            if t is None or t > until:
                return
            e.begin(t)
            while todo and todo[0][0] == t:
                _, kind, arg = todo.pop(0)
                if kind == "submit":
                    e.submit(arg)
                elif kind == "finished":
                    e.finished(arg)
                else:
                    getattr(e, kind)(*arg)
            e.poke()
            if e.settle():
                actions = e.apply(decide(e.snapshot(), e.strategy))
                self.audit.extend(actions.audit)
                for p in actions.preempts:
                    e.preempted(p.job, p.reason, p.by, p.lost_gpu_s, 0.0)
                for s in actions.starts:
                    e.started(s.job, s.alloc, s.charge)

    def preempts(self) -> list[tuple[float, str, str, float | None]]:
        return [
            (r["t"], r["job"], r["reason"], r.get("no_progress_since"))
            for r in self.audit
            if r["decision"] == "preempt"
        ]


@pytest.mark.parametrize(
    ("required", "reports", "expected"),
    [
        pytest.param(False, [], [], id="optional-never-reports-is-never-stalled"),
        pytest.param(
            True, [], [(600.0, "j1", "no_progress", 0.0)], id="required-never-reports-stalls-after-max-stall"
        ),
        pytest.param(
            False,
            [(100.0, 1), (500.0, 2)],
            [(1100.0, "j1", "no_progress", 500.0)],
            id="stalls-max-stall-after-last-step",
        ),
        pytest.param(
            False,
            [(100.0, 1), (500.0, 2), (1050.0, 3)],
            [(1650.0, "j1", "no_progress", 1050.0)],
            id="each-advancing-step-restarts-the-clock",
        ),
        pytest.param(
            False,
            [(100.0, 1), (500.0, 2), (1000.0, 2)],
            [(1100.0, "j1", "no_progress", 500.0)],
            id="a-repeated-step-is-not-progress",
        ),
    ],
)
def test_a_run_whose_progress_stops_for_max_stall_is_preempted_no_progress(
    required: bool, reports: list[tuple[float, int]], expected: list[tuple[float, str, str, float]]
) -> None:
    d = Driver()
    job = _req("j1", 0, 0.0, 8, protected=3600.0, estimate=9000.0, progress_required=required)
    events: list[tuple[float, str, Any]] = [(0.0, "submit", job)]
    events += [(t, "progress", ("j1", step, t)) for t, step in reports]
    d.run(events, until=5000.0)
    assert d.preempts()[:1] == expected  # inside its protected window too, as a reported hang


def test_a_stalled_run_that_reports_again_is_no_longer_hung() -> None:
    d = Driver()
    job = _req("j1", 0, 0.0, 4, protected=3600.0, estimate=9000.0, progress_required=True)
    other = _req("j2", 0, 0.0, 4, protected=3600.0, estimate=9000.0)  # keeps a pass from being due alone
    d.run([(0.0, "submit", job), (0.0, "submit", other)], until=599.0)
    e = d.engine
    e.begin(600.0)  # the stall timer: hung since the start, and the watchdog preempts now
    assert e.hung_since == {"j1": 0.0} and e.running["j1"].hung_since == 0.0
    e.progress("j1", 10, 600.0)  # ... unless it reports before the pass
    assert e.hung_since == {} and e.running["j1"].hung_since is None
    assert not [p for p in decide(e.snapshot(), e.strategy).preempts if p.reason == "no_progress"]


@pytest.mark.parametrize(
    ("setup_calls", "call", "message"),
    [
        pytest.param(
            [("progress", ("j1", 5, 10.0))],
            ("progress", ("j1", 4, 20.0)),
            "below the step 5",
            id="regressing-progress",
        ),
        pytest.param(
            [("checkpoint", ("j1", 5, 10.0, None))],
            ("checkpoint", ("j1", 3, 20.0, None)),
            "below the checkpoint step 5",
            id="regressing-checkpoint",
        ),
        pytest.param([], ("progress", ("j9", 1, 10.0)), "job j9: not running", id="job-not-running"),
        pytest.param([], ("progress", ("j1", -1, 10.0)), "whole number >= 0", id="negative-step"),
        pytest.param([], ("progress", ("j1", 1.5, 10.0)), "whole number >= 0", id="fractional-step"),
        pytest.param(
            [("progress", ("j1", 5, 10.0))],
            ("resumed", ("j1", 3, 20.0)),
            "before the run's first progress",
            id="resumed-after-progress",
        ),
        pytest.param(
            [("resumed", ("j1", 3, 10.0))],
            ("resumed", ("j1", 4, 20.0)),
            "already reported resumed",
            id="resumed-twice-differently",
        ),
    ],
)
def test_a_bad_report_is_refused_with_a_clear_error_and_changes_nothing(
    setup_calls: list[tuple[str, tuple[Any, ...]]], call: tuple[str, tuple[Any, ...]], message: str
) -> None:
    d = Driver()
    d.run([(0.0, "submit", _req("j1", 0, 0.0, 8))], until=0.0)
    e = d.engine
    for kind, args in setup_calls:
        getattr(e, kind)(*args)
    before = (len(d.journal), e.run_reports("j1"))
    snapshot = None if before[1] is None else before[1].as_json()
    with pytest.raises(ProgressError, match=message):
        getattr(e, call[0])(*call[1])
    after = e.run_reports("j1")
    assert len(d.journal) == before[0] and (None if after is None else after.as_json()) == snapshot


def test_the_same_report_twice_is_idempotent() -> None:
    d = Driver()
    d.run([(0.0, "submit", _req("j1", 0, 0.0, 8))], until=0.0)
    e = d.engine
    assert e.checkpoint("j1", 7, 100.0, "s3://b/7") is True
    first = e.run_reports("j1")
    assert first is not None
    state = first.as_json()
    assert e.checkpoint("j1", 7, 150.0, "s3://b/7") is False and e.progress("j1", 7, 160.0) is False
    again = e.run_reports("j1")
    assert again is not None and again.as_json() == state
    assert state["step"] == 7 and state["checkpoint_t"] == 100.0  # a checkpoint is progress too


def _preempted_by_b(ckpts: dict[str, float]) -> dict[str, Any]:
    """a1 and a2 (4 GPUs each, protected 600 s, declared checkpoint 300 s) run; b3 arrives at 100;
    at 600 one of a's runs is taken for b3. `ckpts`: a job's reported checkpoint instant."""
    d = Driver()
    a1, a2 = _req("a1", 0, 0.0, 4), _req("a2", 0, 0.0, 4)
    b = _req("b3", 1, 100.0, 4)
    events: list[tuple[float, str, Any]] = [(0.0, "submit", a1), (0.0, "submit", a2), (100.0, "submit", b)]
    events += [(t, "checkpoint", (job, int(t), t, None)) for job, t in ckpts.items()]
    d.run(events, until=600.0)
    (record,) = [r for r in d.audit if r["decision"] == "preempt"]
    return record


@pytest.mark.parametrize(
    ("ckpts", "victim", "lost", "declared"),
    [
        pytest.param({}, "a1", 0.0, None, id="declared-interval-ties-go-by-job-id"),
        pytest.param(
            {"a1": 100.0, "a2": 590.0}, "a2", (600.0 - 590.0) * 4, 0.0, id="the-fresher-checkpoint-is-taken"
        ),
        pytest.param({"a1": 590.0, "a2": 100.0}, "a1", (600.0 - 590.0) * 4, 0.0, id="by-real-age-not-by-id"),
        pytest.param(
            {"a1": 250.0, "a2": 200.0}, "a1", (600.0 - 250.0) * 4, 0.0, id="lost-since-the-real-checkpoint"
        ),
    ],
)
def test_lost_work_and_victim_choice_come_from_the_reported_checkpoint(
    ckpts: dict[str, float], victim: str, lost: float, declared: float | None
) -> None:
    record = _preempted_by_b(ckpts)
    assert (record["job"], record["lost_gpu_s"]) == (victim, lost)
    assert record.get("lost_gpu_s_declared") == declared  # beside what the declared interval predicted
    assert record.get("checkpoint_at") == ckpts.get(victim)


@pytest.mark.parametrize(
    ("restart_reports", "expected"),
    [
        pytest.param(
            [("resumed", 900), ("progress", 950)],
            {
                "restarts": 1,
                "resumed": 1,
                "resumed_share": 1.0,
                "steps_lost": 100,
                "restart_to_first_progress_s": 40.0,
            },
            id="resumed-from-its-checkpoint",
        ),
        pytest.param(
            [("progress", 5)],
            {
                "restarts": 1,
                "resumed": 0,
                "resumed_share": 0.0,
                "steps_lost": 1000,
                "restart_to_first_progress_s": 10.0,
            },
            id="started-over",
        ),
        pytest.param(
            [],
            {
                "restarts": 1,
                "resumed": 0,
                "resumed_share": 0.0,
                "steps_lost": 0,
                "restart_to_first_progress_s": None,
            },
            id="restarted-silent-so-far",
        ),
    ],
)
def test_a_class_learns_its_recovery_from_resumed_reports(
    restart_reports: list[tuple[str, int]], expected: dict[str, Any]
) -> None:
    d = Driver()
    a1 = _req("a1", 0, 0.0, 8, estimate=90000.0)
    b = _req("b3", 1, 100.0, 8, estimate=1000.0)
    events: list[tuple[float, str, Any]] = [
        (0.0, "submit", a1),
        (100.0, "submit", b),
        (400.0, "checkpoint", ("a1", 900, 400.0, "/ckpt/900")),
        (500.0, "progress", ("a1", 1000, 500.0)),
    ]
    d.run(events, until=1599.0)
    assert [r["job"] for r in d.audit if r["decision"] == "preempt"] == ["a1"]
    d.run([(1600.0, "finished", "b3")], until=1600.0)  # a1 restarts at 1600
    t0 = d.engine.running["a1"].t0
    assert t0 == 1600.0
    later = [
        (t0 + 10.0 + 30.0 * i, kind, ("a1", step, t0 + 10.0 + 30.0 * i))
        for i, (kind, step) in enumerate(restart_reports)
    ]
    d.run(later, until=t0 + 100.0)
    flag = expected["resumed"] < 0.9 * expected["restarts"]  # a resumable class not borne out
    assert d.engine.recovery_json() == {
        "train": {"declared_resumable": True, "not_borne_out": flag, **expected}
    }
    # the journal, sent through JSON, rebuilds the same reports, hangs, timers and recovery
    stored = [json.loads(json.dumps(ev.as_json())) for ev in d.journal]
    rebuilt = EngineState.rebuild(_setup(), get_strategy("fairshare"), [Event.from_json(x) for x in stored])
    assert rebuilt.recovery_json() == d.engine.recovery_json()
    assert {k: v.as_json() for k, v in rebuilt.reports.items()} == {
        k: v.as_json() for k, v in d.engine.reports.items()
    }
    assert rebuilt.timers == d.engine.timers and rebuilt.running == d.engine.running


# ---------------------------------------------------------------------- replay parity (must-have 6)
def _hangs_inputs() -> Inputs:
    """One 8-GPU node; team a's training hangs part-way (and one never hangs), team b's jobs
    arrive to take a's loans past protection: hangs, fair-share preemptions and restarts."""
    policy = tiny_policy()
    jobs = [
        job("a-1", 0.0, "a", "train", 4, 20000.0, stall_after=5000.0),
        job("a-2", 0.0, "a", "train", 4, 9000.0),
        job("a-3", 600.0, "a", "debug", 2, 3000.0, stall_after=1000.0),
        job("b-1", 4000.0, "b", "train", 4, 8000.0),
        job("b-2", 4100.0, "b", "debug", 4, 2500.0, stall_after=2000.0),
        job("a-4", 5000.0, "a", "train", 8, 7000.0, stall_after=4400.0),
    ]
    return make_inputs(policy, tiny_cluster(nodes=1), jobs)


def _both(inputs: Inputs, strategy: str) -> tuple[ReplayOutput, ReplayOutput, list[Event]]:
    plain = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy).run()
    journal: list[Event] = []
    reporting = Simulator(
        inputs.policy,
        inputs.tree,
        inputs.cluster,
        inputs.jobs,
        strategy,
        journal=journal,
        report_progress=True,
    ).run()
    return plain, reporting, journal


@pytest.mark.parametrize(
    ("scenario", "strategy"),
    [
        pytest.param("hangs", "fairshare", id="hangs-fairshare"),
        pytest.param("hangs", "fifo", id="hangs-fifo"),
        pytest.param("hangs", "priority-labels", id="hangs-priority-labels"),
        pytest.param("eight-gpu", "fairshare", id="eight-gpu-fairshare"),
        pytest.param("normal", "fairshare", id="normal-fairshare", marks=pytest.mark.slow),
    ],
)
def test_the_replay_finds_hangs_from_reports_exactly_as_from_its_truth(scenario: str, strategy: str) -> None:
    inputs = _hangs_inputs() if scenario == "hangs" else inputs_from_scenario(SCENARIOS[scenario](1))
    plain, reporting, journal = _both(inputs, strategy)
    kinds = {ev.kind for ev in journal}
    # live detection: the jobs reported, and no driver told the engine of a hang
    assert {"progress", "checkpoint"} <= kinds and "hung" not in kinds
    assert reporting.events == plain.events  # the same starts, preemptions (no_progress too) and lost work
    if scenario != "eight-gpu":
        assert any('"no_progress"' in e for e in plain.events)


def test_reporting_is_off_by_default_and_the_decisions_differ_only_by_checkpoint_evidence() -> None:
    plain, reporting, journal = _both(_hangs_inputs(), "fairshare")
    assert any(ev.kind == "resumed" for ev in journal)  # a resumable restart reported what it restored
    stripped, priced = [], 0
    for line in reporting.decisions:
        record = json.loads(line)
        if record.pop("checkpoint_at", None) is not None:
            priced += 1
            assert record.pop("lost_gpu_s_declared") == pytest.approx(record["lost_gpu_s"])  # truth agrees
        stripped.append(record)
    assert priced > 0 and stripped == [json.loads(line) for line in plain.decisions]
