"""The dev cluster's pieces that need no Slurm: its configuration and the pid bookkeeping."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main
from fairshare.slurm import procs
from fairshare.slurm.devconf import DevClusterSpec, gres_conf, slurm_conf, slurmdbd_conf


def test_slurm_conf_binds_to_the_host_name_and_names_the_settings_fairshare_needs(tmp_path: Path) -> None:
    spec = DevClusterSpec(base=tmp_path, ctld_port=16817, slurmd_port0=17101)
    conf = slurm_conf(spec)
    for line in (
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        "SlurmctldPort=16817",
        "PriorityType=priority/multifactor",
        "PreemptType=preempt/none",
        "JobRequeue=1",
        "AccountingStorageTRES=gres/gpu",
        f"AccountingStoragePass=socket={tmp_path}/run/munge/munge.socket",
        "NodeName=n[1-4] NodeAddr=127.0.0.1 Port=[17101-17104] CPUs=16 Boards=1 SocketsPerBoard=1 "
        "CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:a100:8 State=UNKNOWN",
    ):
        assert line in conf.splitlines(), line
    assert "0.0.0.0" not in conf
    assert gres_conf(spec) == f"NodeName=n[1-4] Name=gpu Type=a100 File={tmp_path}/fakedev/gpu[0-7]\n"
    dbd = slurmdbd_conf(spec).splitlines()
    assert "DbdAddr=127.0.0.1" in dbd and "CommunicationParameters=NoInAddrAny" in dbd
    assert "StorageHost=127.0.0.1" in dbd


def test_one_node_one_gpu_config() -> None:
    spec = DevClusterSpec(nodes=1, gpus=1)
    assert "NodeName=n1 NodeAddr=127.0.0.1 Port=17001 " in slurm_conf(spec)
    assert gres_conf(spec).endswith("File=/tmp/fairshare-slurm/fakedev/gpu0\n")


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"nodes": 0}, "nodes: must be >= 1"),
        ({"ctld_port": 17001}, "need distinct ports"),
        ({"db_port": 80}, "need distinct ports in 1024..65535"),
        ({"gpu_type": "A100"}, "gpu_type: use lower-case"),
    ],
)
def test_bad_specs_name_the_field(kw: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        DevClusterSpec(**kw)  # type: ignore[arg-type]


def test_pid_records_tell_our_process_from_a_reused_pid(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        exe = os.path.basename(os.readlink(f"/proc/{p.pid}/exe"))
        rec = procs.record(tmp_path, "sleeper", p.pid, exe)
        assert procs.read_records(tmp_path) == [rec]
        assert procs.is_ours(rec)
        assert not procs.is_ours(procs.Recorded("sleeper", p.pid, rec.start_ticks + 1, exe))  # pid reused
        assert not procs.is_ours(procs.Recorded("sleeper", p.pid, rec.start_ticks, "slurmctld"))  # other exe
        procs.stop_pids([p.pid], 5, print)
        assert not procs.alive(p.pid) and not procs.is_ours(rec)
    finally:
        p.kill()
        p.wait()


def test_stop_pids_kills_what_ignores_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    said: list[str] = []
    t0 = time.monotonic()
    procs.stop_pids([p.pid], 0.5, said.append)
    assert not procs.alive(p.pid)  # stop_pids reaped it (so Popen cannot see the status)
    assert time.monotonic() - t0 < 5 and "ignored SIGTERM for 0.5s: SIGKILL" in said[0]
    p.wait(5)


def test_processes_are_found_by_their_environment_and_descendants() -> None:
    env = {**os.environ, "FAIRSHARE_TEST_MARK": "x42"}
    code = (
        "import subprocess, time; subprocess.Popen(['sleep', '60']); "
        "print('ready', flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "ready\n"
        comm = Path(f"/proc/{parent.pid}/comm").read_text().strip()
        found = procs.processes_with_env(comm, "FAIRSHARE_TEST_MARK", "x42")
        kids = procs.descendants(parent.pid)
        # the child may still be a forked python (same env) before it becomes `sleep`
        assert parent.pid in found and set(found) <= {parent.pid, *kids}
        assert procs.processes_with_env(comm, "FAIRSHARE_TEST_MARK", "other") == []
        assert len(kids) == 1
        procs.stop_pids([parent.pid, *kids], 5, print)
        assert not any(procs.alive(k) for k in kids)
    finally:
        parent.kill()
        parent.wait()


def test_listen_addresses_of_a_process() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert f"127.0.0.1:{port}" in procs.listening(os.getpid())
    finally:
        s.close()
    assert procs.is_loopback("127.0.0.1:6817") and procs.is_loopback("[::1]:6817")
    assert not procs.is_loopback("0.0.0.0:6817") and not procs.is_loopback("[::]:6817")


def test_down_and_status_with_nothing_running(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["slurm", "dev-cluster", "down", "--dir", str(tmp_path)])
    assert r.exit_code == 0 and r.output == f"nothing to stop in {tmp_path}\n"
    r = CliRunner().invoke(main, ["slurm", "dev-cluster", "status", "--dir", str(tmp_path)])
    assert r.exit_code == 1 and r.output.startswith("not running")


def test_down_skips_a_recorded_pid_that_is_no_longer_ours(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # a stale record pointing at an unrelated live process (as after a reboot and pid reuse)
        (tmp_path / "run" / "pids").mkdir(parents=True)
        (tmp_path / "run" / "pids" / "slurmctld.pid").write_text(f"{p.pid} 1 slurmctld\n")
        r = CliRunner().invoke(main, ["slurm", "dev-cluster", "down", "--dir", str(tmp_path)])
        assert r.exit_code == 0 and "nothing to stop" in r.output
        assert p.poll() is None  # untouched
        assert not (tmp_path / "run" / "pids" / "slurmctld.pid").exists()
    finally:
        p.kill()
        p.wait()


def test_up_names_a_missing_policy(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["slurm", "dev-cluster", "up", "--dir", str(tmp_path), "--policy", str(tmp_path / "nope.yaml")]
    )
    assert r.exit_code == 2 and f"--policy {tmp_path}/nope.yaml: file not found" in r.output
    assert not (tmp_path / "run").exists()  # nothing started
