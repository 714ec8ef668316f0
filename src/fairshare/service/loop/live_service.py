"""`LiveService`: the scheduler loop in a thread of its own, and what the API asks of it.

The API reads the loop's published views (never its engine) and hands it users' submissions and
cancellations through the cluster backend: the backend accepts them (the demo cluster stores them
in its own table), the loop is woken and ingests them as observations, and the call waits a moment
for the job to show in a view. Each such manual action is audited with who did it.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from ...errors import InputError
from ..clusters.backend import Backend
from ..service_errors import Conflict, Forbidden, NotFound, ServiceError, Unavailable
from ..storage.audit import AuditRecord
from ..storage.roles import JOB_ROLE, Principal, require_submit
from ..storage.store import Store
from ..storage.tokens import create_job_token
from .cycle import SchedulerLoop
from .reports import Report
from .views import View

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~+-]{0,127}$")


class NotSupported(ServiceError):
    status = 409
    code = "not_supported"


class LiveService:
    def __init__(self, store: Store, loop: SchedulerLoop) -> None:
        self.store, self.loop = store, loop
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.wait_s = 3.0  # how long a job action waits for the loop to show it (a test drives the loop)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.thread = threading.Thread(target=self.loop.run, args=(self.stop_event,), name="scheduler-loop")
        self.thread.daemon = True
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        self.loop.wake.set()
        if self.thread is not None:
            self.thread.join(timeout)

    @property
    def view(self) -> View:
        return self.loop.view

    # ------------------------------------------------------------------ users' actions
    def _writer_backend(self) -> Backend:
        backend = self.loop.backend
        if self.loop.role == "starting" or (self.loop.role == "writer" and backend is None):
            error = f" (last error: {self.loop.error})" if self.loop.error else ""
            raise Unavailable(f"the scheduler loop is starting: try again in a few seconds{error}")
        if self.loop.role != "writer" or backend is None:
            holder = f" ({self.loop.holder})" if self.loop.holder else ""
            raise Unavailable(
                "this process does not run the scheduler loop: another fairshare serve holds the "
                f"database's writer lock{holder}; send job actions to that one"
            )
        return backend

    def submit(self, caller: Principal, job_id: str | None, spec: Mapping[str, Any]) -> dict[str, Any]:
        require_submit(caller, str(spec.get("group", "")))
        backend = self._writer_backend()
        if not backend.accepts_submissions:
            raise NotSupported(
                f"the {backend.name} cluster takes submissions itself (e.g. sbatch); fairshare orders them"
            )
        now = self.loop.clock()
        if job_id is None:
            job_id = f"api-{int(now)}-{secrets.token_hex(3)}"
        elif not JOB_ID.match(job_id):
            raise InputError(
                "job", "job_id", "1-128 letters, digits and . _ ~ + -, starting with a letter or digit"
            )
        try:  # an accepting cluster resolves it once against the policy in force (or refuses it)
            at = backend.submit(job_id, spec, now, caller.describe())
        except InputError as exc:
            raise _field_error(exc) from None
        self.store.commit(
            audit_records=[
                AuditRecord(
                    at, "submit", job_id, {"by": caller.describe(), **{k: v for k, v in spec.items()}}
                )
            ]
        )
        with self.store.write() as tx:  # the job's own token, for its progress reports (shown once)
            secret = create_job_token(tx, job_id, caller.describe())
        self.loop.wake.set()
        out = self._wait_for(job_id, lambda v: job_id in v.jobs, {"id": job_id, "state": "submitted"})
        return {**out, "report_token": secret}

    def report(
        self, caller: Principal, job_id: str, kind: str, step: int, path: str | None
    ) -> dict[str, Any]:
        """A job's progress report (loop/reports.py): only the job's own token (or an admin's) may
        send it, only while the job runs; answered once the loop took it (or `queued`)."""
        own = caller.role == "admin" or (caller.role == JOB_ROLE and caller.node == job_id)
        if not own and caller.role != "munge":
            raise Forbidden(f"this token may not report for job {job_id}: use the job's own token")
        row = self.loop.view.jobs.get(job_id)
        if row is None:
            raise NotFound(f"no pending or running job {job_id!r}")
        if caller.role == "munge" and (row.user is None or row.user != caller.node):
            raise Forbidden(f"user {caller.node} may not report for job {job_id}: it is not their job")
        if row.state not in ("running", "pending"):
            raise Conflict(f"job {job_id} is {row.state}: only a running job reports its progress")
        self._writer_backend()
        # pending in the view: its run may have started since the loop's last read (loop/reports.py)
        r = Report(job_id, kind, step, path, caller.describe(), early=row.state == "pending")
        self.loop.inbox.put(r)
        self.loop.wake.set()
        if not r.done.wait(self.wait_s):
            return {"id": job_id, "report": kind, "step": step, "state": "queued"}
        if r.error is not None:
            raise Conflict(r.error)
        return {"id": job_id, "report": kind, "step": step, "state": "accepted", "changed": r.changed}

    def cancel(self, caller: Principal, job_id: str) -> dict[str, Any]:
        row = self.loop.view.jobs.get(job_id)
        if row is None:
            raise NotFound(f"no pending or running job {job_id!r}")
        require_submit(caller, row.group)
        if row.state not in ("pending", "running"):
            raise Conflict(f"job {job_id} has ended already ({row.state})")
        backend = self._writer_backend()
        now = self.loop.clock()
        backend.cancel(job_id, now, caller.describe())
        self.store.commit(
            audit_records=[AuditRecord(now, "cancel", job_id, {"by": caller.describe(), "was": row.state})]
        )
        self.loop.wake.set()

        def gone(v: View) -> bool:
            r = v.jobs.get(job_id)
            return r is None or r.state == "cancelled"

        return self._wait_for(job_id, gone, {"id": job_id, "state": "cancelling"})

    def _wait_for(self, job_id: str, ready: Any, fallback: dict[str, Any]) -> dict[str, Any]:
        end = time.monotonic() + self.wait_s
        while time.monotonic() < end:
            v = self.loop.view
            if ready(v):
                row = v.jobs.get(job_id)
                return row.as_json(v) if row is not None else fallback
            time.sleep(0.02)
        return fallback


def _field_error(exc: InputError) -> InputError:
    """A workload builder's error ('line 1, key gpus') named by the request's field."""
    m = re.search(r"key (\w+)", exc.at or "")
    return InputError("job", m.group(1) if m else "body", exc.message)
