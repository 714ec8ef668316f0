"""Health, the caller's identity, the review list and (admin) audit verification."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ...inputs.limits import MAX_REVIEW_DAYS
from ..storage import audit, bounds, portfolio, tokens
from ..storage.recovery import recovery_from_audit
from ..storage.review import review
from ..storage.roles import require_admin
from .deps import Caller, StoreDep
from .models import VerifyOut, WhoAmI

router = APIRouter()


@router.get(
    "/healthz",
    tags=["meta"],
    summary="Health: the database answers, and the scheduler loop completed a cycle lately (no token)",
    description="503 when the loop of this process completed no cycle (a pass, or a reader's look at "
    "the journal) for 3 poll intervals: `loop_error` says its last error.",
)
def healthz(request: Request, store: StoreDep) -> JSONResponse:
    with store.read() as tx:
        seq, _ = audit.head(tx)
    body: dict[str, Any] = {
        "ok": True,
        "backend": store.backend,
        "schema": store.revision,
        "audit_records": seq,
    }
    live = request.app.state.live
    if live is not None:
        loop = live.loop
        stale = loop.health.stale_for(loop.opt.poll_s)
        body["loop"] = loop.role
        if stale is not None:
            body.update(
                ok=False, loop_stale_s=round(stale, 1), loop_error=loop.health.last_error or loop.error
            )
            return JSONResponse(body, status_code=503)
    return JSONResponse(body)


@router.get("/api/whoami", response_model=WhoAmI, tags=["meta"], summary="The caller's token")
def whoami(caller: Caller) -> WhoAmI:
    return WhoAmI(token=caller.token_id, name=caller.name, role=caller.role, node=caller.node)


@router.get("/api/review", tags=["policy"], summary="Nodes past review, exceptions expiring soon")
def review_(store: StoreDep, _: Caller, days: Annotated[float, Query()] = 7.0) -> dict[str, Any]:
    days = bounds.within("review", "days", days, 0.0, MAX_REVIEW_DAYS)
    with store.read() as tx:
        r = review(
            portfolio.current_policy(tx),
            portfolio.list_exceptions(tx, "active"),
            tokens.list_tokens(tx),
            tx.now,
            days,
            recovery_from_audit(tx),
        )
    return r.as_json()


@router.get(
    "/api/audit/verify", response_model=VerifyOut, tags=["decisions"], summary="Verify the chain (admin)"
)
def verify(store: StoreDep, caller: Caller) -> VerifyOut:
    require_admin(caller, "verifying the audit chain")
    with store.read(snapshot=True) as tx:
        v = audit.verify(tx)
    return VerifyOut(
        ok=v.ok,
        records=v.records,
        head_seq=v.head_seq,
        head_hash=v.head_hash,
        bad_seq=v.bad_seq,
        reason=v.reason,
    )
