"""Errors for bad input: each names the file and the place in it (key path, or line and column)."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input. `where` is the file; `at` the key path or `line N, column C`."""

    def __init__(self, where: str, at: str, message: str) -> None:
        self.where = where
        self.at = at
        self.message = message
        loc = f"{where}: {at}" if at else where
        super().__init__(f"{loc}: {message}")
