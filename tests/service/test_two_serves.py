"""Two `fairshare serve` processes on one database (both backends): the second serves the same views
read-only and refuses job actions naming the writer; when the writer is killed, it takes the
writer lock and schedules on."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Any

import httpx
import pytest

from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

from .test_crash import start

pytestmark = pytest.mark.slow


def wait_for(url: str, headers: dict[str, str], role: str, timeout: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < end:
        r = httpx.get(f"{url}/api/status", headers=headers, timeout=10)
        if r.status_code == 200:
            status = r.json()
            if status["role"] == role and status["view"] > 0:
                return status
        time.sleep(0.2)
    pytest.fail(f"{url} did not become {role}: {status}")


def test_a_second_serve_reads_and_takes_over(db_url: str) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "FAIRSHARE_CRASH_AT"}
    first, url1 = start(db_url, env)
    second = None
    try:
        with Store.open(db_url, time.time) as store, store.write() as tx:
            admin = tokens.create_token(tx, "admin", None, "two-serves", "test")[1]
        headers = {"Authorization": f"Bearer {admin}"}
        wait_for(url1, headers, "writer")
        second, url2 = start(db_url, env)
        status = wait_for(url2, headers, "reader")
        assert "holds the writer lock" in (status["loop"]["holder"] or "")
        time.sleep(1.5)  # the reader follows the journal each second
        tree1 = httpx.get(f"{url1}/api/tree", headers=headers, timeout=10).json()
        tree2 = httpx.get(f"{url2}/api/tree", headers=headers, timeout=10).json()
        assert [n["path"] for n in tree1["nodes"]] == [n["path"] for n in tree2["nodes"]]
        assert tree2["journal_seq"] > 0 and tree2["role"] == "reader"
        job = {"group": "product", "class": "debug", "gpus": 1, "estimate": "10m"}
        r = httpx.post(f"{url2}/api/jobs", headers=headers, json=job, timeout=10)
        assert r.status_code == 503 and "writer lock" in r.json()["message"]
        r = httpx.post(f"{url1}/api/jobs", headers=headers, json=job, timeout=10)
        assert r.status_code == 201, r.text
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        status = wait_for(url2, headers, "writer")
        r = httpx.post(f"{url2}/api/jobs", headers=headers, json=job, timeout=10)
        assert r.status_code == 201, r.text
        assert status["loop"]["error"] is None
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
