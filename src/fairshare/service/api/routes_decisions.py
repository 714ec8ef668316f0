"""/api/decisions: the audit records (decisions with their evidence), filtered and paged."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from ...errors import InputError
from ...inputs.limits import MAX_COUNTER, MAX_DECISIONS_PAGE
from ..storage import audit, bounds
from ..timefmt import iso
from .deps import Caller, Instant, StoreDep, Text, instant
from .models import DecisionOut, DecisionPage

router = APIRouter(prefix="/api/decisions", tags=["decisions"])


@router.get(
    "",
    response_model=DecisionPage,
    summary="Decisions, filtered",
    description=(
        "Filters combine: `job`, `kind` (start, preempt, hold, reserve, policy_version, "
        "exception_created, ...), `since` <= t < `until` (seconds since 1970 or ISO datetimes). "
        "Pages of `limit` records by seq; pass `next_after` back as `after` for the next page."
    ),
)
def list_(
    store: StoreDep,
    _: Caller,
    job: Annotated[Text | None, Query(max_length=1000)] = None,
    kind: Annotated[Text | None, Query(max_length=100)] = None,
    since: Annotated[Instant | None, Query()] = None,
    until: Annotated[Instant | None, Query()] = None,
    after: Annotated[int, Query(ge=0, le=MAX_COUNTER)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_DECISIONS_PAGE)] = 100,
    order: Annotated[Literal["asc", "desc"], Query()] = "asc",
) -> DecisionPage:
    lo = _instant("since", since)
    hi = _instant("until", until)
    with store.read() as tx:
        rows = audit.query(
            tx,
            job=job,
            decision=kind,
            since=lo,
            until=hi,
            after_seq=after,
            limit=limit + 1,
            newest_first=order == "desc",
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return DecisionPage(
        decisions=[
            DecisionOut(
                seq=r.seq,
                t=r.t,
                at=iso(r.t) or "",
                decision=r.decision,
                job=r.job,
                policy_version=r.policy_version,
                evidence=r.evidence,
                hash=r.hash,
            )
            for r in rows
        ],
        next_after=rows[-1].seq if more else None,
    )


def _instant(name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        t = instant(value)
    except ValueError as exc:
        raise InputError("query", name, str(exc)) from None
    return bounds.instant("query", name, t)
