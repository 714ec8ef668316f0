"""The dashboard in a real headless Chromium (Debian's, driven by Playwright; the session installs it
with apt-get when missing and fails, never skips, when it cannot): the page loads with a viewer
token, a pending job is followed to its explanation, the numbers shown are the API's, and
screenshots are saved as test artifacts (test-artifacts/ at the checkout's root, or
$FAIRSHARE_ARTIFACTS; not under out/, which `./dev demo` replaces as a whole)."""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fairshare.service.api.app import create_app
from fairshare.service.loop.live_service import LiveService
from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, make_loop, small_scenario

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def _install_chromium() -> str | None:
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return "no /usr/bin/chromium and apt-get cannot install it here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "chromium"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600, check=False)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    return None if done.returncode == 0 else f"apt-get install chromium failed: {done.stderr.strip()[-600:]}"


@pytest.fixture(scope="session")
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        reason = _install_chromium()
        if not Path(CHROMIUM).exists():
            pytest.fail(
                f"cannot run the browser test: {reason or 'no chromium after installing'}", pytrace=False
            )
    return CHROMIUM


@pytest.fixture
def browser_env() -> Iterator[dict[str, str | float | bool]]:
    """A short TMPDIR of its own for Chromium (its socket paths must be short; a failed launch
    leaves profile folders behind), removed afterwards."""
    folder = tempfile.mkdtemp(prefix="fs-chr-", dir="/tmp")
    try:
        yield {**os.environ, "TMPDIR": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("FAIRSHARE_ARTIFACTS", ROOT / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Server:
    url: str
    viewer: str
    headers: dict[str, str]

    def api(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers=self.headers, timeout=10)
        r.raise_for_status()
        return r.json()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The API and dashboard over a loop that ran a busy stretch, then holds still (a manual clock,
    no loop thread): the page and the API show the same view."""
    import uvicorn

    clock = ManualClock()
    scenario = small_scenario(jobs=80)
    with Store.open(f"sqlite:///{tmp_path / 'dash.db'}", clock) as store:
        loop = make_loop(store, scenario, clock)
        end = clock.t + 5 * 3600
        while clock.t < end:
            clock.t += 300
            loop.cycle()
        loop.publish(force=True)
        with store.write() as tx:
            viewer = tokens.create_token(tx, "viewer", None, "browser", "test")[1]
        app = create_app(store, live=LiveService(store, loop), auth_cache_s=5.0)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            for _ in range(200):
                if srv.started:
                    break
                threading.Event().wait(0.05)
            yield Server(f"http://127.0.0.1:{port}", viewer, {"Authorization": f"Bearer {viewer}"})
        finally:
            srv.should_exit = True
            thread.join(10)
            sock.close()
            loop._reset()


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + f"{x:,.1f}"


def test_the_dashboard_follows_a_pending_job_to_its_explanation(
    server: Server, chromium: str, artifacts: Path, browser_env: dict[str, str | float | bool]
) -> None:
    from playwright.sync_api import sync_playwright

    tree = {n["path"]: n for n in server.api("/api/tree")["nodes"]}
    pending = server.api("/api/jobs?state=pending")["jobs"]
    assert pending, "the view has waiting jobs"
    job = pending[-1]
    explain = server.api(f"/api/jobs/{job['id']}/explain")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS, env=browser_env)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{server.url}/#token={server.viewer}")
            page.wait_for_selector("#queue tbody tr")
            page.wait_for_selector("#usage-chart svg polyline")
            page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)
            # the budget tree shows the API's numbers
            for path, node in tree.items():
                row = page.locator(f'#tree tr[data-path="{path}"]')
                cell = row.locator("td.debt")
                assert math.isclose(float(cell.get_attribute("data-value") or "nan"), node["debt_gpu_h"])
                assert cell.inner_text().strip() == _signed(node["debt_gpu_h"])
            # the queue lists the waiting jobs in order; follow the last one to its explanation
            rows = page.locator("#queue tbody tr")
            assert rows.count() == len(pending)
            assert rows.first.get_attribute("data-job") == pending[0]["id"]
            page.locator(f'#queue tr[data-job="{job["id"]}"]').click()
            page.wait_for_selector("#explain:not([hidden]) #x-position[data-value]")
            assert page.locator("#x-job").inner_text() == job["id"]
            assert page.locator("#x-position").get_attribute("data-value") == str(explain["position"])
            assert (
                page.locator("#x-position").inner_text()
                == f"#{explain['position']} of {explain['queue_length']}"
            )
            assert page.locator("#x-group-position").get_attribute("data-value") == str(
                explain["group_position"]
            )
            debt = float(page.locator("#x-group-debt").get_attribute("data-value") or "nan")
            assert math.isclose(debt, explain["group"]["debt_gpu_h"])
            assert (
                page.locator("#x-group-debt").inner_text().startswith(_signed(explain["group"]["debt_gpu_h"]))
            )
            assert page.locator("#x-why").inner_text() == explain["why_pending_text"]
            assert page.locator("#x-summary").inner_text() == explain["summary"]
            forecast = page.locator("#x-forecast").get_attribute("data-value")
            assert forecast == (
                "" if explain["next_opportunity_t"] is None else str(explain["next_opportunity_t"])
            )
            against = page.locator("#x-against tbody tr")
            assert against.count() == len(explain["loses_to"])
            page.wait_for_selector("#x-decisions li")
            page.locator("#explain").screenshot(path=str(artifacts / "dashboard-explain.png"))
            page.screenshot(path=str(artifacts / "dashboard-with-explanation.png"), full_page=True)
            assert page.locator("#decisions li").count() > 0
            assert "ml" in page.locator("#review").inner_text()  # ml's review date has passed
            assert errors == [], errors
        finally:
            browser.close()


def test_the_dashboard_asks_for_a_token_and_refuses_a_bad_one(
    server: Server, chromium: str, browser_env: dict[str, str | float | bool]
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS, env=browser_env)
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            page.wait_for_selector("#login:not([hidden])")
            page.fill("#token-input", "fs_not-a-token")
            page.click("#login button")
            page.wait_for_selector("#login-error:has-text('refused')")
            page.fill("#token-input", server.viewer)
            page.click("#login button")
            page.wait_for_selector("#tree tbody tr")
        finally:
            browser.close()
