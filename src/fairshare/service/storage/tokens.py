"""Bearer tokens: a random secret shown once, stored only as its sha256, with a role and a node.

The secret is 32 random bytes (`fs_` + URL-safe base64), so a plain sha256 is enough to store it
(nothing to brute-force); lookups are by that hash. Creating and revoking tokens is audited (the
record names the token's id, never its secret).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from ...core.tree import TreeIndex
from ...errors import InputError
from ..service_errors import Conflict, NotFound, Unauthorized
from ..timefmt import iso
from . import audit, schema
from .audit import AuditRecord
from .db import Tx, new_id
from .portfolio import current_policy
from .roles import JOB_ROLE, Principal, check_role

PREFIX = "fs_"
MAX_SECRET = 200


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def secret_sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenRecord:
    id: int
    name: str
    role: str
    node: str | None
    created_t: float
    created_by: str
    expires_t: float | None
    revoked_t: float | None
    revoked_by: str | None

    def valid(self, now: float) -> bool:
        return self.revoked_t is None and (self.expires_t is None or now < self.expires_t)

    def principal(self) -> Principal:
        return Principal(self.id, self.name, self.role, self.node)


def _token(row: Any) -> TokenRecord:
    return TokenRecord(
        int(row.id),
        row.name,
        row.role,
        row.node,
        row.created_t,
        row.created_by,
        row.expires_t,
        row.revoked_t,
        row.revoked_by,
    )


def create_token(
    tx: Tx,
    role: str,
    node: str | None,
    name: str,
    by: str,
    expires_t: float | None = None,
    make_secret: Callable[[], str] = new_secret,
) -> tuple[TokenRecord, str]:
    """A new token (audited); returns it and its secret, which is not stored and cannot be shown again."""
    name = name.strip()
    if not name or len(name) > 200:
        raise InputError("token", "name", "give a name of 1 to 200 characters (who holds the token)")
    if expires_t is not None and expires_t <= tx.now:
        raise InputError("token", "expires", f"must be after now ({iso(tx.now)}), got {iso(expires_t)}")
    audit.head(tx, lock=True)
    cur = current_policy(tx)
    check_role(role, node, None if cur is None else TreeIndex.build(cur.policy().tree).paths)
    secret = make_secret()
    res = tx.conn.execute(
        schema.tokens.insert().values(
            name=name,
            role=role,
            node=node or None,
            secret_sha256=secret_sha256(secret),
            created_t=tx.now,
            created_by=by,
            expires_t=expires_t,
        )
    )
    rec = get_token(tx, int(new_id(res)))
    evidence = {
        "token": rec.id,
        "name": name,
        "role": role,
        "node": rec.node,
        "expires": iso(expires_t),
        "by": by,
    }
    audit.append(tx, [AuditRecord(tx.now, "token_created", None, evidence)])
    return rec, secret


def create_job_token(tx: Tx, job_id: str, by: str) -> str:
    """A token scoped to one job (role `job`, node = the job id), made at its submission: it may
    report that job's progress and nothing else. Audited; returns the secret (shown once)."""
    secret = new_secret()
    res = tx.conn.execute(
        schema.tokens.insert().values(
            name=f"job {job_id}",
            role=JOB_ROLE,
            node=job_id,
            secret_sha256=secret_sha256(secret),
            created_t=tx.now,
            created_by=by,
            expires_t=None,
        )
    )
    evidence = {
        "token": int(new_id(res)),
        "name": f"job {job_id}",
        "role": JOB_ROLE,
        "node": job_id,
        "by": by,
    }
    audit.append(tx, [AuditRecord(tx.now, "token_created", job_id, evidence)])
    return secret


def get_token(tx: Tx, token_id: int) -> TokenRecord:
    t = schema.tokens
    row = tx.conn.execute(select(t).where(t.c.id == token_id)).one_or_none()
    if row is None:
        raise NotFound(f"no token {token_id}")
    return _token(row)


def list_tokens(tx: Tx) -> list[TokenRecord]:
    t = schema.tokens
    return [_token(r) for r in tx.conn.execute(select(t).order_by(t.c.id))]


def revoke_token(tx: Tx, token_id: int, by: str) -> TokenRecord:
    audit.head(tx, lock=True)
    rec = get_token(tx, token_id)
    if rec.revoked_t is not None:
        raise Conflict(f"token {token_id} was already revoked at {iso(rec.revoked_t)} by {rec.revoked_by}")
    t = schema.tokens
    tx.conn.execute(t.update().where(t.c.id == token_id).values(revoked_t=tx.now, revoked_by=by))
    evidence = {"token": token_id, "name": rec.name, "role": rec.role, "node": rec.node, "by": by}
    audit.append(tx, [AuditRecord(tx.now, "token_revoked", None, evidence)])
    return get_token(tx, token_id)


def authenticate(tx: Tx, secret: str) -> TokenRecord:
    """The valid token with this secret; Unauthorized (without saying which check failed) otherwise."""
    refused = Unauthorized("invalid, revoked or expired token")
    if not secret.startswith(PREFIX) or len(secret) > MAX_SECRET:
        raise refused
    t = schema.tokens
    row = tx.conn.execute(select(t).where(t.c.secret_sha256 == secret_sha256(secret))).one_or_none()
    if row is None:
        raise refused
    rec = _token(row)
    if not rec.valid(tx.now):
        raise refused
    return rec
