"""`fairshare slurm dev-cluster up|down|status`: a local Slurm to try fairshare on.

`up` installs the Debian packages it needs, writes the configuration (devconf.py), starts a
private munged, MariaDB, slurmdbd, slurmctld and one slurmd per node, all on 127.0.0.1, each in the
foreground of its own session with its pid recorded under `<base>/run/pids`; creates the policy's
accounts (plus one QOS per job class) and returns when every node is idle. `down` stops only the
processes recorded there (and the job steps their slurmd started), by pid. Needs root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..inputs.policy import Policy
from . import procs
from .accounts import account_plan, sacctmgr_commands
from .devconf import DevClusterSpec, cgroup_conf, db_grants, gres_conf, slurm_conf, slurmdbd_conf

INSTALL_LOCK = "/tmp/fairshare-slurm-install.lock"
PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client", "slurmdbd", "mariadb-server")


def apt_install(
    packages: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    recommends: bool = True,
) -> str | None:
    """apt-get install `packages`; None when done, else why not (the command and its output's
    tail). One installer at a time on this host (INSTALL_LOCK: parallel test workers and the dev
    cluster never run dpkg together); a failed install retries once after `apt-get update` (a
    fresh machine may have no package lists). The output goes to `log` when given."""
    import fcntl

    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"apt-get install {' '.join(packages)}: needs root and apt-get"
    run_env = {**(os.environ if env is None else env), "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", *([] if recommends else ["--no-install-recommends"]), *packages]
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for attempt in (1, 2):
            done = subprocess.run(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=run_env,
                check=False,
                timeout=900,
            )
            if log is not None:
                log.write_text(done.stdout)
            if done.returncode == 0:
                return None
            if attempt == 1:
                subprocess.run(
                    ["apt-get", "update", "-q"], capture_output=True, env=run_env, check=False, timeout=600
                )
    return f"apt-get install {' '.join(packages)} failed: {done.stdout.strip()[-800:]}"


# start order; `down` stops in reverse
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld")
EXES = {"munged": "munged", "mariadbd": "mariadbd", "slurmdbd": "slurmdbd", "slurmctld": "slurmctld"}


class DevClusterError(Exception):
    pass


@dataclass(frozen=True)
class UpResult:
    already: bool
    seconds: float
    installed: tuple[str, ...]  # packages installed by this call
    install_seconds: float


def _stderr(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)


class DevCluster:
    def __init__(
        self,
        spec: DevClusterSpec,
        log: Callable[[str], None] = _stderr,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.log = log
        self.clock = clock
        env = dict(os.environ)
        env["SLURM_CONF"] = str(spec.slurm_conf)
        env["TZ"] = "UTC"
        self.env = env

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, bool]:
        """Recorded daemon -> whether it is still the process we started."""
        return {r.name: procs.is_ours(r) for r in procs.read_records(self.spec.pids)}

    def is_up(self) -> bool:
        st = self.status()
        expected = {*DAEMONS, *(f"slurmd-{n}" for n in self.spec.node_names)}
        return set(st) >= expected and all(st.values())

    # ------------------------------------------------------------------ helpers

    def _sh(
        self, args: Sequence[str], timeout: float = 60, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            p = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self.env,
                cwd="/",
                input=input,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise DevClusterError(f"`{' '.join(args)}` timed out after {timeout:g}s") from None
        except FileNotFoundError:
            raise DevClusterError(f"`{args[0]}` is not installed") from None
        if check and p.returncode != 0:
            raise DevClusterError(f"`{' '.join(args)}` failed ({p.returncode}): {p.stderr.strip()}")
        return p

    def _ok(self, args: Sequence[str], timeout: float = 15) -> bool:
        try:
            return self._sh(args, timeout=timeout, check=False).returncode == 0
        except DevClusterError:
            return False

    def _start(self, name: str, args: Sequence[str], exe: str, user: str | None = None) -> procs.Recorded:
        self.spec.log.mkdir(parents=True, exist_ok=True)
        with open(self.spec.log / f"{name}.stdout", "ab") as out:
            p = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd="/",
                start_new_session=True,
                user=user,
                group=user,
                extra_groups=[] if user else None,
            )
        rec = procs.record(self.spec.pids, name, p.pid, exe)
        self.log(f"  {name} started (pid {p.pid})")
        return rec

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float, rec: procs.Recorded | None) -> None:
        end = self.clock() + timeout
        while not ready():
            if rec is not None and not procs.alive(rec.pid):
                raise DevClusterError(f"{what} exited at start-up:\n{self._tail(rec.name)}")
            if self.clock() > end:
                tail = self._tail(rec.name if rec else None)
                raise DevClusterError(f"timed out after {timeout:g}s waiting for {what}\n{tail}")
            time.sleep(0.2)

    def _tail(self, name: str | None, lines: int = 15) -> str:
        if name is None:
            return ""
        texts = []
        for f in (self.spec.log / f"{name}.stdout", self.spec.log / f"{name}.log"):
            if f.exists():
                texts.extend(f.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(f"    {t}" for t in texts)

    # ------------------------------------------------------------------ up

    def install(self) -> tuple[str, ...]:
        """apt-get install the missing packages (one installer at a time on this host)."""
        missing = tuple(p for p in PACKAGES if not self._ok(["dpkg", "-s", p]))
        if not missing:
            return ()
        self.log(f"installing {' '.join(missing)} (apt-get)")
        logf = self.spec.base / "apt-install.log"
        failed = apt_install(missing, env=self.env, log=logf, recommends=False)
        if failed is not None:
            raise DevClusterError(f"{failed}; see {logf}")
        # slurm-wlm-emulator would repoint the daemons; keep the real ones
        for d in ("slurmctld", "slurmd"):
            self._sh(["update-alternatives", "--set", d, f"/usr/sbin/{d}-wlm"], check=False)
        return missing

    def _prepare(self, fresh: bool) -> None:
        s = self.spec
        if fresh:
            for d in (s.state, s.db_dir, s.log, s.run):
                shutil.rmtree(d, ignore_errors=True)
        for d in (s.etc, s.pids, s.log, s.state / "ctld", s.fakedev, s.run / "munge", s.run / "mysql"):
            d.mkdir(parents=True, exist_ok=True)
        for n in s.node_names:
            (s.state / "d" / n).mkdir(parents=True, exist_ok=True)
        for d in (s.base, s.run, s.log, s.etc, s.state):
            d.chmod(0o755)
        for d in (s.state, s.state / "ctld", s.log):
            shutil.chown(d, "slurm", "slurm")
        shutil.chown(s.run / "mysql", "mysql", "mysql")
        shutil.chown(s.run / "munge", "munge", "munge")
        for g in range(s.gpus):
            f = s.fakedev / f"gpu{g}"
            if not f.exists() and not f.is_symlink():
                try:
                    os.mknod(f, 0o666 | 0o020000, os.makedev(195, g))  # S_IFCHR, NVIDIA's major
                except OSError:
                    f.symlink_to("/dev/null")
        s.slurm_conf.write_text(slurm_conf(s))
        (s.etc / "gres.conf").write_text(gres_conf(s))
        (s.etc / "cgroup.conf").write_text(cgroup_conf())
        dbd = s.etc / "slurmdbd.conf"
        dbd.write_text(slurmdbd_conf(s))
        shutil.chown(dbd, "slurm", "slurm")
        dbd.chmod(0o600)
        key = s.munge_key
        if not key.exists():
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(os.urandom(1024))
        shutil.chown(key.parent, "munge", "munge")
        key.parent.chmod(0o700)
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
        (s.base / "env.sh").write_text(s.env_lines())

    def _start_munge(self) -> None:
        s = self.spec
        sock = str(s.munge_socket)
        rec = self._start(
            "munged",
            [
                "/usr/sbin/munged",
                "--foreground",
                f"--socket={sock}",
                f"--key-file={s.munge_key}",
                f"--pid-file={s.run / 'munge' / 'munged.pid'}",
                f"--log-file={s.log / 'munged.log'}",
                f"--seed-file={s.base / 'munge' / 'munged.seed'}",
            ],
            "munged",
            user="munge",
        )
        self._wait(
            "munged", lambda: self._ok(["sh", "-c", f"munge -n -S {sock} | unmunge -S {sock}"]), 15, rec
        )

    def _start_db(self) -> None:
        s = self.spec
        if not (s.db_dir / "mysql").is_dir():
            s.db_dir.mkdir(parents=True, exist_ok=True)
            shutil.chown(s.db_dir, "mysql", "mysql")
            self._sh(
                [
                    "mariadb-install-db",
                    "--user=mysql",
                    f"--datadir={s.db_dir}",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                timeout=120,
            )
        rec = self._start(
            "mariadbd",
            [
                "/usr/sbin/mariadbd",
                "--no-defaults",
                "--user=mysql",
                f"--datadir={s.db_dir}",
                f"--socket={s.db_socket}",
                f"--pid-file={s.run / 'mysql' / 'mariadbd.pid'}",
                "--bind-address=127.0.0.1",
                f"--port={s.db_port}",
                f"--log-error={s.log / 'mariadbd.err'}",
                "--innodb-buffer-pool-size=128M",
                "--innodb-log-file-size=48M",
                "--innodb-lock-wait-timeout=900",
                "--skip-name-resolve",
            ],
            "mariadbd",
        )
        sql = ["mariadb", "--no-defaults", "-S", str(s.db_socket), "-uroot"]
        self._wait("mariadbd", lambda: self._ok([*sql, "-e", "select 1"]), 60, rec)
        self._sh(sql, input=db_grants())

    def _accounts(self, policy: Policy | None) -> None:
        s = self.spec
        if (
            not self._sh(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"])
            .stdout.split()
            .count(s.cluster_name)
        ):
            self._sh(["sacctmgr", "-i", "add", "cluster", s.cluster_name])
        if policy is None:
            return
        have_qos = set(self._sh(["sacctmgr", "-n", "-P", "show", "qos", "format=name"]).stdout.split())
        for cls in sorted(policy.classes):
            if cls.lower() not in have_qos:
                self._sh(["sacctmgr", "-i", "add", "qos", cls.lower()])
        assoc = self._sh(["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user"]).stdout.splitlines()
        have = {tuple(line.split("|")) for line in assoc}  # (account, user or "")
        plan = account_plan(policy)
        qos = [c.lower() for c in policy.classes]
        for a in plan:  # parents first
            if (a.name, "") not in have:
                self._sh(sacctmgr_commands([a])[0])
            if a.leaf_path is not None and (a.name, "root") not in have:
                self._sh(sacctmgr_commands([a], users=["root"], qos=qos)[1])
        self.log(f"  accounts: {', '.join(a.name for a in plan if a.leaf_path)} (root may submit to each)")

    def _start_dbd(self) -> None:
        rec = self._start("slurmdbd", ["/usr/sbin/slurmdbd", "-D"], "slurmdbd")
        self._wait("slurmdbd", lambda: self._ok(["sacctmgr", "-n", "show", "cluster"]), 60, rec)

    def stop_daemon(self, name: str) -> None:
        """Stop one recorded daemon (tests: a controller restart); its record stays for `down`."""
        rec = {r.name: r for r in procs.read_records(self.spec.pids)}.get(name)
        if rec is None or not procs.is_ours(rec):
            raise DevClusterError(f"{name} is not running (no live pid recorded in {self.spec.pids})")
        procs.stop_pids([rec.pid], 15, self.log)

    def start_controller(self) -> None:
        """Start slurmctld again on its saved state (after `stop_daemon("slurmctld")`)."""
        self._start_ctld()

    def _start_ctld(self) -> None:
        rec = self._start("slurmctld", ["/usr/sbin/slurmctld", "-D"], "slurmctld")
        self._wait("slurmctld", lambda: self._ok(["scontrol", "ping"]), 60, rec)

    def _start_nodes(self) -> None:
        recs = [
            self._start(f"slurmd-{n}", ["/usr/sbin/slurmd", "-D", "-N", n], "slurmd")
            for n in self.spec.node_names
        ]

        def idle() -> bool:
            p = self._sh(["sinfo", "-h", "-N", "-o", "%N %T"], check=False, timeout=15)
            states = dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2)
            return (
                p.returncode == 0
                and set(states) == set(self.spec.node_names)
                and set(states.values()) == {"idle"}
            )

        for r in recs:
            if not procs.alive(r.pid):
                raise DevClusterError(f"{r.name} exited at start-up:\n{self._tail(r.name)}")
        self._wait(f"{len(recs)} nodes idle", idle, 60, None)

    def _check_loopback(self) -> None:
        wide = []
        for r in procs.read_records(self.spec.pids):
            wide += [f"{r.name} on {a}" for a in procs.listening(r.pid) if not procs.is_loopback(a)]
        if wide:
            raise DevClusterError(
                "a daemon listens beyond 127.0.0.1 (" + ", ".join(wide) + "): the host name must resolve to "
                "127.0.0.1 for CommunicationParameters=NoInAddrAny; stopped everything"
            )

    def up(self, policy: Policy | None, fresh: bool = False) -> UpResult:
        t0 = self.clock()
        if os.geteuid() != 0:
            raise DevClusterError("dev-cluster up must run as root (it installs packages and starts daemons)")
        st = self.status()
        if st and all(st.values()) and self.is_up():
            return UpResult(True, self.clock() - t0, (), 0.0)
        if any(st.values()):
            running = ", ".join(n for n, ok in st.items() if ok)
            raise DevClusterError(
                f"partly up ({running} running): run `fairshare slurm dev-cluster down` first"
            )
        for f in self.spec.pids.glob("*.pid") if self.spec.pids.is_dir() else ():
            f.unlink()  # stale records of processes that are gone
        self.spec.base.mkdir(parents=True, exist_ok=True)
        ti = self.clock()
        installed = self.install()
        install_s = self.clock() - ti
        try:
            self._prepare(fresh)
            self._start_munge()
            self._start_db()
            self._start_dbd()
            self._accounts(policy)
            self._start_ctld()
            self._start_nodes()
            self._check_loopback()
        except BaseException:
            self.log("start-up failed: stopping what was started")
            self.down()
            raise
        return UpResult(False, self.clock() - t0, installed, install_s)

    # ------------------------------------------------------------------ down

    def down(self) -> list[str]:
        """Stop what `up` started (by recorded pid) and the job steps of our slurmd; names stopped."""
        records = {r.name: r for r in procs.read_records(self.spec.pids)}
        ours = {n: r for n, r in records.items() if procs.is_ours(r)}
        if "slurmctld" in ours:
            self._cancel_jobs()
        stopped = []
        order = sorted((n for n in ours if n.startswith("slurmd-")), reverse=True) + list(reversed(DAEMONS))
        for name in order:
            r = ours.get(name)
            if r is None:
                continue
            procs.stop_pids([r.pid], 30 if name == "mariadbd" else 15, self.log)
            stopped.append(name)
        left = []
        for p in procs.processes_with_env("slurmstepd", "SLURM_CONF", str(self.spec.slurm_conf)):
            left += [p, *procs.descendants(p)]
        if left:
            self.log(f"  stopping leftover job steps: {' '.join(map(str, left))}")
            procs.stop_pids(left, 5, self.log)
        for name in records:
            (self.spec.pids / f"{name}.pid").unlink(missing_ok=True)
        return stopped

    def _cancel_jobs(self) -> None:
        p = self._sh(["squeue", "-h", "-o", "%i"], check=False, timeout=20)
        ids = p.stdout.split()
        if p.returncode != 0 or not ids:
            return
        self._sh(["scancel", "--quiet", "--full", *ids], check=False, timeout=20)
        end = self.clock() + 10
        while (
            self.clock() < end
            and self._sh(["squeue", "-h", "-o", "%i"], check=False, timeout=20).stdout.strip()
        ):
            time.sleep(0.2)
