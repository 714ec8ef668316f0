"""Errors of the service, each with the HTTP status the API answers with and a short code."""

from __future__ import annotations


class ServiceError(Exception):
    """A refused request or operation; `message` says what to do about it."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class Unavailable(ServiceError):
    status = 503
    code = "unavailable"


class ClusterUnavailable(Unavailable):
    """The cluster cannot be read now (its controller is down or restarting, a command timed
    out): the loop skips the cycle and retries with backoff."""

    code = "cluster_unavailable"


class SchemaTooNew(ServiceError):
    """The database was migrated by a newer fairshare than this one."""

    status = 503
    code = "schema_too_new"


class WriterLockHeld(Conflict):
    """Another process holds the database's writer lock (it runs the scheduler loop)."""

    code = "writer_lock_held"
