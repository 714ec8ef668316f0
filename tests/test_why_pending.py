"""Order and why-pending on request (decide(..., explain=True)): every pending job in the
strategy's order with a hold reason for each that does not start; the decisions stay the same."""

from __future__ import annotations

import copy

import pytest

from conftest import job, make_inputs, tiny_cluster, tiny_policy
from fairshare.core import Decisions, Snapshot, Strategy, decide
from fairshare.core.fairness import PassPriorities
from fairshare.core.model import LABEL_RANK
from fairshare.engine.state import EngineState
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario
from fairshare.replay.sim import Simulator

STRATEGIES = ["fairshare", "fifo", "priority-labels", "slurm-multifactor"]


def _mid_replay(scenario: str, strategy: str, fraction: float) -> EngineState:
    inputs = inputs_from_scenario(SCENARIOS[scenario](1))
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy)
    assert sim.run(until=fraction * max(j.submit for j in inputs.jobs)) is None
    return copy.deepcopy(sim.engine)  # a snapshot integrates the ledger: leave the replay alone


def _plain(d: Decisions) -> tuple[object, ...]:
    return (d.preempts, d.starts, d.holds, d.reservation)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("scenario", ["small-burst", "label-inflation"])
def test_every_pending_job_is_ordered_once_and_every_one_not_started_has_a_reason(
    scenario: str, strategy: str
) -> None:
    engine = _mid_replay(scenario, strategy, 0.5)
    snap = engine.snapshot()
    pending = set(snap.pending.jobs)
    assert len(pending) > 10  # a real queue
    explained = decide(snap, engine.strategy, explain=True)
    assert _plain(explained) == _plain(decide(snap, engine.strategy))  # asking changes nothing
    assert len(explained.order) == len(set(explained.order)) and set(explained.order) == pending
    started = {s.job for s in explained.starts}
    assert set(explained.why_pending) == pending - started
    assert set(explained.why_pending.values()) <= {"no_capacity", "fragmented", "reserved", "no_victims"}
    for h in explained.holds:
        assert explained.why_pending[h.job] == h.reason
    # a replay does not ask: nothing is computed
    plain = decide(snap, engine.strategy)
    assert plain.order == () and dict(plain.why_pending) == {}


@pytest.mark.parametrize(
    ("strategy", "key"),
    [
        ("fifo", lambda r: (r.seq,)),
        ("priority-labels", lambda r: (LABEL_RANK[r.label], r.seq)),
    ],
    ids=["fifo", "priority-labels"],
)
def test_baselines_order_by_submit_and_label_even_when_the_cluster_is_full(
    strategy: str, key: object
) -> None:
    engine = _mid_replay("label-inflation", strategy, 0.6)
    snap = engine.snapshot()
    d = decide(snap, engine.strategy, explain=True)
    jobs = snap.pending.jobs
    assert callable(key)
    assert list(d.order) == sorted(d.order, key=lambda j: key(jobs[j]))


def test_fairshare_order_interleaves_groups_as_if_each_job_started() -> None:
    """Two teams with equal shares queue behind a third team's job that fills the cluster: the
    order alternates between them instead of listing one team's whole backlog first."""
    jobs = [job("fill", 0.0, "c", "train", 16, 36000.0)]
    jobs += [job(f"a{i}", 10.0 + i, "a", "train", 8, 3600.0) for i in range(4)]
    jobs += [job(f"b{i}", 20.0 + i, "b", "train", 8, 3600.0) for i in range(4)]
    tree = [{"name": n, "share": 1} for n in ("a", "b", "c")]
    inputs = make_inputs(tiny_policy(tree=tree), tiny_cluster(nodes=2, gpus=8), jobs)
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fairshare")
    assert sim.run(until=30.0) is None
    engine = copy.deepcopy(sim.engine)
    d = decide(engine.snapshot(), engine.strategy, explain=True)
    groups = [engine.pending.jobs[j].group for j in d.order]
    assert sorted(groups) == ["a"] * 4 + ["b"] * 4
    # a has waited longer (owed since 10 s, b since 20 s): a first, then turns
    assert groups == ["a", "b"] * 4
    assert set(d.why_pending.values()) <= {"no_capacity", "no_victims"}


def test_a_job_that_fits_in_total_but_not_on_one_node_is_fragmented() -> None:
    # three 8-GPU nodes, each with a 5-GPU job: 9 GPUs free in total, 3 per node
    jobs = [job(x, 0.0, "a", "train", 5, 36000.0) for x in ("x", "y", "z")]
    jobs.append(job("big", 5.0, "b", "train", 8, 3600.0, nodes=1))
    inputs = make_inputs(tiny_policy(), tiny_cluster(nodes=3, gpus=8), jobs)
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fifo")
    assert sim.run(until=5.0) is None
    engine = copy.deepcopy(sim.engine)
    snap = engine.snapshot()
    assert sorted(snap.index.free) == [3, 3, 3]
    assert decide(snap, engine.strategy, explain=True).why_pending == {"big": "fragmented"}


def _greedy_ranking(snap: Snapshot, strategy: Strategy) -> list[str]:
    """The strategy's own pass order, each job started in turn: its charge counted against its
    group (DebtOrder re-ranks), nothing ever failing."""
    used = list(snap.used)
    prio = PassPriorities(
        snap.debt, snap.owed, used, snap.entitlement, snap.knobs.lookahead, snap.tree.leaf_ancestors
    )
    order = strategy.order(snap, set(), prio)
    out: list[str] = []
    while (nxt := order.next()) is not None:
        qk, jid = nxt
        out.append(jid)
        order.started(qk)
        job = snap.pending.jobs[jid]
        for a in snap.tree.leaf_ancestors[job.leaf]:
            used[a] += job.charge
        prio.changed(job.leaf)
        order.used_changed(job.leaf)
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("scenario", "fraction"), [("label-inflation", 0.7), ("small-burst", 0.5), ("idle-return", 0.8)]
)
def test_the_whole_queue_ranking_equals_the_pass_order_run_to_the_end(
    scenario: str, fraction: float, strategy: str
) -> None:
    engine = _mid_replay(scenario, strategy, fraction)
    snap = engine.snapshot()
    assert len(snap.pending) > 10
    assert engine.strategy.rank(snap) == _greedy_ranking(snap, engine.strategy)
