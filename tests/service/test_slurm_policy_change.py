"""The loop on SlurmCluster over FakeSlurm when a policy change cancels waiting jobs (their group
left the tree): the engine cancels them (ServingState.reconfigure) and fairshare holds them in
Slurm, so Slurm's own scheduler does not start them behind the engine's back."""

from __future__ import annotations

import pytest

from fairshare.service.storage import portfolio

from .slurm_helpers import POLICY, Rig, rig

SQLITE = "sqlite:///{}"
WITHOUT_PLATFORM = POLICY.replace(
    "- name: platform\n  share: 20\n  owner: eng@example.com\n  review: '2027-06-30'\n"
    "  hypothesis: infra tests stay green\n",
    "",
)


@pytest.fixture
def db(tmp_path: object) -> str:
    return SQLITE.format(f"{tmp_path}/fs.db")


def _fill_and_wait(r: Rig) -> tuple[list[int], int]:
    jobs = [r.fake.submit(a, 8) for a in ("research", "research", "product", "product")]
    r.tick(schedule=False)
    r.tick()
    waiting = r.fake.submit("platform", 8)
    r.tick()
    e = r.loop.engine
    assert e is not None and len(e.state.running) == 4 and str(waiting) in e.state.pending.jobs
    return jobs, waiting


def _change_policy(r: Rig) -> None:
    with r.store.write() as tx:
        portfolio.put_policy(tx, WITHOUT_PLATFORM, "test")
    r.tick()


def test_a_job_cancelled_by_a_policy_change_is_held_in_slurm_and_never_started(db: str) -> None:
    assert WITHOUT_PLATFORM != POLICY
    with rig(db) as r:
        jobs, waiting = _fill_and_wait(r)
        _change_policy(r)
        e = r.loop.engine
        assert e is not None and str(waiting) not in e.state.pending.jobs
        (cancelled,) = r.records("policy_cancelled")
        assert cancelled.job == str(waiting)
        assert ("hold", waiting) in [w[:2] for w in r.fake.writes]
        (held,) = r.records("slurm_hold")
        assert held.job == str(waiting)
        assert held.evidence == {"reason": "leaf_removed", "outcome": "applied"}
        # Slurm frees a node: its scheduler does not start the held job
        r.fake.finish(jobs[0])
        for _ in range(3):
            r.tick()
        assert r.fake.jobs[waiting].job.state == "PENDING"
        assert str(waiting) not in e.state.running
        assert len(r.records("slurm_hold")) == 1  # audited once
        assert not [iv for iv in r.usage() if iv.job == str(waiting)]


def test_a_dry_run_records_the_hold_and_writes_nothing(db: str) -> None:
    with rig(db, dry_run=True) as r:
        _, waiting = _fill_and_wait(r)
        _change_policy(r)
        r.tick()
        (held,) = r.records("slurm_hold")
        assert held.job == str(waiting) and held.evidence == {"reason": "leaf_removed", "dry_run": True}
        assert not [w for w in r.fake.writes if w[0] == "hold"]


def test_a_cancelled_job_released_by_an_admin_runs_noted_and_uncharged(db: str) -> None:
    with rig(db) as r:
        jobs, waiting = _fill_and_wait(r)
        _change_policy(r)
        r.fake.release(waiting)  # an admin lets it run anyway
        r.fake.finish(jobs[0])
        r.tick()
        r.tick()
        assert r.fake.jobs[waiting].job.state == "RUNNING"
        e = r.loop.engine
        assert e is not None and str(waiting) not in e.state.running
        (noted,) = r.records("slurm_unmanaged_run")
        assert noted.job == str(waiting) and noted.evidence["reason"] == "leaf_removed"
        assert not [iv for iv in r.usage() if iv.job == str(waiting)]
