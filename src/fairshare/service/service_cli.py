"""Service commands: `token`, `policy`, `audit`, `review`. Registered on `fairshare.cli.main`.

Only click is imported here: the storage and API modules (SQLAlchemy, Alembic, FastAPI) are imported
when a command runs, so `fairshare check` does not pay for them. The clock is the wall clock unless
the caller passes another as `obj={"clock": ...}` (tests do).
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from .._cli_runtime import BoundedFloat
from ..inputs import limits

if TYPE_CHECKING:
    from .storage.store import Store

DB_HELP = "Database: sqlite:///PATH (or a file path) or postgresql+psycopg://USER@HOST/DB; env FAIRSHARE_DB."


def _db_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", envvar="FAIRSHARE_DB", required=True, help=DB_HELP)(f)


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


@contextmanager
def _store(db: str, must_exist: bool = False) -> Iterator[Store]:
    """Open the store; bad input or a refused operation exits 2 with a message, never a traceback.
    `must_exist`: a command that only reads does not create a missing SQLite file."""
    from sqlalchemy.exc import SQLAlchemyError

    from ..errors import InputError
    from .service_errors import ServiceError
    from .storage.store import Store

    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    clock = obj.get("clock", time.time) if isinstance(obj, dict) else time.time
    try:
        with Store.open(db, clock, must_exist=must_exist) as store:
            yield store
    except InputError as exc:
        _fail(str(exc))
    except ServiceError as exc:
        _fail(exc.message)
    except SQLAlchemyError as exc:
        _fail(f"database {_masked(db)}: {getattr(exc, 'orig', None) or exc}")


def _masked(db: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:
        return db


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group("token")
def token() -> None:
    """Create, list and revoke API tokens (bearer tokens, stored hashed)."""


@token.command("create")
@_db_option
@click.option("--role", type=click.Choice(["viewer", "member", "owner", "admin"]), required=True)
@click.option("--node", help="The tree node (path) of a member or owner token, e.g. research/arch.")
@click.option("--name", help="Who holds it (shown in audit records); default: ROLE or ROLE:NODE.")
@click.option("--expires", "expires_in", metavar="DURATION", help="Valid for this long, e.g. 90d.")
def token_create(db: str, role: str, node: str | None, name: str | None, expires_in: str | None) -> None:
    """Create a token; prints it once on stdout (it is stored only as a hash)."""
    from ..errors import InputError
    from .storage import bounds, tokens
    from .timefmt import iso

    with _store(db) as store, store.write() as tx:
        expires_t = None
        if expires_in is not None:
            try:
                expires_t = tx.now + bounds.duration("token", "--expires", expires_in, 1.0)
            except InputError as exc:
                _fail(f"--expires: {exc.message}")
        label = name or (f"{role}:{node}" if node else role)
        rec, secret = tokens.create_token(tx, role, node, label, _actor(), expires_t)
    scope = f" of {rec.node}" if rec.node else ""
    until = f", valid until {iso(rec.expires_t)}" if rec.expires_t is not None else ""
    click.echo(
        f"token {rec.id} ({rec.name}): {rec.role}{scope}{until}. It is shown once, below; keep it secret.",
        err=True,
    )
    click.echo(secret)


@token.command("list")
@_db_option
def token_list(db: str) -> None:
    """List tokens (never their secrets)."""
    from .storage import tokens
    from .timefmt import iso

    with _store(db, must_exist=True) as store, store.read() as tx:
        rows = tokens.list_tokens(tx)
        now = tx.now
    for t in rows:
        state = "valid" if t.valid(now) else ("revoked" if t.revoked_t is not None else "expired")
        scope = f" of {t.node}" if t.node else ""
        until = f", until {iso(t.expires_t)}" if t.expires_t is not None else ""
        click.echo(
            f"{t.id:>5}  {t.role}{scope}  {t.name}  created {iso(t.created_t)} by {t.created_by}"
            f"{until}  [{state}]"
        )


@token.command("revoke")
@_db_option
@click.argument("token_id", type=click.IntRange(min=1))
def token_revoke(db: str, token_id: int) -> None:
    """Revoke a token by its id (from `token list`)."""
    from .storage import tokens

    with _store(db) as store, store.write() as tx:
        rec = tokens.revoke_token(tx, token_id, _actor())
    click.echo(f"token {rec.id} ({rec.name}) revoked")


@click.group("policy")
def policy() -> None:
    """Store a policy file as the live policy's next version, or show the stored versions."""


@policy.command("push")
@_db_option
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--note", help="Why it changed (kept in the audit record).")
def policy_push(db: str, path: Path, note: str | None) -> None:
    """Validate PATH and store it as a new version (audited); the same text again stores nothing."""
    from ..errors import InputError
    from ..inputs._validation import read_yaml_text
    from .storage import portfolio

    try:
        text = read_yaml_text(path)  # the bounded reader: special files, size cap, UTF-8
    except InputError as exc:
        _fail(str(exc))
    with _store(db) as store, store.write() as tx:
        v, warnings, changed = portfolio.put_policy(tx, text, _actor(), note)
    for w in warnings:
        click.echo(f"warning: {path}: {w}", err=True)
    word = "stored as" if changed else "unchanged: already"
    click.echo(f"{path}: {word} version {v.version} (sha256 {v.sha256})")


@policy.command("show")
@_db_option
@click.option("--version", "number", type=click.IntRange(min=1), help="A past version (default: current).")
@click.option("--history", is_flag=True, help="List every version instead.")
def policy_show(db: str, number: int | None, history: bool) -> None:
    """Print the current (or a past) policy text, or the list of versions."""
    from .storage import portfolio
    from .timefmt import iso

    with _store(db, must_exist=True) as store, store.read() as tx:
        if history:
            for v in portfolio.policy_history(tx):
                note = f"  {v.note}" if v.note else ""
                click.echo(f"{v.version:>4}  {iso(v.t)}  {v.sha256[:12]}  {v.author}{note}")
            return
        cur = portfolio.policy_version(tx, number) if number else portfolio.current_policy(tx)
    if cur is None:
        _fail("no policy is stored yet (fairshare policy push --db URL FILE)")
    click.echo(cur.text, nl=not cur.text.endswith("\n"))


@click.group("audit")
def audit_group() -> None:
    """Verify the audit chain, or export it as decisions.jsonl."""


@audit_group.command("verify")
@_db_option
def audit_verify(db: str) -> None:
    """Recompute the hash chain; exit 1 naming the first record that does not match."""
    from .storage import audit

    with _store(db, must_exist=True) as store, store.read(snapshot=True) as tx:
        v = audit.verify(tx)
    if v.ok:
        click.echo(f"audit chain ok: {v.records} records, head {v.head_seq} {v.head_hash}")
        return
    click.echo(f"audit chain broken at record {v.bad_seq}: {v.reason}")
    if v.bad_record is not None:
        click.echo(f"record {v.bad_seq} as stored: {v.bad_record}")
    click.echo(f"records 1..{v.records} verify; the head says {v.head_seq} records")
    sys.exit(1)


@audit_group.command("export")
@_db_option
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option("--no-verify", is_flag=True, help="Export without verifying the chain first.")
def audit_export(db: str, out: Path, no_verify: bool) -> None:
    """Write OUT/decisions.jsonl (the replay's format; `fairshare explain --out OUT` reads it),
    OUT/events.jsonl (the engine journal), OUT/policy.yaml and OUT/audit.json."""
    from .storage import audit
    from .storage.export import export

    with _store(db, must_exist=True) as store, store.read(snapshot=True) as tx:
        verdict = None
        if not no_verify:
            verdict = audit.verify(tx)
            if not verdict.ok:
                click.echo(
                    f"audit chain broken at record {verdict.bad_seq}: {verdict.reason}; nothing exported "
                    "(--no-verify exports anyway)",
                    err=True,
                )
                sys.exit(1)
        from ..errors import InputError
        from ..replay.staging import StagedOutput

        try:  # OUT replaced whole, and only if new, empty or an earlier export (never a user's files)
            with StagedOutput(out, "audit export", root_marker=False) as stage:
                done = export(tx, stage, verdict)
        except InputError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail(f"--out: {out}: cannot write: {exc.strerror or exc}")
    state = "verified" if verdict is not None else "not verified"
    click.echo(f"wrote {out}: {done.decisions} decisions ({state}), {done.events} events")


@click.command("review")
@_db_option
@click.option(
    "--days",
    type=BoundedFloat(0.0, limits.MAX_REVIEW_DAYS),
    default=7,
    show_default=True,
    help="Expiry horizon (0 .. 3,650 days).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def review_cmd(db: str, days: float, as_json: bool) -> None:
    """Nodes past their review date; exceptions expiring within --days; tokens on removed nodes."""
    from .storage import portfolio, tokens
    from .storage.recovery import recovery_from_audit
    from .storage.review import review, review_text

    with _store(db, must_exist=True) as store, store.read() as tx:
        r = review(
            portfolio.current_policy(tx),
            portfolio.list_exceptions(tx, "active"),
            tokens.list_tokens(tx),
            tx.now,
            days,
            recovery_from_audit(tx),
        )
    click.echo(json.dumps(r.as_json(), indent=2) if as_json else review_text(r))


@click.command("serve")
@click.option(
    "--demo", is_flag=True, help="A temp SQLite database, the normal scenario at 600x, tokens printed."
)
@click.option("--db", envvar="FAIRSHARE_DB", help=DB_HELP + " (--demo: a temp SQLite file)")
@click.option(
    "--policy", "policy_path", type=click.Path(path_type=Path), help="Store this policy file first."
)
@click.option("--cluster", help="demo:SCENARIO (e.g. demo:normal; --demo: demo:normal) or slurm.")
@click.option("--speed", type=float, help="Simulated seconds per real second (demo cluster; default 600).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: a free port."
)
@click.option("--strategy", default="fairshare", show_default=True, help="The ordering strategy.")
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=1,
    show_default=True,
    help="The demo scenario's seed.",
)
@click.option("--metrics-public", is_flag=True, help="Serve /metrics without a token.")
@click.option(
    "--dry-run", is_flag=True, help="(slurm) Audit the priorities and requeues it would set; change nothing."
)
@click.option("--interval", metavar="DURATION", help="(slurm) How often to look at Slurm (default 15s).")
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=0),
    metavar="EVENTS",
    help="Checkpoint the engine every EVENTS journal events (default 50000; 0: only hourly).",
)
def serve(
    demo: bool,
    db: str | None,
    policy_path: Path | None,
    cluster: str | None,
    speed: float | None,
    host: str,
    port: int,
    strategy: str,
    seed: int,
    metrics_public: bool,
    dry_run: bool,
    interval: str | None,
    checkpoint_every: int | None,
) -> None:
    """Run the scheduler loop, the API and the dashboard (http://HOST:PORT/)."""
    import logging

    from sqlalchemy.exc import SQLAlchemyError

    from ..core.strategies import STRATEGIES
    from ..errors import InputError
    from .options import ServeOptions
    from .server import run
    from .service_errors import ServiceError

    if strategy not in STRATEGIES:
        _fail(f"--strategy: unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    every = None
    if interval is not None:
        from ..errors import InputError
        from .storage import bounds

        try:
            every = bounds.duration("serve", "--interval", interval, 1.0, 86400.0)
        except InputError as exc:
            _fail(f"--interval: {exc.message}")
    opt = ServeOptions(db, policy_path, cluster, speed, host, port, demo, strategy, seed, metrics_public)
    opt.dry_run, opt.interval = dry_run, every
    opt.checkpoint_events = checkpoint_every
    try:
        run(opt, echo=click.echo)
    except InputError as exc:
        _fail(str(exc))
    except ServiceError as exc:
        _fail(exc.message)
    except SQLAlchemyError as exc:
        _fail(f"database: {getattr(exc, 'orig', None) or exc}")


COMMANDS = (token, policy, audit_group, review_cmd, serve)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
