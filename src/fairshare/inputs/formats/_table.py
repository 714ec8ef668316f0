"""Shared pieces of the trace readers: a CSV table that names file, line and column in its errors,
and a workload row that names the trace column a job value came from."""

from __future__ import annotations

import csv
import gc
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError
from .._validation import read_text, reading_errors
from ..rows import Row, csv_error_at, spanning


class TraceRow(Row):
    """A workload row built from a trace row: errors name the trace's line and column.

    `columns` maps a job key (gpus, work, ...) to the (1-based column, column name) of the trace it
    was derived from; a key not derived from one column (e.g. a generated class) is named as such.
    """

    def __init__(
        self, where: str, line: int, values: dict[str, Any], columns: Mapping[str, tuple[int, str]]
    ) -> None:
        super().__init__(where, line, values, None)
        self.trace_columns = columns

    def at(self, key: str) -> str:
        col = self.trace_columns.get(key)
        if col is not None:
            return f"line {self.line}, column {col[0]} ({col[1]})"
        return f"line {self.line} (job {key})"


@dataclass(frozen=True)
class Table:
    """A CSV file read whole: data rows as lists of cells, with their line numbers."""

    where: str
    header: tuple[str, ...]
    index: dict[str, int]  # column name -> zero-based position
    rows: list[list[str]]
    lines: list[int]

    def column(self, name: str) -> tuple[int, str]:
        """(1-based column number, name), for TraceRow and errors."""
        return self.index[name] + 1, name

    def fail(self, row: int, name: str, message: str) -> InputError:
        return InputError(
            self.where, f"line {self.lines[row]}, column {self.index[name] + 1} ({name})", message
        )

    def number(self, row: int, name: str, text: str, *, minimum: float | None = None) -> float:
        try:
            x = float(text)
        except ValueError:
            raise self.fail(row, name, f"expected a number, got {text!r}") from None
        if not math.isfinite(x):
            raise self.fail(row, name, f"expected a finite number, got {text!r}")
        if minimum is not None and x < minimum:
            raise self.fail(row, name, f"must be >= {minimum:g}, got {text!r}")
        return x

    def whole(self, row: int, name: str, text: str, *, minimum: int = 0) -> int:
        try:
            n = int(text)
        except ValueError:
            x = self.number(row, name, text)
            if x != int(x):
                raise self.fail(row, name, f"expected a whole number, got {text!r}") from None
            n = int(x)
        if n < minimum:
            raise self.fail(row, name, f"must be >= {minimum}, got {text!r}")
        return n


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects (none form cycles):
    reading a large trace is then about twice as fast."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_table(path: Path, required: Sequence[str], what: str) -> Table:
    """Read a CSV with a header; `required` columns must be present (others are kept, unused ones
    ignored). `what` names the format in messages ("a Philly trace"). Blank lines are skipped."""
    where = str(path)
    text = read_text(path)  # the bounded reader: special files, size, gzip, UTF-8 (line and column)
    with reading_errors(where), gc_paused():
        linenos: list[int] | None = None  # None: the line of record i is i + 1
        if '"' in text:
            records, linenos = _quoted(text, where)
        else:  # no quoting: a line is a row, cells split on commas (much faster than csv.reader)
            records = [line.split(",") for line in text.split("\n")]
        header, index, start = _header(records, linenos, where, required, what)
        width = len(header)
        stop = len(records)
        while stop > start and _blank(records[stop - 1]):
            stop -= 1
        rows = records[start:stop]
        if linenos is None and all(len(c) == width for c in rows):  # the common case: no blank lines
            lines = list(range(start + 1, stop + 1))
        else:
            rows, lines = [], []
            for k in range(start, stop):
                cells = records[k]
                line = k + 1 if linenos is None else linenos[k]
                if len(cells) != width or _blank(cells):
                    if _blank(cells):
                        continue
                    raise InputError(where, f"line {line}", f"expected {width} cells, got {len(cells)}")
                rows.append(cells)
                lines.append(line)
    return Table(where, header, index, rows, lines)


def _blank(cells: list[str]) -> bool:
    return all(not c.strip() for c in cells)


def _header(
    records: list[list[str]], linenos: list[int] | None, where: str, required: Sequence[str], what: str
) -> tuple[tuple[str, ...], dict[str, int], int]:
    """The header (first non-blank row), its column index, and the position of the first data row."""
    for k, cells in enumerate(records):
        if _blank(cells):
            continue
        line = k + 1 if linenos is None else linenos[k]
        header = tuple(h.strip() for h in cells)
        index: dict[str, int] = {}
        for i, name in enumerate(header):
            if name in index:
                raise InputError(where, f"line {line}, column {i + 1} ({name})", f"duplicate column {name!r}")
            index[name] = i
        missing = [c for c in required if c not in index]
        if missing:
            raise InputError(
                where,
                f"line {line}",
                f"missing column(s) {', '.join(repr(c) for c in missing)}: {what} has the columns "
                f"{', '.join(required)} (found: {', '.join(header)})",
            )
        return header, index, k + 1
    raise InputError(where, "line 1", "empty file: expected a header row")


def _quoted(text: str, where: str) -> tuple[list[list[str]], list[int]]:
    """Records and the line each starts on; a record spanning lines is an error (`spanning`)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    lines: list[int] = []
    header: list[str] = []
    line = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # a quote never closed runs into the cell size limit
            text_at = text.split("\n", line)[line - 1] if text.count("\n") >= line - 1 else ""
            raise csv_error_at(where, line, text_at, header, exc) from None
        start, line = line, reader.line_num + 1
        if not header and cells:
            header = [c.strip() for c in cells]
        spanning(where, start, reader.line_num, cells, header)
        rows.append(cells if cells else [""])
        lines.append(start)
    return rows, lines
