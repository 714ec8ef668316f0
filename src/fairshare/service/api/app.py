"""`create_app(store)`: the FastAPI application of one store (no global state)."""

from __future__ import annotations

from fastapi import FastAPI

from ..store import Store
from . import errors, routes_decisions, routes_exceptions, routes_meta, routes_policy, routes_tokens

MAX_BODY_BYTES = 2 * 1024 * 1024


def create_app(store: Store, *, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The API over `store` (whose clock it uses). Bodies over `max_body_bytes` get 413."""
    app = FastAPI(
        title="fairshare",
        summary="Budget-based fair-share scheduling for GPU clusters: the live service.",
        description=(
            "Every /api route needs `Authorization: Bearer <token>` (tokens: `fairshare token "
            "create`). Roles: viewer (read), member of a node (submit under it, read), owner of a "
            "node (exceptions strictly under it), admin (policy, tokens). Errors are JSON "
            '`{"error": code, "message": ..., "field": ...}`.'
        ),
        version=_version(),
    )
    app.state.store = store
    errors.install(app)
    for module in (routes_meta, routes_policy, routes_exceptions, routes_decisions, routes_tokens):
        app.include_router(module.router)
    app.add_middleware(errors.BodyLimit, limit=max_body_bytes)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fairshare")
    except PackageNotFoundError:
        return "0"
