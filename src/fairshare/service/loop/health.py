"""Whether the scheduler loop works, for an operator's alerts (issue 18): the time of the last
cycle that completed (a writer's cycle with its pass, or a reader's look at the journal), the last
error and when, errors counted, and each distinct error audited once, not once per retry.

`/healthz` answers 503 when nothing completed for `STALE_INTERVALS` poll intervals (a loop that
fails every cycle, or one stuck starting); `/api/status` and `/metrics` show the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..service_errors import Conflict
from ..storage import portfolio
from ..storage.audit import AuditRecord
from ..storage.store import Store
from ..timefmt import iso

log = logging.getLogger(__name__)

STALE_INTERVALS = 3


@dataclass
class LoopHealth:
    now: Callable[[], float] = time.time  # unix time (the metrics' and the operator's clock)
    started: float = field(default=0.0)
    last_ok: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    errors_total: int = 0
    audited: str | None = None  # the last error audited (a repeat is not audited again)
    repeats: int = 0  # consecutive failures with the same error
    set_aside: list[dict[str, Any]] = field(default_factory=list)  # inputs the loop set aside

    def __post_init__(self) -> None:
        self.started = self.now()

    def ok(self) -> None:
        self.last_ok = self.now()
        self.audited = None  # the same error after a success is news again
        self.repeats = 0

    def failed(self, error: str) -> bool:
        """Count an error; True when it differs from the last one audited (audit it)."""
        self.errors_total += 1
        self.repeats = self.repeats + 1 if error == self.last_error else 1
        self.last_error, self.last_error_at = error, self.now()
        if error == self.audited:
            return False
        self.audited = error
        return True

    def stale_for(self, interval_s: float) -> float | None:
        """Seconds since the last completed cycle (or the start) when over STALE_INTERVALS
        intervals; None while healthy."""
        since = self.now() - (self.last_ok if self.last_ok is not None else self.started)
        return since if since > STALE_INTERVALS * interval_s else None

    def as_json(self, interval_s: float) -> dict[str, Any]:
        stale = self.stale_for(interval_s)
        return {
            "healthy": stale is None,
            "last_pass_ok": iso(self.last_ok),
            "last_pass_ok_unix": self.last_ok,
            "last_error": self.last_error,
            "last_error_at": iso(self.last_error_at),
            "errors_total": self.errors_total,
            "stale_s": stale,
            "set_aside": self.set_aside[-10:],
        }

    def report(self, store: Store, t: float, error: str) -> None:
        """Count the error; audit it once (`loop_error`), not at every retry."""
        if not self.failed(error):
            return
        try:
            store.commit(audit_records=[AuditRecord(t, "loop_error", None, {"error": error})])
        except Exception:  # the database may be what fails: the log and /api/status still say it
            log.exception("could not audit the loop's error")

    def set_aside_job(self, job: str, error: str) -> str:
        """A submission whose resolution raised (not an InputError: a bug): the reason it is
        rejected with (audited `submit_rejected`), listed in /api/status's set_aside."""
        log.exception("job %s set aside: resolving its submission failed (%s)", job, error)
        self.set_aside.append({"job": job, "error": error, "at": iso(self.now())})
        return f"set aside by the scheduler loop: resolving it failed ({error})"[:2000]

    def set_aside_exception(self, store: Store, suspects: set[int], error: str) -> int | None:
        """The same error twice in a row, with exceptions in force that were not at the last
        completed cycle: end the newest of them (audited, naming the error), so the loop goes on
        instead of retrying the input that breaks it forever. The id, or None."""
        if self.repeats < 2 or not suspects:
            return None
        ex = max(suspects)
        why = f"set aside by the scheduler loop: its pass failed with this exception in force ({error})"
        try:
            with store.write() as tx:
                portfolio.end_exception(tx, ex, "scheduler loop", why[:2000])
        except Conflict:
            return None
        except Exception:
            log.exception("could not set exception %d aside", ex)
            return None
        log.error("exception %d set aside: the scheduling pass failed with it in force (%s)", ex, error)
        self.set_aside.append({"exception": ex, "error": error, "at": iso(self.now())})
        return ex
