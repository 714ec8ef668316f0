"""The dashboard: one HTML page, a stylesheet and a script shipped in the package (no CDN, no
build step). The page holds no data: its script reads the API with the viewer's token, which it
takes from the address (`/#token=fs_...`, as `serve --demo` prints it) or asks for once and keeps in
the browser's local storage."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from ..service_errors import NotFound

router = APIRouter(include_in_schema=False)
ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}


def _asset(name: str) -> bytes:
    return files("fairshare.service.api").joinpath("dashboard", name).read_bytes()


@router.get("/")
def page() -> HTMLResponse:
    return HTMLResponse(_asset("index.html"), headers={"Cache-Control": "no-cache"})


@router.get("/static/{name}")
def asset(name: str) -> Response:
    kind = ASSETS.get(name)
    if kind is None:
        raise NotFound(f"no asset {name!r}")
    return Response(_asset(name), media_type=kind, headers={"Cache-Control": "no-cache"})
