"""/docs without a CDN: Swagger UI's files from the `swagger-ui-bundle-v2` package (Swagger UI 5,
which reads FastAPI's OpenAPI 3.1), served by the app itself under /docs/static. ReDoc, which
FastAPI would load from a CDN, is off."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = "/docs/static"


def install(app: FastAPI) -> None:
    import swagger_ui_bundle  # type: ignore[import-untyped]  # (no type hints shipped)

    app.mount(STATIC, StaticFiles(directory=Path(swagger_ui_bundle.swagger_ui_path)), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title}: API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon-32x32.png",
        )
