"""The loop on `SlurmCluster` over `FakeSlurm`, on a manual clock (tests/service/test_slurm_*.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fairshare.inputs.policy import Policy
from fairshare.service.clusters.slurm_cluster import SlurmCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.loop.requests import CrashPoints
from fairshare.service.options import SlurmOptions
from fairshare.service.storage import audit, journal, portfolio
from fairshare.service.storage.store import Store
from fairshare.slurm.fake_client import FakeSlurm

from .conftest import T0, Clock

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "slurm-policy.yaml").read_text()
# short windows, so a test sees protection end and a preemption within minutes
POLICY = EXAMPLE.replace("  train:\n    protected: 1h\n", "  train:\n    protected: 5m\n") + (
    "scheduling:\n  preempt_backoff: 60s\n  requeue_delay: 5s\n"
)


@dataclass
class Rig:
    store: Store
    fake: FakeSlurm
    clock: Clock
    loop: SchedulerLoop
    options: SlurmOptions

    def new_loop(self, crash: CrashPoints | None = None) -> SchedulerLoop:
        """A loop as a (re)started `serve` builds it: the engine rebuilt from the journal."""
        loop: SchedulerLoop | None = None

        def backend() -> SlurmCluster:
            assert loop is not None
            pol = loop.policy(_current(self.store).sha256)
            return SlurmCluster(
                self.fake, pol, lambda: loop.engine if loop else None, self.options, clock=self.clock,
                policy_of=loop.policy,
            )  # fmt: skip

        opts = LoopOptions(speed=0, forecast_s=3600.0, publish_s=3600.0, poll_s=15.0)
        if crash is not None:
            opts.crash = crash
        loop = SchedulerLoop(self.store, backend, self.clock, opts)
        assert loop.take_lock()
        loop.become_writer()
        self.loop = loop
        return loop

    def tick(self, seconds: float = 15.0, schedule: bool = True) -> None:
        """Time passes; Slurm's scheduler runs (by priority, with backfill); the loop cycles."""
        self.clock.advance(seconds)
        if schedule:
            self.fake.schedule()
        self.loop.cycle()

    def kinds(self, job: str | None = None) -> list[str]:
        with self.store.read() as tx:
            return [r.decision for r in audit.query(tx, job=job, limit=None)]

    def records(self, kind: str) -> list[audit.StoredRecord]:
        with self.store.read() as tx:
            return [r for r in audit.query(tx, limit=None) if r.decision == kind]

    def usage(self) -> list[journal.Interval]:
        with self.store.read() as tx:
            return journal.usage_between(tx, 0.0, self.clock.t + 1)


def _current(store: Store) -> portfolio.PolicyVersion:
    with store.read() as tx:
        cur = portfolio.current_policy(tx)
    assert cur is not None
    return cur


@contextmanager
def rig(db_url: str, policy: str = POLICY, dry_run: bool = False, t0: float = T0) -> Iterator[Rig]:
    clock = Clock(t0)
    fake = FakeSlurm.dev(clock)
    with Store.open(db_url, clock) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, policy, "test")
        r = Rig(store, fake, clock, None, SlurmOptions(dry_run=dry_run, grace_s=30.0))  # type: ignore[arg-type]
        r.new_loop()
        try:
            yield r
        finally:
            r.loop._reset()


def policy_of(r: Rig) -> Policy:
    return _current(r.store).policy()
