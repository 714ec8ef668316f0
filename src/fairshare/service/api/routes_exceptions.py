"""/api/exceptions: temporary extra share for a group, with an expiry and an approver (audited)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query

from ...errors import InputError
from ..storage import bounds, portfolio
from ..storage.roles import require_exception
from ..timefmt import from_iso
from .deps import Caller, Id, Path, StoreDep
from .models import ExceptionCreate, ExceptionEnd, ExceptionOut

router = APIRouter(prefix="/api/exceptions", tags=["exceptions"])


@router.get("", response_model=list[ExceptionOut], summary="Exceptions, oldest first")
def list_(
    store: StoreDep,
    _: Caller,
    status: Annotated[Literal["active", "expired", "all"], Query()] = "all",
    group: Annotated[Path | None, Query()] = None,
) -> list[ExceptionOut]:
    with store.read() as tx:
        return [ExceptionOut.of(e, tx.now) for e in portfolio.list_exceptions(tx, status, group)]


@router.get("/{ex_id}", response_model=ExceptionOut, summary="One exception")
def get(store: StoreDep, _: Caller, ex_id: Id) -> ExceptionOut:
    with store.read() as tx:
        return ExceptionOut.of(portfolio.get_exception(tx, ex_id), tx.now)


@router.post(
    "",
    response_model=ExceptionOut,
    status_code=201,
    summary="Grant an exception (owner of a node above the group, or admin)",
    description=(
        "The caller is the approver. Refused beyond the policy's gates.exception_max_days, on a group "
        "not in the policy, or outside the caller's node (an owner grants on groups strictly under "
        "its node)."
    ),
)
def create(store: StoreDep, caller: Caller, body: ExceptionCreate) -> ExceptionOut:
    require_exception(caller, body.group)
    with store.write() as tx:
        expires_t = _expiry(body, tx.now)
        rec = portfolio.create_exception(
            tx, body.group, body.extra_share, expires_t, caller.name, body.reason, caller.describe()
        )
        return ExceptionOut.of(rec, tx.now)


@router.post(
    "/{ex_id}/expire",
    response_model=ExceptionOut,
    summary="End an exception now (owner of a node above its group, or admin)",
)
def expire(
    store: StoreDep, caller: Caller, ex_id: Id, body: Annotated[ExceptionEnd | None, Body()] = None
) -> ExceptionOut:
    with store.write() as tx:
        rec = portfolio.get_exception(tx, ex_id)
        require_exception(caller, rec.group)
        rec = portfolio.end_exception(tx, ex_id, caller.describe(), None if body is None else body.reason)
        return ExceptionOut.of(rec, tx.now)


def _expiry(body: ExceptionCreate, now: float) -> float:
    if body.expires_in is not None:
        return now + bounds.duration("exception", "expires_in", body.expires_in)
    try:
        return from_iso(body.expires)
    except ValueError as exc:
        raise InputError("exception", "expires", str(exc)) from None
