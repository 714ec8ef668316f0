"""Dependencies of the routes: the store, the caller (bearer token), clean text and instants."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, Field
from starlette.concurrency import run_in_threadpool

from ...inputs.limits import MAX_COUNTER
from ..service_errors import Forbidden, Unauthorized
from ..storage.roles import JOB_ROLE, Principal
from ..storage.store import Store
from ..storage.tokens import TokenRecord, authenticate
from ..timefmt import from_iso

_bearer = HTTPBearer(auto_error=False, description="A token from `fairshare token create`.")


def clean_text(value: str) -> str:
    """Text the databases can store: no NUL character, no lone surrogate (both would fail in SQL)."""
    if "\x00" in value:
        raise ValueError("must not contain the NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (a lone surrogate was found)") from None
    return value


Text = Annotated[str, AfterValidator(clean_text)]
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(clean_text)]
LongText = Annotated[str, Field(max_length=4000), AfterValidator(clean_text)]
Path = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(clean_text)]
Id = Annotated[int, Field(ge=1, le=MAX_COUNTER)]


def instant(value: str) -> float:
    """A query instant: seconds since 1970 or an ISO date/datetime."""
    try:
        number = float(value)
    except ValueError:
        try:
            return from_iso(value)
        except ValueError:
            raise ValueError(
                f"expected seconds since 1970 or a date/datetime such as 2026-12-01T06:00:00Z, got {value!r}"
            ) from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number of seconds, got {value!r}")
    return number


Instant = Annotated[str, Field(max_length=64), AfterValidator(clean_text)]


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]


class AuthCache:
    """Tokens checked recently, so reads under load do not query the database each time. A token
    revoked by another process (the CLI) is refused at most `ttl` seconds later; revoking through
    this API clears the cache at once. `ttl` 0 turns it off."""

    def __init__(self, ttl: float = 0.0, wall: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.wall = ttl, wall
        self.hits: dict[str, tuple[TokenRecord, float]] = {}

    def get(self, secret: str, now: float) -> Principal | None:
        hit = self.hits.get(secret)
        if hit is None or hit[1] < self.wall() or not hit[0].valid(now):
            return None
        return hit[0].principal()

    def put(self, secret: str, rec: TokenRecord) -> None:
        if self.ttl > 0:
            if len(self.hits) > 10_000:
                self.hits.clear()
            self.hits[secret] = (rec, self.wall() + self.ttl)

    def clear(self) -> None:
        self.hits.clear()


def _authenticate(request: Request, store: Store, creds: HTTPAuthorizationCredentials | None) -> Principal:
    if creds is None:
        raise Unauthorized("send a bearer token: Authorization: Bearer fs_... (fairshare token create)")
    cache: AuthCache | None = getattr(request.app.state, "auth_cache", None)
    if cache is not None:
        hit = cache.get(creds.credentials, store.clock())
        if hit is not None:
            return hit
    with store.read() as tx:
        rec = authenticate(tx, creds.credentials)
    if cache is not None:
        cache.put(creds.credentials, rec)
    return rec.principal()


def _not_a_job(p: Principal) -> Principal:
    if p.role == JOB_ROLE:
        raise Forbidden(f"a job's token may only report the progress of job {p.node}; it reads nothing")
    return p


def principal(
    request: Request,
    store: StoreDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return _not_a_job(_authenticate(request, store, creds))


async def reporter(
    request: Request,
    store: StoreDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Any valid token, a job's own too, or a munge credential (`Authorization: Munge ...`, on
    Slurm: the user it names); the progress routes check which job it may report."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "munge":
        from .munge import munge_principal

        socket: str | None = getattr(request.app.state, "munge_socket", None)
        return await run_in_threadpool(munge_principal, value.strip(), socket)
    return await run_in_threadpool(_authenticate, request, store, creds)


async def fast_principal(
    request: Request,
    store: StoreDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The same check for routes that answer from memory: a cached token costs no thread hop."""
    cache: AuthCache | None = getattr(request.app.state, "auth_cache", None)
    if creds is not None and cache is not None:
        hit = cache.get(creds.credentials, store.clock())
        if hit is not None:
            return _not_a_job(hit)
    return _not_a_job(await run_in_threadpool(_authenticate, request, store, creds))


Caller = Annotated[Principal, Depends(principal)]
FastCaller = Annotated[Principal, Depends(fast_principal)]
Reporter = Annotated[Principal, Depends(reporter)]
