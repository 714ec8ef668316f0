"""/api/policy: the current policy, its past versions, and (admin) a new version."""

from __future__ import annotations

import email.message
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ...errors import InputError
from ..service_errors import NotFound, ServiceError
from ..storage import portfolio
from ..storage.roles import require_admin
from .deps import Caller, Id, StoreDep, clean_text
from .models import MAX_POLICY_CHARS, PolicyOut, PolicyPut, PolicyPutOut

router = APIRouter(prefix="/api/policy", tags=["policy"])
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain")


class UnsupportedMedia(ServiceError):
    status = 415
    code = "unsupported_media_type"


@router.get("", response_model=PolicyOut, summary="The current policy version, with its text")
def current(store: StoreDep, _: Caller, response: Response) -> PolicyOut:
    with store.read() as tx:
        cur = portfolio.current_policy(tx)
    if cur is None:
        raise NotFound("no policy is stored yet (an admin can PUT /api/policy)")
    response.headers["ETag"] = f'"{cur.sha256}"'
    return PolicyOut.of(cur, with_text=True)


@router.get("/versions", response_model=list[PolicyOut], summary="Every version, oldest first (no text)")
def versions(store: StoreDep, _: Caller) -> list[PolicyOut]:
    with store.read() as tx:
        return [PolicyOut.of(v, with_text=False) for v in portfolio.policy_history(tx)]


@router.get("/versions/{version}", response_model=PolicyOut, summary="One version, with its text")
def version(store: StoreDep, _: Caller, version: Id) -> PolicyOut:
    with store.read() as tx:
        return PolicyOut.of(portfolio.policy_version(tx, version), with_text=True)


@router.put(
    "",
    response_model=PolicyPutOut,
    summary="Store a new policy version (admin)",
    description=(
        'Body: JSON `{"text": <policy YAML>, "note": ...}`, or the YAML itself with '
        "Content-Type application/yaml (and the note in the `note` query parameter). "
        "Validated like `fairshare "
        "check`, plus: exceptions expire at a date within gates.exception_max_days. The same text as "
        "the current version stores nothing (changed: false). If-Match: the current version's ETag, "
        "to refuse the change when someone else changed the policy meanwhile (409)."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": PolicyPut.model_json_schema()},
                "application/yaml": {"schema": {"type": "string"}},
            },
        }
    },
)
async def put(
    request: Request,
    store: StoreDep,
    caller: Caller,
    if_match: Annotated[str | None, Header(max_length=200)] = None,
    note: Annotated[str | None, Query(max_length=4000)] = None,
) -> PolicyPutOut:
    require_admin(caller, "changing the policy")
    body = await request.body()
    ctype = request.headers.get("content-type", "")
    msg = email.message.Message()
    msg["content-type"] = ctype
    kind = msg.get_content_type() if ctype else ""
    if kind == "application/json":
        req = _json_body(body)
        text, note = req.text, req.note if req.note is not None else note
    elif kind in YAML_TYPES:
        text = _yaml_body(body)
    else:
        raise UnsupportedMedia(
            'send the policy as application/json ({"text": ...}) or application/yaml, '
            f"not {ctype or 'no Content-Type'}"
        )
    if note is not None:
        try:
            note = clean_text(note)
        except ValueError as exc:
            raise InputError("request", "note", str(exc)) from None
    base = None if if_match is None else if_match.strip().strip('"')

    def store_it() -> PolicyPutOut:
        with store.write() as tx:
            v, warnings, changed = portfolio.put_policy(tx, text, caller.name, note, base_sha=base)
        return PolicyPutOut(policy=PolicyOut.of(v, with_text=False), changed=changed, warnings=warnings)

    return await run_in_threadpool(store_it)


def _json_body(body: bytes) -> PolicyPut:
    try:
        return PolicyPut.model_validate_json(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        kind = err["type"]
        if kind == "json_invalid":
            raise InputError("request", "body", "the body is not valid JSON") from None
        if kind == "extra_forbidden":
            raise InputError("request", loc, f"unknown field {loc!r} (allowed: text, note)") from None
        raise InputError("request", loc, str(err["msg"]).removeprefix("Value error, ")) from None


def _yaml_body(body: bytes) -> str:
    if len(body) > MAX_POLICY_CHARS:
        raise InputError("request", "body", f"a policy is at most {MAX_POLICY_CHARS} characters")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("request", "body", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise InputError("request", "body", "the policy is empty")
    try:
        return clean_text(text)
    except ValueError as exc:
        raise InputError("request", "body", str(exc)) from None
