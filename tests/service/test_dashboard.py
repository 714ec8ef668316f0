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
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import apt_install
from fairshare.service.api.app import create_app
from fairshare.service.clusters.backend import Observation
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import portfolio, tokens
from fairshare.service.storage.store import Store

from .conftest import FAKE_NODES, POLICY, Clock
from .live_helpers import ManualClock, make_loop, small_scenario

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def _install_chromium() -> str | None:
    return apt_install(["chromium"], "/usr/bin/chromium")


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
        try:
            with _serving(app) as url:
                yield Server(url, viewer, {"Authorization": f"Bearer {viewer}"})
        finally:
            loop._reset()


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    """The app served by uvicorn on a free local port (a thread) while the block runs: its URL."""
    import uvicorn

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
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()


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


def _balance_class_holds(debt: float, owed: float, delivered: float, classes: str) -> bool:
    """The tint follows the sign, and only a balance 5 % or more off what the group was owed has one."""
    far = abs(debt) >= 0.05 and abs(debt) / max(abs(owed), abs(delivered), 1.0) >= 0.05
    if not far:
        return "even" in classes.split()
    return ("owed" if debt > 0 else "borrowed") in classes.split()


def _open_page(p: Any, chromium: str, env: dict[str, str | float | bool], width: int) -> tuple[Any, Any]:
    browser = p.chromium.launch(executable_path=chromium, args=ARGS, env=env)
    page = browser.new_page(viewport={"width": width, "height": 900})
    return browser, page


@pytest.mark.parametrize("width", [1400, 420], ids=["desktop", "phone-420px"])
def test_the_group_filter_keyboard_and_columns_at_each_width(
    server: Server, chromium: str, artifacts: Path, browser_env: dict[str, str | float | bool], width: int
) -> None:
    from playwright.sync_api import sync_playwright

    jobs = server.api("/api/jobs?limit=400")["jobs"]
    by_group: dict[str, int] = {}
    for j in jobs:
        if j["state"] == "pending":
            by_group[j["group"]] = by_group.get(j["group"], 0) + 1
    assert len(by_group) >= 2, "the view has waiting jobs of two groups at least"
    group = min(by_group, key=lambda g: (by_group[g], g))  # the filter must drop most rows
    mine = server.api(f"/api/jobs?limit=400&group={group}")["jobs"]
    pending = [j for j in mine if j["state"] == "pending"]
    running = [j for j in mine if j["state"] == "running"]
    tree = server.api("/api/tree")["nodes"]
    with sync_playwright() as p:
        browser, page = _open_page(p, chromium, browser_env, width)
        try:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{server.url}/#token={server.viewer}")
            page.wait_for_selector("#queue tbody tr")
            page.wait_for_selector("#usage-chart svg polyline")
            # balances coloured by sign and size, the API's numbers
            for node in tree:
                cell = page.locator(f'#tree tr[data-path="{node["path"]}"] td.debt')
                classes = cell.get_attribute("class") or ""
                assert _balance_class_holds(
                    node["debt_gpu_h"], node["owed_gpu_h"], node["delivered_gpu_h"], classes
                ), (node["path"], node["debt_gpu_h"], classes)
            # the queue's class, user and estimate columns are the API's
            first = jobs[[j["state"] for j in jobs].index("pending")]
            row = page.locator(f'#queue tr[data-job="{first["id"]}"]')
            assert row.locator("td.cls").inner_text() == (first["class"] or "–")
            assert row.locator("td.user").inner_text() == (first["user"] or "–")
            assert float(row.locator("td.est").get_attribute("data-value") or "nan") == first["estimate_s"]
            # the group filter: only that group's jobs, waiting and running
            assert page.locator("#queue tbody tr").count() == min(
                200, len([j for j in jobs if j["state"] == "pending"])
            )
            page.select_option("#group-filter", group)
            page.wait_for_selector(f'body[data-group="{group}"]')
            assert page.locator("#queue tbody tr").count() == len(pending)
            assert page.locator("#running tbody tr").count() == len(running)
            shown = page.locator("#queue tbody tr td:nth-child(3)").all_inner_texts()
            assert shown == [j["group"] for j in pending] and set(shown) == {group}
            assert set(page.locator("#running tbody tr td:nth-child(2)").all_inner_texts()) <= {group}
            # the page never scrolls sideways (wide tables scroll inside their own box)
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            wide = page.evaluate(
                "() => [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right"
                " > document.documentElement.clientWidth + 1 && !e.closest('.scroll')).map((e) => e.tagName +"
                " '#' + e.id + '.' + e.className).slice(0, 8)"
            )
            assert overflow <= 0, f"the page is {overflow} px wider than a {width} px screen: {wide}"
            # keyboard: Tab reaches a row, Enter opens its job's explanation, Escape closes it
            target = pending[-1]["id"]
            page.locator(f'#queue tr[data-job="{target}"]').focus()
            page.keyboard.press("Enter")
            page.wait_for_selector("#explain:not([hidden]) #x-position[data-value]")
            assert page.locator("#x-job").inner_text() == target
            if width == 420:
                page.screenshot(path=str(artifacts / "dashboard-420px.png"), full_page=True)
            page.keyboard.press("Escape")
            page.wait_for_selector("#explain", state="hidden")
            assert page.evaluate("() => document.activeElement.dataset.job") == target
            # back to every group
            page.select_option("#group-filter", "")
            page.wait_for_selector('body[data-group=""]')
            assert page.locator("#queue tbody tr").count() > len(pending)
            assert errors == [], errors
        finally:
            browser.close()


def test_a_row_is_reachable_with_the_tab_key(
    server: Server, chromium: str, browser_env: dict[str, str | float | bool]
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _open_page(p, chromium, browser_env, 1400)
        try:
            page.goto(f"{server.url}/#token={server.viewer}")
            page.wait_for_selector("#queue tbody tr")
            page.locator("#group-filter").focus()
            for _ in range(40):  # past the usage chart's select to the queue's first row
                page.keyboard.press("Tab")
                if page.evaluate("() => document.activeElement.closest('#queue') !== null"):
                    break
            job = page.evaluate("() => document.activeElement.dataset.job")
            assert job == page.locator("#queue tbody tr").first.get_attribute("data-job")
            page.keyboard.press("ArrowDown")
            second = page.locator("#queue tbody tr").nth(1).get_attribute("data-job")
            assert page.evaluate("() => document.activeElement.dataset.job") == second
            page.keyboard.press("Enter")
            page.wait_for_selector("#explain:not([hidden])")
            assert page.locator("#x-job").inner_text() == second
        finally:
            browser.close()


class _BrokenDriver(FakeCluster):
    """A cluster driver with a bug: while `broken`, reading the cluster raises (as in
    test_loop_health.py)."""

    broken = False

    def observe(self, since: float, until: float) -> list[Observation]:
        if self.broken:
            raise RuntimeError("driver bug: index out of range")
        return super().observe(since, until)


def test_the_loop_badge_turns_red_with_the_reason_while_the_loop_fails(
    tmp_path: Path, chromium: str, artifacts: Path, browser_env: dict[str, str | float | bool]
) -> None:
    from playwright.sync_api import sync_playwright

    reason = "RuntimeError: driver bug: index out of range"
    fake = _BrokenDriver(FAKE_NODES)
    clock = Clock()
    with Store.open(f"sqlite:///{tmp_path / 'failing.db'}", clock) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, POLICY, "test")
            viewer = tokens.create_token(tx, "viewer", None, "browser", "test")[1]
        opts = LoopOptions(speed=0, forecast_s=0.0, publish_s=0.0, poll_s=0.1, refresh_s=0.1)
        loop = SchedulerLoop(store, lambda: fake, clock, opts)
        stop = threading.Event()
        th = threading.Thread(target=loop.run, args=(stop,), daemon=True)
        th.start()
        app = create_app(store, live=LiveService(store, loop), auth_cache_s=5.0)
        try:
            with _serving(app) as url, sync_playwright() as p:
                browser, page = _open_page(p, chromium, browser_env, 1400)
                try:
                    page.goto(f"{url}/#token={viewer}")
                    badge = page.locator("#loop-badge")
                    page.wait_for_selector("#loop-badge.writer")
                    assert badge.inner_text() == "scheduling"
                    assert "failing" not in (badge.get_attribute("class") or "").split()
                    fake.broken = True
                    loop.wake.set()
                    page.wait_for_selector("#loop-badge.failing", timeout=20_000)
                    page.screenshot(path=str(artifacts / "dashboard-loop-failing.png"))
                    assert (badge.get_attribute("class") or "").split() == ["badge", "failing"]
                    assert badge.inner_text() == f"failing: {reason}"
                    assert badge.get_attribute("title") == reason
                    assert page.locator("#banner").inner_text() == f"The scheduler loop reported: {reason}"
                    fake.broken = False  # fixed: the badge is the loop's role again
                    page.wait_for_selector("#loop-badge.writer", timeout=20_000)
                    assert badge.inner_text() == "scheduling"
                finally:
                    browser.close()
        finally:
            stop.set()
            loop.wake.set()
            th.join(15)
