"""/docs works offline (issue 18): the page loads Swagger UI from the app itself (no CDN), the files
are served."""

from __future__ import annotations

import re

from .live_helpers import Live


def test_docs_load_their_files_from_the_app_not_a_cdn(live: Live) -> None:
    page = live.client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls  # nothing from another host
    for u in urls:
        r = live.client.get(u)
        assert r.status_code == 200 and len(r.content) > 100, u
    assert "cdn" not in page.text.lower()
    assert live.client.get("/redoc").status_code == 404
