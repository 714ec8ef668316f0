"""Request and response bodies. Requests forbid unknown fields and take no type coercion (strict)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..storage.portfolio import ExceptionRecord, PolicyVersion
from ..storage.tokens import TokenRecord
from ..timefmt import iso
from .deps import LongText, Name, Path, Text

MAX_POLICY_CHARS = 1_000_000


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PolicyPut(Request):
    text: Text = Field(min_length=1, max_length=MAX_POLICY_CHARS, description="The policy file (YAML).")
    note: LongText | None = Field(default=None, description="Why it changed (kept in the audit record).")


class ExceptionCreate(Request):
    group: Path = Field(description="The group's path, e.g. research/arch.")
    extra_share: float = Field(gt=0, description="Share added to the group's until it expires.")
    expires: Text | None = Field(
        default=None, max_length=64, description="When it stops applying: a date or datetime (UTC)."
    )
    expires_in: Text | None = Field(
        default=None, max_length=64, description="Or: a duration from now, e.g. 7d or 36h."
    )
    reason: LongText = Field(min_length=1, description="Why (kept with the exception and audited).")

    @field_validator("extra_share")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @model_validator(mode="after")
    def _one_expiry(self) -> ExceptionCreate:
        if (self.expires is None) == (self.expires_in is None):
            raise ValueError("give exactly one of expires (a date or datetime) and expires_in (a duration)")
        return self


class ExceptionEnd(Request):
    reason: LongText | None = None


class TokenCreate(Request):
    name: Name = Field(description="Who holds the token (shown in audit records).")
    role: Literal["viewer", "member", "owner", "admin"]
    node: Path | None = Field(default=None, description="The tree node of a member or owner token.")
    expires_in: Text | None = Field(default=None, max_length=64, description="e.g. 90d; none: never.")


class PolicyOut(BaseModel):
    version: int
    sha256: str
    author: str
    created_at: str
    note: str | None
    text: str | None = None

    @staticmethod
    def of(v: PolicyVersion, with_text: bool) -> PolicyOut:
        return PolicyOut(
            version=v.version,
            sha256=v.sha256,
            author=v.author,
            created_at=iso(v.t) or "",
            note=v.note,
            text=v.text if with_text else None,
        )


class PolicyPutOut(BaseModel):
    policy: PolicyOut
    changed: bool
    warnings: list[str]


class ExceptionOut(BaseModel):
    id: int
    group: str
    extra_share: float
    expires_at: str
    approver: str
    reason: str
    created_at: str
    created_by: str
    ended_at: str | None
    ended_by: str | None
    active: bool

    @staticmethod
    def of(e: ExceptionRecord, now: float) -> ExceptionOut:
        return ExceptionOut(
            id=e.id,
            group=e.group,
            extra_share=e.extra_share,
            expires_at=iso(e.expires_t) or "",
            approver=e.approver,
            reason=e.reason,
            created_at=iso(e.created_t) or "",
            created_by=e.created_by,
            ended_at=iso(e.expired_t),
            ended_by=e.expired_by,
            active=e.active(now),
        )


class TokenOut(BaseModel):
    id: int
    name: str
    role: str
    node: str | None
    created_at: str
    created_by: str
    expires_at: str | None
    revoked_at: str | None
    valid: bool

    @staticmethod
    def of(t: TokenRecord, now: float) -> TokenOut:
        return TokenOut(
            id=t.id,
            name=t.name,
            role=t.role,
            node=t.node,
            created_at=iso(t.created_t) or "",
            created_by=t.created_by,
            expires_at=iso(t.expires_t),
            revoked_at=iso(t.revoked_t),
            valid=t.valid(now),
        )


class TokenCreated(BaseModel):
    token: TokenOut
    secret: str = Field(description="The bearer token: shown this once, stored only as a hash.")


class DecisionOut(BaseModel):
    seq: int
    t: float
    at: str
    decision: str
    job: str | None
    policy_version: str | None
    evidence: dict[str, Any]
    hash: str


class DecisionPage(BaseModel):
    decisions: list[DecisionOut]
    next_after: int | None = Field(description="Pass as `after` for the next page; null at the end.")


class WhoAmI(BaseModel):
    token: int
    name: str
    role: str
    node: str | None


class VerifyOut(BaseModel):
    ok: bool
    records: int
    head_seq: int
    head_hash: str
    bad_seq: int | None
    reason: str | None
