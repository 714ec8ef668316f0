"""`create_app(store)`: the FastAPI application of one store (no global state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI

from ..storage.store import Store
from . import (
    docs_offline,
    error_handlers,
    routes_dashboard,
    routes_decisions,
    routes_exceptions,
    routes_live,
    routes_meta,
    routes_policy,
    routes_reports,
    routes_tokens,
)
from .deps import AuthCache

if TYPE_CHECKING:
    from ..loop.live_service import LiveService

MAX_BODY_BYTES = 2 * 1024 * 1024


def create_app(
    store: Store,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    live: LiveService | None = None,
    auth_cache_s: float = 0.0,
    metrics_public: bool = False,
) -> FastAPI:
    """The API over `store` (whose clock it uses). Bodies over `max_body_bytes` get 413.

    `live`: the scheduler loop of this process (job, tree and explain endpoints, /metrics, the
    dashboard); without it those answer 503. `auth_cache_s`: remember a checked token this long
    (0: ask the database every time). `metrics_public`: /metrics without a token."""
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
        docs_url=None,  # served from the package's files, not a CDN (docs_offline)
        redoc_url=None,
    )
    docs_offline.install(app)
    app.state.store = store
    app.state.live = live
    app.state.auth_cache = AuthCache(auth_cache_s) if auth_cache_s > 0 else None
    app.state.metrics_public = metrics_public
    if live is not None:
        from .metrics import count_requests, make_registry

        registry, hist = make_registry(lambda: live.view, live.loop)
        app.state.metrics_registry = registry
        count_requests(app, registry)
        live.loop.on_pass.append(hist.observe)
    error_handlers.install(app)
    for module in (
        routes_meta,
        routes_policy,
        routes_exceptions,
        routes_decisions,
        routes_tokens,
        routes_live,
        routes_reports,
        routes_dashboard,
    ):
        app.include_router(module.router)
    app.add_middleware(error_handlers.BodyLimit, limit=max_body_bytes)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fairshare")
    except PackageNotFoundError:
        return "0"
