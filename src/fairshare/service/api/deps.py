"""Dependencies of the routes: the store, the caller (bearer token), clean text and instants."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, Field

from ..errors import Unauthorized
from ..roles import Principal
from ..store import Store
from ..timefmt import from_iso
from ..tokens import authenticate

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
Id = Annotated[int, Field(ge=1, le=2**53)]


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


def principal(
    store: StoreDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if creds is None:
        raise Unauthorized("send a bearer token: Authorization: Bearer fs_... (fairshare token create)")
    with store.read() as tx:
        return authenticate(tx, creds.credentials).principal()


Caller = Annotated[Principal, Depends(principal)]
