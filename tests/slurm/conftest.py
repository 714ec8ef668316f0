"""The real Slurm for the slow tests: one dev cluster per test session, started and stopped by pid.

It lives in its own folder and on its own ports (so a dev cluster a developer has up is not
touched), and only if a slow test needs it. If it cannot start, the tests fail with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairshare.inputs.policy import load_policy
from fairshare.slurm.devcluster import DevCluster, DevClusterError
from fairshare.slurm.devconf import DevClusterSpec

from .harness import FakeHarness, Harness, RealHarness

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "slurm-policy.yaml"
TIMINGS: dict[str, float] = {}


def _spec() -> DevClusterSpec:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    k = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    return DevClusterSpec(
        base=Path(os.environ.get("FAIRSHARE_SLURM_TEST_DIR", "/tmp/fairshare-slurm-test")) / worker,
        cluster_name="fstest",
        ctld_port=16817 + 10 * k,
        dbd_port=16819 + 10 * k,
        db_port=13306 + 10 * k,
        slurmd_port0=17101 + 10 * k,
        # clients give up on a stopped controller after about MessageTimeout (default 10 s)
        extra_conf=("MessageTimeout=4",),
    )


@pytest.fixture(scope="session")
def dev_cluster() -> Iterator[DevCluster]:
    if os.geteuid() != 0:
        pytest.fail("the real Slurm tests need root (they install packages and start Slurm's daemons)")
    lines: list[str] = []
    cluster = DevCluster(_spec(), log=lines.append)
    cluster.down()  # what an interrupted earlier session of ours may have left, by recorded pid
    t0 = time.monotonic()
    try:
        result = cluster.up(load_policy(EXAMPLE), fresh=True)
    except DevClusterError as exc:
        pytest.fail(f"could not start the real Slurm for the tests: {exc}\n" + "\n".join(lines))
    TIMINGS["install"] = result.install_seconds
    TIMINGS["up"] = time.monotonic() - t0
    try:
        yield cluster
    finally:
        t1 = time.monotonic()
        cluster.down()
        TIMINGS["down"] = time.monotonic() - t1


@pytest.fixture
def real(dev_cluster: DevCluster) -> Iterator[RealHarness]:
    env = {**os.environ, "SLURM_CONF": str(dev_cluster.spec.slurm_conf), "TZ": "UTC"}
    h = RealHarness(str(dev_cluster.spec.slurm_conf), env)
    h.cleanup()
    yield h
    h.cleanup()


@pytest.fixture(params=["fake", pytest.param("real", marks=[pytest.mark.slow, pytest.mark.slurm_cluster])])
def slurm(request: pytest.FixtureRequest) -> Harness:
    if request.param == "fake":
        return FakeHarness()
    h: Harness = request.getfixturevalue("real")
    return h


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items())
        terminalreporter.write_line(f"real Slurm (dev cluster for the tests): {parts}")
