"""`fairshare serve --cluster slurm [--dry-run] [--interval 15s]`: the loop on a real Slurm.

Before anything else it runs `fairshare slurm check` (`require_ready`): a wrong setting, a missing
permission or account stops it with exit 2 naming each item. The engine is built from Slurm's nodes
at start (GPU nodes in the policy's partitions); nodes sinfo adds or drops later reach it as
`NodesChanged` (engine/nodes.py). The clock is the wall clock (Unix seconds, as
Slurm's), and the loop looks at Slurm every `--interval` (default 15 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InputError
from .clusters.slurm_cluster import SlurmCluster
from .loop.cycle import SchedulerLoop
from .loop.options import LoopOptions
from .loop.requests import CrashPoints
from .options import ServeOptions, SlurmOptions
from .storage import portfolio
from .storage.store import Store

if TYPE_CHECKING:
    from ..inputs.policy import Policy
    from ..slurm.client import SlurmBackend

DEFAULT_INTERVAL = 15.0


def ready(client: SlurmBackend, policy: Policy) -> tuple[dict[str, str], dict[str, str]]:
    """`slurm check` must pass: (config, account -> parent account); InputError (exit 2) naming
    what is wrong otherwise."""
    from ..slurm.check import SlurmNotReady, require_ready
    from ..slurm.slurm_errors import SlurmError

    try:
        require_ready(client, policy)
        config = client.read_config()
        parents = {
            a.account: a.parent for a in client.read_associations() if a.user is None and a.parent is not None
        }
    except SlurmNotReady as exc:
        wrong = "; ".join(
            f"{f.item}: {f.value}" + (f" (want {f.want})" if f.want else "") for f in exc.report.wrong
        )
        raise InputError(
            "--cluster",
            "slurm",
            f"Slurm is not set up for fairshare: {wrong}. `fairshare slurm check` says how to fix each",
        ) from None
    except SlurmError as exc:
        raise InputError("--cluster", "slurm", f"cannot read Slurm: {exc}") from None
    return config, parents


def prepare_slurm(
    opt: ServeOptions,
    store: Store,
    notes: list[str],
    client: SlurmBackend | None = None,
    wall: Callable[[], float] = time.time,
) -> SchedulerLoop:
    """The loop on Slurm over an open store that holds the policy (serve --policy stored it)."""
    from ..slurm.client import CliBackend
    from ..slurm.mapping import memory_is_allocated
    from .storage.clock_state import get_state, put_state

    client = client if client is not None else CliBackend(timeout=opt.slurm_timeout)
    with store.read() as tx:
        cur = portfolio.current_policy(tx)
    if cur is None:
        raise InputError("--policy", "", "no policy is stored in this database: give --policy FILE")
    policy = cur.policy()
    config, parents = ready(client, policy)
    cluster = config.get("ClusterName", "?")
    with store.write() as tx:
        stored = get_state(tx, "slurm")
        if get_state(tx, "demo") is not None:
            raise InputError("--cluster", "slurm", "this database runs a demo cluster; use another database")
        if stored is None:
            put_state(tx, "slurm", {"cluster": cluster})
        elif stored.get("cluster") != cluster:
            raise InputError(
                "--cluster",
                "slurm",
                f"this database schedules the Slurm cluster {stored.get('cluster')!r}, not {cluster!r}",
            )
    interval = opt.interval if opt.interval is not None else DEFAULT_INTERVAL
    if not interval > 0:
        raise InputError("--interval", str(interval), "must be > 0")
    loop: SchedulerLoop | None = None

    def backend() -> SlurmCluster:
        assert loop is not None
        return SlurmCluster(
            client,
            policy,
            lambda: loop.engine if loop is not None else None,
            SlurmOptions(dry_run=opt.dry_run),
            parents=parents,
            count_memory=memory_is_allocated(config),
            clock=wall,
            policy_of=loop.policy,
        )

    options = LoopOptions(strategy=opt.strategy, speed=1.0, poll_s=interval, crash=CrashPoints(opt.crash))
    if opt.checkpoint_events is not None:
        options.checkpoint_events = opt.checkpoint_events
    loop = SchedulerLoop(store, backend, wall, options)
    mode = "dry run: nothing is changed in Slurm, the audit records what would be" if opt.dry_run else "live"
    notes.append(f"Slurm cluster {cluster} ({config.get('SLURM_VERSION', '?')}): slurm check ok; {mode}")
    return loop
