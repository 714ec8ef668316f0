"""The dev cluster's shape and configuration files (pure: a spec in, file texts out).

A 4-node, 32-GPU Slurm 22.05 on one host: one slurmd per node on its own port, fake GPU device
files as gres, slurmdbd on a private MariaDB, a private munged; everything on 127.0.0.1.
Its settings are the ones fairshare needs (`fairshare slurm check` passes on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BASE = Path("/tmp/fairshare-slurm")
ENV_BASE = "FAIRSHARE_SLURM_DIR"


@dataclass(frozen=True)
class DevClusterSpec:
    """Everything `dev-cluster up` needs to know; `base` holds all its state."""

    base: Path = DEFAULT_BASE
    nodes: int = 4
    gpus: int = 8
    gpu_type: str = "a100"
    cpus: int = 16
    memory_mb: int = 64000
    cluster_name: str = "fairshare"
    partition: str = "gpu"
    ctld_port: int = 6817
    dbd_port: int = 6819
    db_port: int = 3306
    slurmd_port0: int = 17001
    extra_conf: tuple[str, ...] = field(default=())  # more slurm.conf lines (tests)

    def __post_init__(self) -> None:
        for name in ("nodes", "gpus", "cpus", "memory_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        ports = [self.ctld_port, self.dbd_port, self.db_port, *self.slurmd_ports]
        if len(set(ports)) != len(ports) or not all(1024 <= p <= 65535 for p in ports):
            raise ValueError(f"ports: need distinct ports in 1024..65535, got {ports}")
        if not self.gpu_type.replace("_", "").isalnum() or self.gpu_type != self.gpu_type.lower():
            raise ValueError(
                f"gpu_type: use lower-case letters and digits (a Slurm gres type), got {self.gpu_type!r}"
            )

    # ------------------------------------------------------------------- paths
    @property
    def etc(self) -> Path:
        return self.base / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def run(self) -> Path:
        return self.base / "run"

    @property
    def pids(self) -> Path:
        return self.run / "pids"

    @property
    def log(self) -> Path:
        return self.base / "log"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge" / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.base / "munge" / "munge.key"

    @property
    def db_dir(self) -> Path:
        return self.base / "mysql"

    @property
    def db_socket(self) -> Path:
        return self.run / "mysql" / "mysqld.sock"

    @property
    def fakedev(self) -> Path:
        return self.base / "fakedev"

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"n{i}" for i in range(1, self.nodes + 1))

    @property
    def slurmd_ports(self) -> tuple[int, ...]:
        return tuple(self.slurmd_port0 + i for i in range(self.nodes))

    def env_lines(self) -> str:
        return f"export SLURM_CONF={self.slurm_conf}\n"


# Settings fairshare relies on are marked; `fairshare slurm check` reads them back.
def slurm_conf(spec: DevClusterSpec) -> str:
    s = spec
    last = s.nodes
    ports = f"{s.slurmd_port0}" if last == 1 else f"[{s.slurmd_port0}-{s.slurmd_port0 + last - 1}]"
    nodes = "n1" if last == 1 else f"n[1-{last}]"
    lines = [
        "# written by `fairshare slurm dev-cluster up`; loopback only",
        f"ClusterName={s.cluster_name}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={s.ctld_port}",
        # bind every daemon to the address of the host name (127.0.0.1 here), never to 0.0.0.0
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        "SlurmUser=slurm",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # requeued jobs are eligible again after ~10-20 s instead of 120 s
        f"AuthInfo=cred_expire=10,socket={s.munge_socket}",
        f"StateSaveLocation={s.state}/ctld",
        f"SlurmdSpoolDir={s.state}/d/%n",
        f"SlurmctldPidFile={s.run}/slurmctld.pid",
        f"SlurmdPidFile={s.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={s.log}/slurmctld.log",
        f"SlurmdLogFile={s.log}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=30",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "SchedulerType=sched/backfill",  # fairshare: backfill follows the priorities it sets
        "SchedulerParameters=bf_interval=5,sched_interval=5",
        "SelectType=select/cons_tres",  # fairshare: GPUs allocated per job and node
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",  # fairshare: GPU type and count from gres
        "PriorityType=priority/multifactor",  # fairshare: computed priorities stay below its band
        "PriorityDecayHalfLife=7-0",
        "PriorityCalcPeriod=1",
        "PriorityMaxAge=7-0",
        "PriorityWeightFairshare=10000",
        "PriorityWeightAge=1000",
        "PriorityWeightQOS=0",
        "PriorityWeightJobSize=0",
        "PreemptType=preempt/none",  # fairshare: only fairshare preempts (requeue past protection)
        "PreemptMode=OFF",
        "JobRequeue=1",  # fairshare: batch jobs may be requeued
        "AccountingStorageType=accounting_storage/slurmdbd",  # fairshare: accounts, QOS, sacct usage
        "AccountingStorageHost=localhost",
        f"AccountingStoragePort={s.dbd_port}",
        # the munge socket for messages to slurmdbd (AuthInfo covers the others)
        f"AccountingStoragePass=socket={s.munge_socket}",
        "AccountingStorageEnforce=associations,limits,qos",  # fairshare: no job outside an account
        "AccountingStorageTRES=gres/gpu",  # fairshare: GPU allocations in sacct
        "JobCompType=jobcomp/none",
        "MinJobAge=300",
        "KillWait=5",
        "InactiveLimit=0",
        f"NodeName={nodes} NodeAddr=127.0.0.1 Port={ports} CPUs={s.cpus} Boards=1 SocketsPerBoard=1 "
        f"CoresPerSocket={s.cpus} ThreadsPerCore=1 RealMemory={s.memory_mb} "
        f"Gres=gpu:{s.gpu_type}:{s.gpus} State=UNKNOWN",
        f"PartitionName={s.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        *s.extra_conf,
    ]
    return "\n".join(lines) + "\n"


def gres_conf(spec: DevClusterSpec) -> str:
    nodes = "n1" if spec.nodes == 1 else f"n[1-{spec.nodes}]"
    files = f"{spec.fakedev}/gpu0" if spec.gpus == 1 else f"{spec.fakedev}/gpu[0-{spec.gpus - 1}]"
    # gres/gpu drops GPUs without a File= ("Removing file-less GPU"): fake device files stand in
    return f"NodeName={nodes} Name=gpu Type={spec.gpu_type} File={files}\n"


def cgroup_conf() -> str:
    keys = ("CgroupPlugin=autodetect", "CgroupAutomount=no", "ConstrainCores=no", "ConstrainDevices=no")
    return "\n".join((*keys, "ConstrainRAMSpace=no")) + "\n"


DB_USER = "slurm"
DB_PASSWORD = "fairshare-dev"  # a private MariaDB on 127.0.0.1 for this dev cluster only


def slurmdbd_conf(spec: DevClusterSpec) -> str:
    s = spec
    return (
        "\n".join(
            [
                "# written by `fairshare slurm dev-cluster up`",
                "AuthType=auth/munge",
                f"AuthInfo=socket={s.munge_socket}",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                "CommunicationParameters=NoInAddrAny",  # bind to the host name's address, not 0.0.0.0
                f"DbdPort={s.dbd_port}",
                "SlurmUser=slurm",
                f"LogFile={s.log}/slurmdbd.log",
                f"PidFile={s.run}/slurmdbd.pid",
                "DebugLevel=info",
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                f"StoragePort={s.db_port}",
                f"StorageUser={DB_USER}",
                f"StoragePass={DB_PASSWORD}",
                "StorageLoc=slurm_acct_db",
            ]
        )
        + "\n"
    )


def db_grants() -> str:
    return (
        "\n".join(
            f"CREATE USER IF NOT EXISTS '{DB_USER}'@'{h}' IDENTIFIED BY '{DB_PASSWORD}'; "
            f"GRANT ALL ON slurm_acct_db.* TO '{DB_USER}'@'{h}';"
            for h in ("localhost", "127.0.0.1")
        )
        + "\nFLUSH PRIVILEGES;\n"
    )
