"""Errors as JSON `{"error": code, "message": ..., "field": ...}`; bad requests never answer 5xx.

The body limit is a plain ASGI middleware in front of everything: a body over the limit is refused
with 413 before any route reads it (Content-Length or not).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import InputError
from ..service_errors import ServiceError

log = logging.getLogger("fairshare.service")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
}


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"error": code, "message": message}
    if field is not None:
        out["field"] = field
    out.update(extra)
    return out


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


def _validation_message(err: dict[str, Any], field: str) -> str:
    kind = err.get("type", "")
    if field == "body" and kind == "missing":
        return "a JSON body is required (Content-Type: application/json)"
    if field == "body" and kind in ("model_attributes_type", "dict_type", "model_type"):
        return "the body must be a JSON object (Content-Type: application/json)"
    if kind == "extra_forbidden":
        return f"unknown field {field!r}"
    if kind == "missing":
        return f"required field {field!r} is missing"
    if kind == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "")
        return f"the body is not valid JSON{f': {detail}' if detail else ''}"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{field}: {msg}"


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service(_: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(error_body(exc.code, exc.message, exc.field), exc.status, headers=headers)

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        field = exc.at or None
        return JSONResponse(error_body("invalid", str(exc), field, where=exc.where), 422)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for err in exc.errors():
            loc = err.get("loc", ())
            where = loc[0] if loc else "body"
            field = _field(loc) if where == "body" else ".".join(str(p) for p in loc[1:]) or str(where)
            errors.append({"field": field, "in": str(where), "message": _validation_message(err, field)})
        first = errors[0] if errors else {"field": "body", "message": "invalid request"}
        return JSONResponse(error_body("invalid", first["message"], first["field"], errors=errors), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "error")
        return JSONResponse(
            error_body(code, str(exc.detail)), exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        return JSONResponse(error_body("invalid", f"the database refused a value: {exc.orig}"), 422)

    @app.exception_handler(OperationalError)
    async def _unavailable(_: Request, exc: OperationalError) -> JSONResponse:
        log.error("database error: %s", exc.orig)
        return JSONResponse(error_body("unavailable", "the database is unavailable; try again"), 503)

    @app.exception_handler(PoolTimeout)
    async def _busy(_: Request, exc: PoolTimeout) -> JSONResponse:
        log.error("no database connection free: %s", exc)
        return JSONResponse(error_body("unavailable", "the database is busy; try again"), 503)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("internal", "internal error; the server log has the details"), 500)


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413 (read at most limit + 1 bytes of them)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                declared = value
        if declared is not None:
            if not declared.isdigit():
                await _refuse(send, 400, "bad_request", "Content-Length is not a number")
                return
            if int(declared) > self.limit:
                await _refuse(send, 413, "too_large", self._message())
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body = msg.get("body", b"")
            size += len(body)
            if size > self.limit:
                await _refuse(send, 413, "too_large", self._message())
                return
            chunks.append(body)
            more = bool(msg.get("more_body", False))
        whole = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return f"the request body is larger than the limit of {self.limit} bytes"


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    response = JSONResponse(error_body(code, message), status)
    await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
