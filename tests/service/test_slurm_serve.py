"""`serve --cluster slurm`: it refuses to start on a Slurm that `slurm check` finds wrong (exit 2
naming each item), and its options."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main
from fairshare.errors import InputError
from fairshare.service.clusters.slurm_cluster import SlurmCluster
from fairshare.service.options import ServeOptions
from fairshare.service.serve_slurm import prepare_slurm
from fairshare.service.storage import portfolio
from fairshare.service.storage.store import Store
from fairshare.slurm.fake_client import FakeSlurm, dev_config

from .conftest import T0, Clock
from .slurm_helpers import POLICY


def _store(tmp_path: Path, clock: Clock) -> Store:
    store = Store.open(f"sqlite:///{tmp_path}/fs.db", clock)
    with store.write() as tx:
        portfolio.put_policy(tx, POLICY, "test")
    return store


def test_serve_refuses_a_slurm_that_is_not_set_up(tmp_path: Path) -> None:
    clock = Clock(T0)
    fake = FakeSlurm.dev(clock)
    fake.config = dev_config(PreemptType="preempt/qos", JobRequeue="0")
    opt = ServeOptions(f"sqlite:///{tmp_path}/fs.db", None, "slurm", None)
    with _store(tmp_path, clock) as store, pytest.raises(InputError) as exc:
        prepare_slurm(opt, store, [], client=fake, wall=clock)
    assert "PreemptType" in str(exc.value) and "JobRequeue" in str(exc.value)


def test_serve_builds_the_engine_from_slurms_nodes(tmp_path: Path) -> None:
    clock = Clock(T0)
    fake = FakeSlurm.dev(clock)
    opt = ServeOptions(f"sqlite:///{tmp_path}/fs.db", None, "slurm", None)
    opt.dry_run = True
    notes: list[str] = []
    with _store(tmp_path, clock) as store:
        loop = prepare_slurm(opt, store, notes, client=fake, wall=clock)
        assert loop.opt.poll_s == 15.0 and "dry run" in notes[-1]
        assert loop.take_lock()
        loop.become_writer()
        backend = loop.backend
        assert isinstance(backend, SlurmCluster) and backend.opt.dry_run
        assert [n.name for n in backend.nodes()] == ["n1", "n2", "n3", "n4"]
        assert {n.gpu_type for n in backend.nodes()} == {"A100"}
        loop._reset()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "demo:normal", "--dry-run"], "--dry-run"),
        (["--cluster", "slurm", "--speed", "10"], "--speed"),
        (["--cluster", "slurm", "--interval", "0s"], "--interval"),
        (["--cluster", "slurm", "--interval", "soon"], "--interval"),
    ],
)
def test_serve_options_for_slurm(tmp_path: Path, args: list[str], message: str) -> None:
    out = CliRunner().invoke(main, ["serve", "--db", f"sqlite:///{tmp_path}/x.db", *args])
    assert out.exit_code == 2, out.output
    assert message in out.output
