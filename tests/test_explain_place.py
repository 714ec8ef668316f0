"""explain agrees with the queue offline as live (issue 18): `fairshare explain --at T` replays the
inputs to T and takes a waiting job's place in line, its place in its group's queue, the jobs of
its own group ahead and the groups ahead from the order of the last pass (the live explain's
function, fairshare.core.queue); every pending job of a generated state is checked against that
order counted here by hand."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.loaded import Inputs
from fairshare.replay.runner import inputs_from_scenario, run_strategy
from fairshare.replay.sim import Simulator
from fairshare.report.explain import explain_at, place_of, replay_to

T = 2 * 86400.0  # small-burst two days in: 100+ jobs wait under each policy below


@cache
def _inputs() -> Inputs:
    return inputs_from_scenario(SCENARIOS["small-burst"](1))


@cache
def _state(strategy: str) -> Simulator:
    return replay_to(_inputs(), strategy, T)


@pytest.mark.parametrize("strategy", ["fairshare", "slurm-multifactor", "fifo"])
def test_offline_explain_agrees_with_the_queue_for_every_pending_job(strategy: str) -> None:
    sim = _state(strategy)
    pending = sim.engine.pending.jobs
    assert len(pending) > 50 and sim.order, "the generated state has a queue"
    ordered = [j for j in sim.order if j in pending]  # the last pass's order, then the unordered
    ids = ordered + [j for j in pending if j not in set(ordered)]
    paths = _inputs().tree.paths
    group_of = {j: paths[pending[j].leaf] for j in ids}
    for i, jid in enumerate(ids):
        place = place_of(sim, jid)
        assert place is not None
        ahead = ids[:i]
        mine = group_of[jid]
        same = sum(1 for a in ahead if group_of[a] == mine)
        assert (place.position, place.queue_length) == (i + 1, len(ids)), jid
        assert (place.group_position, place.same_group_ahead) == (same + 1, same), jid
        assert place.group_queue_length == sum(1 for j in ids if group_of[j] == mine)
        others = Counter(group_of[a] for a in ahead if group_of[a] != mine)
        assert sum(a.jobs for a in place.ahead) == sum(others.values())
        for a in place.ahead:  # each side's count is the jobs ahead under that side
            side = paths[a.side]
            assert a.jobs == sum(n for grp, n in others.items() if grp == side or grp.startswith(side + "/"))
            assert a.gpus == sum(
                pending[j].gpus for j in ahead if group_of[j] == side or group_of[j].startswith(side + "/")
            )
        assert [a.jobs for a in place.ahead] == sorted((a.jobs for a in place.ahead), reverse=True)


def test_explain_at_names_the_place_in_line_and_the_groups_ahead() -> None:
    sim = _state("fairshare")
    pending = sim.engine.pending.jobs
    job = next(j for j in reversed(sim.order) if j in pending)
    place = place_of(sim, job)
    assert place is not None and place.ahead
    text = explain_at(_inputs(), "fairshare", job, T)
    assert f"waiting; #{place.position} of {place.queue_length} in the queue" in text
    assert f"#{place.group_position} of {place.group_queue_length} in {pending[job].group}'s queue" in text
    top = place.ahead[0]
    assert f"  {_inputs().tree.paths[top.side]}: {top.jobs} job(s), {top.gpus} GPU(s)" in text
    res = CliRunner().invoke(main, ["explain", "--scenario", "small-burst", "--job", job, "--at", "2d"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == text


def test_explain_at_replays_the_overstated_estimates_of_the_run_it_explains() -> None:
    """`explain --at T --overstate LOW:HIGH` replays the estimates compare (--seed N) and replay
    drew: a job whose place in line the overstated estimates changed is placed as in that run."""
    from fairshare._cli_inputs import overstate_factors, overstated

    over = overstated(_inputs(), overstate_factors("2:10"), 1)
    plain, drawn = _state("fairshare"), replay_to(over, "fairshare", T)
    job = next(j.id for j in _inputs().jobs if place_of(plain, j.id) != place_of(drawn, j.id))
    args = ["explain", "--scenario", "small-burst", "--job", job, "--at", "2d"]
    res = CliRunner().invoke(main, [*args, "--overstate", "2:10"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == explain_at(over, "fairshare", job, T)
    assert res.stdout.strip() != explain_at(_inputs(), "fairshare", job, T)
    bad = CliRunner().invoke(main, [*args, "--overstate", "10:2"])
    assert bad.exit_code == 2 and "--overstate" in bad.stderr, bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--at", "2d"], "give --scenario"),
     (["--scenario", "small-burst", "--at", "99999d"], "--at: 99999d: must be within t = 0 .. 10 years"),
     (["--scenario", "small-burst", "--at", "2d", "--policy-name", "as-run"], "it has no queue"),
     (["--scenario", "nope", "--at", "2d"], "unknown scenario"),
     ([], "give --out (a replay's folder) or --at TIME")],
    ids=["no-inputs", "at-out-of-range", "as-run", "unknown-scenario", "neither-out-nor-at"],
)  # fmt: skip
def test_explain_at_refuses_bad_options_naming_them(args: list[str], message: str) -> None:
    res = CliRunner().invoke(main, ["explain", "--job", "x", *args])
    assert res.exit_code == 2 and message in res.stderr, res.stderr


@pytest.mark.parametrize(
    "given",
    [["--overstate", "2:10"], ["--scenario", "small-burst"], ["--seed", "3"], ["--policy-name", "fifo"],
     ["--trace", "philly"], ["--round-gpus"], ["--jobs", "0:10"], ["--clip-duration", "1s:1h"]],
    ids=["overstate", "scenario", "seed", "policy-name", "trace", "round-gpus", "jobs", "clip-duration"],
)  # fmt: skip
def test_explain_without_at_refuses_an_option_it_would_ignore_naming_it(
    given: list[str], tmp_path: Path
) -> None:
    """Without --at, explain reads the folder as it ran: an option that only chooses what --at
    replays would change nothing, and is refused rather than silently dropped."""
    res = CliRunner().invoke(main, ["explain", "--out", str(tmp_path), "--job", "x", *given])
    assert res.exit_code == 2, res.output
    assert f"{given[0]}: is used with --at only" in res.stderr, res.stderr


def test_a_job_not_waiting_at_t_is_said_so() -> None:
    first = _inputs().jobs[0]
    assert "not submitted yet" in explain_at(_inputs(), "fairshare", first.id, first.submit - 1)
    last = max(_inputs().jobs, key=lambda j: j.submit)
    text = explain_at(_inputs(), "fairshare", first.id, last.submit + 10 * 86400)
    assert text.endswith("no longer waiting (it ended)")


def test_keeping_the_order_changes_no_decision() -> None:
    """explain --at replays with every pass ordering the whole queue: the replay is the same."""
    inputs = _inputs()
    plain = run_strategy(inputs, "fairshare")
    kept = Simulator(
        inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fairshare", keep_order=True
    ).run()
    assert kept.events == plain.events and kept.decisions == plain.decisions
