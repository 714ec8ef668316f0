"""Errors and warnings about input: each names the file and the place in it (key path, or line and
column)."""

from __future__ import annotations

import warnings


def _located(where: str, at: str, message: str) -> str:
    loc = f"{where}: {at}" if at else where
    return f"{loc}: {message}"


class InputError(Exception):
    """Bad user input. `where` is the file; `at` the key path or `line N, column C`."""

    def __init__(self, where: str, at: str, message: str) -> None:
        self.where = where
        self.at = at
        self.message = message
        super().__init__(_located(where, at, message))


class InputWarning(UserWarning):
    """Input that loads but is probably not what its author meant (a deadline before the job's
    submit, a review date long past). The CLI prints each as `warning: <file>: <where>: <message>`."""

    def __init__(self, where: str, at: str, message: str) -> None:
        self.where = where
        self.at = at
        self.message = message
        super().__init__(_located(where, at, message))


def warn(where: str, at: str, message: str) -> None:
    warnings.warn(InputWarning(where, at, message), stacklevel=2)
