"""`fairshare serve`: the scheduler loop, the API and the dashboard in one process.

    serve --demo                                        a temp SQLite database, the `normal`
                                                        scenario at 600x, admin and viewer tokens
    serve --policy P --db URL --cluster demo:NAME [--speed X]
    serve --policy P --db URL --cluster slurm [--dry-run] [--interval 15s]
                                                        a real Slurm (serve_slurm.py)

It takes the database's writer lock and schedules, or (another process holds it) serves the same
views read-only from the journal and takes over when the lock frees. It listens on 127.0.0.1:8080
unless --host/--port say otherwise (--port 0: a free port, printed).
"""

from __future__ import annotations

import logging
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..inputs import limits
from ..inputs.policy import Policy
from .clusters.demo import DemoCluster, Scenario
from .loop.cycle import SchedulerLoop
from .loop.demo_start import SteppedClock, start_clock, warm_up
from .loop.live_service import LiveService
from .loop.options import LoopOptions
from .loop.requests import CRASH_ENV, CrashPoints
from .options import ServeOptions
from .storage import portfolio, tokens
from .storage.clock_state import scaled_clock
from .storage.store import Store

log = logging.getLogger("fairshare.service")


class ClockRef:
    """The store's clock, settable after the database is open (the demo clock's base is stored in it)."""

    def __init__(self, target: Callable[[], float] = time.time) -> None:
        self.target = target

    def __call__(self) -> float:
        return self.target()


@dataclass
class Prepared:
    store: Store
    live: LiveService
    clock: ClockRef
    notes: list[str]
    tokens: dict[str, str]
    where: str
    cluster: str
    temp: Path | None = None  # --demo's temp folder, removed at exit


def prepare(opt: ServeOptions, wall: Callable[[], float] = time.time) -> Prepared:
    """Open the database, put the policy in place, build the loop (not started)."""
    cluster = opt.cluster or ("demo:normal" if opt.demo else None)
    if cluster is None:
        raise InputError("--cluster", "", "give the cluster: demo:SCENARIO (e.g. demo:normal) or slurm")
    kind, _, name = cluster.partition(":")
    if kind == "slurm" and not name:
        return _prepare_slurm(opt, wall)
    if opt.dry_run:
        raise InputError("--dry-run", "", "only with --cluster slurm (a demo cluster changes nothing real)")
    if kind != "demo" or not name:
        raise InputError("--cluster", cluster, "expected demo:SCENARIO (e.g. demo:normal) or slurm")
    scenario = Scenario.load(name, opt.seed)
    speed = opt.speed if opt.speed is not None else 600.0
    if not 0 < speed <= limits.MAX_SPEED:  # NaN too
        raise InputError(
            "--speed", str(speed), f"must be > 0 and at most {limits.fmt_limit(limits.MAX_SPEED)} (the limit)"
        )
    db = opt.db
    folder: Path | None = None
    if db is None:
        if not opt.demo:
            raise InputError(
                "--db", "", "give the database: sqlite:///PATH or postgresql+psycopg://... (or --demo)"
            )
        folder = Path(tempfile.mkdtemp(prefix="fairshare-demo-"))
        db = f"sqlite:///{folder / 'fairshare.db'}"
    ref = ClockRef(wall)
    store = Store.open(db, ref)
    notes: list[str] = []
    made: dict[str, str] = {}
    try:
        with store.write() as tx:
            from .storage.clock_state import get_state, put_state

            ref.target = scaled_clock(tx, scenario.epoch, speed, wall)
            stored = get_state(tx, "demo")
            want = {"scenario": scenario.name, "seed": scenario.seed}
            if stored is None:
                put_state(tx, "demo", want)
            elif stored != want:
                raise InputError(
                    "--cluster",
                    cluster,
                    f"this database runs the demo cluster {stored['scenario']} (seed "
                    f"{stored['seed']}); use it, or another database",
                )
        with store.write() as tx:
            if opt.policy is not None:
                text = _read(opt.policy)
                v, warnings, changed = portfolio.put_policy(tx, text, "serve --policy", "serve --policy")
                notes += [f"warning: {opt.policy}: {w}" for w in warnings]
                notes.append(
                    f"policy {opt.policy}: {'stored as' if changed else 'already'} version {v.version}"
                )
            elif portfolio.current_policy(tx) is None:
                v, _, _ = portfolio.put_policy(
                    tx, scenario.policy_text, "serve --demo", f"scenario {scenario.name}"
                )
                notes.append(f"policy: the {scenario.name} scenario's, stored as version {v.version}")
            cur = portfolio.current_policy(tx)
            assert cur is not None
            _check_fits(cur.policy(), scenario)
            if opt.demo and not tokens.list_tokens(tx):
                for role in ("admin", "viewer"):
                    _, secret = tokens.create_token(tx, role, None, f"demo {role}", "serve --demo", None)
                    made[role] = secret
    except BaseException:
        store.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    clock = ref.target
    loop: SchedulerLoop | None = None

    def backend() -> DemoCluster:
        assert loop is not None
        return DemoCluster(store, scenario, loop.resolve_submission)

    options = LoopOptions(strategy=opt.strategy, speed=speed, crash=CrashPoints(opt.crash))
    if opt.checkpoint_events is not None:
        options.checkpoint_events = opt.checkpoint_events
    if opt.demo and folder is not None:  # a fresh --demo database: start where jobs wait
        stepped = SteppedClock(scenario.epoch)
        ref.target = stepped  # the store's clock too: what the warm-up writes is dated on it
        loop = SchedulerLoop(store, backend, ref, options)
        try:
            at = warm_up(loop, stepped, scenario.epoch)
            ref.target = start_clock(store, at, speed, wall)
            loop.publish(force=True)
        except BaseException:
            _close_early(loop, store, folder)
            raise
        notes.append(f"demo: starts {(at - scenario.epoch) / 3600:.1f} h into the {scenario.name} scenario")
    else:
        loop = SchedulerLoop(store, backend, clock, options)
    where = store.url
    return Prepared(store, LiveService(store, loop), ref, notes, made, where, cluster, folder)


def _close_early(loop: SchedulerLoop, store: Store, folder: Path) -> None:
    if loop.lock is not None:
        loop.lock.release()
    store.close()
    shutil.rmtree(folder, ignore_errors=True)


def _prepare_slurm(opt: ServeOptions, wall: Callable[[], float]) -> Prepared:
    from .serve_slurm import prepare_slurm

    if opt.demo:
        raise InputError("--demo", "", "runs the demo cluster; leave it out with --cluster slurm")
    if opt.speed is not None:
        raise InputError("--speed", str(opt.speed), "a real Slurm runs on the wall clock (no --speed)")
    if opt.db is None:
        raise InputError("--db", "", "give the database: sqlite:///PATH or postgresql+psycopg://...")
    store = Store.open(opt.db, wall)
    notes: list[str] = []
    try:
        with store.write() as tx:
            if opt.policy is not None:
                text = _read(opt.policy)
                v, warnings, changed = portfolio.put_policy(tx, text, "serve --policy", "serve --policy")
                notes += [f"warning: {opt.policy}: {w}" for w in warnings]
                notes.append(
                    f"policy {opt.policy}: {'stored as' if changed else 'already'} version {v.version}"
                )
        loop = prepare_slurm(opt, store, notes, wall=wall)
    except BaseException:
        store.close()
        raise
    return Prepared(store, LiveService(store, loop), ClockRef(wall), notes, {}, store.url, "slurm")


def _read(path: Path) -> str:
    from ..inputs._validation import read_yaml_text

    return read_yaml_text(path)  # the bounded reader: special files, size cap, UTF-8


def _check_fits(policy: Policy, scenario: Scenario) -> None:
    """The demo cluster's jobs must map onto the policy: their groups are leaves, their classes exist."""
    from ..core.tree import TreeIndex

    tree = TreeIndex.build(policy.tree)
    leaves = {tree.paths[i] for i in tree.leaves}
    groups = sorted({j.request.group for j in scenario.jobs} - leaves)
    classes = sorted({j.request.cls for j in scenario.jobs} - set(policy.classes))
    if groups or classes:
        what = []
        if groups:
            what.append(f"groups {', '.join(groups)} are not leaves of its tree")
        if classes:
            what.append(f"classes {', '.join(classes)} are not in it")
        raise InputError(
            "--policy",
            "",
            f"the demo cluster {scenario.name} submits jobs the policy cannot charge: "
            f"{'; '.join(what)} (omit --policy to use the scenario's own)",
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(
            "--port", str(port), f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    sock.listen(2048)
    return sock


def run(opt: ServeOptions, echo: Callable[[str], None] = print) -> None:
    """Serve until interrupted (SIGINT, SIGTERM)."""
    import os

    import uvicorn

    from .api.app import create_app

    opt.crash = opt.crash or os.environ.get(CRASH_ENV)
    prepared = prepare(opt)
    try:
        sock = bind(opt.host, opt.port)
    except BaseException:
        _close(prepared)
        raise
    host, port = sock.getsockname()[:2]
    base = f"http://{host if ':' not in host else f'[{host}]'}:{port}/"
    live = prepared.live
    app = create_app(
        prepared.store, live=live, auth_cache_s=opt.auth_cache_s, metrics_public=opt.metrics_public
    )
    for note in prepared.notes:
        echo(note)
    loop = live.loop
    echo(
        f"database {prepared.where}; cluster {prepared.cluster}; speed {loop.opt.speed:g}x; "
        f"strategy {loop.opt.strategy}"
    )
    echo(f"listening on {base}")
    if prepared.tokens:
        echo(f"admin token:  {prepared.tokens['admin']}")
        echo(f"viewer token: {prepared.tokens['viewer']}")
        echo(f"dashboard:    {base}#token={prepared.tokens['viewer']}")
    else:
        echo(f"dashboard:    {base} (tokens: fairshare token create --role viewer --db ...)")
    sys.stdout.flush()
    live.start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        live.stop()
        _close(prepared)


def _close(prepared: Prepared) -> None:
    lock = prepared.live.loop.lock
    if lock is not None:
        lock.release()
    prepared.store.close()
    if prepared.temp is not None:  # --demo: the temp database goes with the process
        shutil.rmtree(prepared.temp, ignore_errors=True)
