"""Rows of a workload as read from its file: CSV with a header, or JSON Lines with the same keys.

A `Row` names the place of each value in errors (line and column of a CSV, line and key of JSON
Lines) and reads its values by one rule (README "Limits and bad input"; docs/formats.md "Types").
The workload builder (fairshare.inputs.workload) turns rows into jobs.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import chain, islice
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any

from .._units import parse_duration
from ..errors import InputError
from . import limits
from ._validation import reading_errors, text_problem
from .reader import text_chunks, text_lines

COLUMNS = (
    "job_id",
    "submit",
    "group",
    "user",
    "class",
    "gpus",
    "nodes",
    "gpu_type",
    "cpus",
    "mem_gb",
    "work",
    "estimate",
    "label",
    "deadline",
    "protected",
    "resumable",
    "checkpoint",
    "stall_after",
)
REQUIRED = ("job_id", "submit", "group", "class", "gpus", "work")


class Row:
    """One raw row with a way to name its cells in errors."""

    __slots__ = ("_values", "cells", "columns", "header", "line", "where")

    def __init__(
        self,
        where: str,
        line: int,
        values: dict[str, Any] | None,
        columns: dict[str, int] | None,
        cells: list[str] | None = None,
        header: Sequence[str] = (),
    ) -> None:
        """`values` by key; a CSV row gives its `cells` and `header` instead (the mapping is made
        only when asked for: the workload builder reads a plain row's cells directly)."""
        self.where, self.line, self._values, self.columns = where, line, values, columns
        self.cells, self.header = cells, header

    @property
    def values(self) -> dict[str, Any]:
        if self._values is None:
            self._values = dict(zip(self.header, self.cells or (), strict=True))
        return self._values

    def at(self, key: str) -> str:
        """Where the value of `key` is: line and column of a CSV, line and key of JSON Lines."""
        if self.columns is not None and key in self.columns:
            return f"line {self.line}, column {self.columns[key]} ({key})"
        return f"line {self.line}, key {key}"

    def fail(self, key: str, message: str) -> InputError:
        return InputError(self.where, self.at(key), message)

    # One rule for every value (README "Limits and bad input"): a CSV cell is text; a JSON value
    # is read as the same text would be, but its JSON type must fit the key: text keys take
    # strings, number keys numbers or strings holding one, `resumable` true/false or the words
    # below; null and "" are absent. Nested objects and lists are errors.

    def _given(self, key: str) -> Any:
        v = self.values.get(key)
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        if isinstance(v, dict | list):
            raise self.fail(
                key, f"expected a single value, got a JSON {'object' if isinstance(v, dict) else 'list'}"
            )
        return v

    def text(self, key: str, *, name: bool = False) -> str | None:
        v = self._given(key)
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.fail(key, f"expected text (a JSON string), got {v!r}")
        s = v.strip()
        if name:
            problem = text_problem(s, name=True)
            if problem:
                raise self.fail(key, f"the {key} {s[:60]!r} {problem}")
        return s or None

    def number(
        self,
        key: str,
        *,
        required: bool = False,
        positive: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float | None:
        v = self._given(key)
        if v is None:
            if required:
                raise self.fail(key, "a value is required")
            return None
        try:
            if isinstance(v, bool):
                raise ValueError
            x = float(v)
        except (TypeError, ValueError, OverflowError):
            raise self.fail(key, f"expected a number, got {_show(v)}") from None
        if not math.isfinite(x):
            raise self.fail(key, f"expected a finite number, got {_show(v)}")
        if positive and not x > 0:
            raise self.fail(key, f"must be > 0, got {_show(v)}")
        if minimum is not None and x < minimum:
            raise self.fail(key, f"must be >= {minimum:g}, got {_show(v)}")
        if maximum is not None and x > maximum:
            raise self.fail(key, f"must be at most {limits.fmt_limit(maximum)} (the limit), got {_show(v)}")
        return x

    def integer(
        self, key: str, *, required: bool = False, minimum: int = 1, maximum: int | None = None
    ) -> int | None:
        x = self.number(key, required=required)
        if x is None:
            return None
        if x != int(x) or x < minimum:
            raise self.fail(key, f"expected a whole number >= {minimum}, got {_show(self.values.get(key))}")
        if maximum is not None and x > maximum:
            raise self.fail(
                key,
                f"must be at most {limits.fmt_limit(maximum)} (the limit), got {_show(self.values.get(key))}",
            )
        return int(x)

    def duration(self, key: str) -> float | None:
        v = self._given(key)
        if v is None:
            return None
        try:
            x = parse_duration(v)
        except ValueError as exc:
            raise self.fail(key, str(exc)) from None
        if x > limits.MAX_DURATION:
            raise self.fail(
                key, f"must be at most {limits.fmt_limit(limits.MAX_DURATION)} (the limit), got {_show(v)}"
            )
        return x

    def boolean(self, key: str) -> bool | None:
        v = self._given(key)
        if v is None:
            return None
        if isinstance(v, bool):
            return v
        s = str(v).strip().lower()
        if s in ("true", "1", "yes", "y"):
            return True
        if s in ("false", "0", "no", "n"):
            return False
        raise self.fail(key, f"expected true or false, got {_show(v)}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def csv_rows(path: Path) -> Iterator[Row]:
    """The rows of a workload CSV, streamed from the bounded reader (fairshare.inputs.reader)."""
    where = str(path)
    with reading_errors(where):
        reader = csv.reader(text_lines(path))
        header, columns = _csv_header(reader, path)
        yield from _csv_records(reader, path, header, columns, reader.line_num + 1)


def _csv_header(reader: Iterator[list[str]], path: Path) -> tuple[list[str], dict[str, int]]:
    """The header of a workload CSV (names stripped) and each column's number (from 1)."""
    where = str(path)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(where, "line 1", "empty file: expected a header row") from None
    except csv.Error as exc:
        raise _csv_error(path, 1, (), exc) from None
    header = [h.strip() for h in header]
    return header, header_columns(where, header, COLUMNS, REQUIRED)


def header_columns(
    where: str, header: Sequence[str], known: Collection[str], required: Iterable[str]
) -> dict[str, int]:
    """Each column's number (from 1) in a CSV header of stripped names: an InputError at line 1 for
    a column not in `known` (listed in its order), a duplicate, or a `required` one missing."""
    columns: dict[str, int] = {}
    for i, key in enumerate(header, start=1):
        if key not in known:
            raise InputError(
                where,
                f"line 1, column {i} ({key})",
                f"unknown column {key!r} (known: {', '.join(known)})",
            )
        if key in columns:
            raise InputError(
                where,
                f"line 1, column {i} ({key})",
                f"duplicate column {key!r} (also column {columns[key]})",
            )
        columns[key] = i
    for key in required:
        if key not in columns:
            raise InputError(where, "line 1", f"required column {key!r} is missing")
    return columns


def _csv_records(
    reader: Any, path: Path, header: list[str], columns: dict[str, int], line: int, offset: int = 0
) -> Iterator[Row]:
    """The records of `reader` from the one starting on line `line` of the file; the reader's own
    line count starts `offset` lines into the file."""
    where = str(path)
    width = len(header)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a quote never closed runs into the cell size limit
            raise _csv_error(path, line, header, exc) from None
        end = offset + reader.line_num
        start, line = line, end + 1
        if not cells or (not cells[0].strip() and all(not c.strip() for c in cells)):
            continue
        if start != end or cells[-1].endswith(("\n", "\r")):
            spanning(where, start, end, cells, header)
        if len(cells) != width:
            raise InputError(where, f"line {start}", f"expected {width} cells, got {len(cells)}")
        yield Row(where, start, None, columns, cells, header)


#: Lines of a workload CSV read and parsed together by `csv_blocks`.
BLOCK_LINES = 512
_ENDS_IN_BREAK = methodcaller("endswith", ("\n", "\r"))


class CsvBlock:
    """Consecutive records of a workload CSV, one a line (line `first_line + j` is `cells[j]`), each
    of the header's width and none with a line break in a cell; some may be blank (all cells
    empty), which `rows` skips as `csv_rows` does."""

    __slots__ = ("cells", "columns", "first_line", "header", "where")

    def __init__(
        self, where: str, first_line: int, columns: dict[str, int], header: list[str], cells: list[list[str]]
    ) -> None:
        self.where, self.first_line, self.columns, self.header = where, first_line, columns, header
        self.cells = cells

    def row(self, j: int) -> Row:
        return Row(self.where, self.first_line + j, None, self.columns, self.cells[j], self.header)

    def rows(self) -> Iterator[Row]:
        """The block's rows one by one, as `csv_rows` gives them."""
        for j, cells in enumerate(self.cells):
            if not cells[0].strip() and all(not c.strip() for c in cells):
                continue
            yield self.row(j)


def csv_blocks(path: Path) -> Iterator[CsvBlock | Row]:
    """The records of a workload CSV as `csv_rows` gives them, but up to `BLOCK_LINES` lines parsed
    at once into a `CsvBlock` while every record is one line of the header's width. From the first
    block that is not (a blank line, a quoted line break, a quote never closed, a csv error), the
    rest of the file is given row by row by `csv_rows`' own loop, so every error is the same, at
    the same place and in the same order; the reader's own errors (fairshare.inputs.reader) come
    after the same lines as with `csv_rows`."""
    where = str(path)
    with reading_errors(where):
        pieces = (io.StringIO(text, newline="\n") for text in text_chunks(path))
        held: list[io.StringIO] = []  # the piece the header ends in

        def lines() -> Iterator[str]:
            for piece in pieces:
                held[:] = [piece]
                for text in piece:  # noqa: UP028 (`yield from` would close the piece with this generator)
                    yield text

        reader = csv.reader(lines())
        header, columns = _csv_header(reader, path)
        width = len(header)
        line = reader.line_num + 1
        for piece in chain(held, pieces):
            reader = csv.reader(piece)
            done = 0  # lines of the piece read
            while True:
                start = piece.tell()
                try:
                    cells: list[list[str]] | None = list(islice(reader, BLOCK_LINES))
                except csv.Error:
                    cells = None
                if cells == []:
                    break
                if (
                    cells is None
                    or reader.line_num - done != len(cells)
                    or set(map(len, cells)) != {width}
                    or any(map(_ENDS_IN_BREAK, map(itemgetter(-1), cells)))
                ):
                    piece.seek(start)
                    rest = chain(piece, chain.from_iterable(pieces))
                    yield from _csv_records(csv.reader(rest), path, header, columns, line, line - 1)
                    return
                yield CsvBlock(where, line, columns, header, cells)
                line += len(cells)
                done = reader.line_num


def _csv_error(path: Path, start: int, header: Sequence[str], exc: csv.Error) -> InputError:
    """csv's error about the record starting on line `start` (read again: errors are rare)."""
    text = ""
    for n, line in enumerate(text_lines(path), start=1):
        if n == start:
            text = line
            break
    return csv_error_at(str(path), start, text, header, exc)


def csv_error_at(where: str, start: int, text: str, header: Sequence[str], exc: csv.Error) -> InputError:
    """csv's error about the record starting on line `start` (whose text is `text`), named at the
    cell it stopped in: the last cell that line starts."""
    cells = next(csv.reader([text.rstrip("\r\n")]), [""]) or [""]
    i = len(cells)
    name = f" ({header[i - 1]})" if i <= len(header) else ""
    quote = ' (a quote (") that is never closed?)' if text.count('"') % 2 else ""
    return InputError(where, f"line {start}, column {i}{name}", f"not valid CSV: {exc}{quote}")


def spanning(where: str, start: int, end: int, cells: list[str], header: Sequence[str]) -> None:
    """A record of a table spans lines only when a quoted cell holds a line break: no workload or
    trace value may (names refuse control characters), so it is an error at the record's first
    line and the cell the quote opens, and most often a quote that is never closed (then the cell
    runs to the end of the file)."""
    i = next((k for k, c in enumerate(cells) if "\n" in c or "\r" in c), None)
    if i is None:
        return
    name = f" ({header[i]})" if i < len(header) else ""
    if end == start or (i == len(cells) - 1 and cells[i].endswith(("\n", "\r"))):
        message = (
            f"a quoted cell runs from line {start} to the end of the file (line {end}): a quote "
            '(") that is never closed'
        )
    else:
        message = (
            f'a quoted cell runs from line {start} to line {end}: a quote (") that is never closed, '
            "or a line break inside a value"
        )
    raise InputError(where, f"line {start}, column {i + 1}{name}", message)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"duplicate key {k!r} (JSON keeps only the last; give each key once)")
        out[k] = v
    return out


def jsonl_rows(path: Path) -> Iterator[Row]:
    """The rows of a JSON Lines workload, streamed; lines end at '\\n' only (a line separator
    such as U+2028 or a form feed inside a line does not shift the line numbers)."""
    where = str(path)
    for n, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        text = line.removesuffix("\n").removesuffix("\r")  # columns count on the line itself
        try:
            obj = json.loads(text, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {n}, column {exc.colno}", f"not valid JSON: {exc.msg}") from None
        except _DuplicateKey as exc:
            raise InputError(where, f"line {n}", str(exc)) from None
        except RecursionError:
            raise InputError(where, f"line {n}", "not valid JSON here: nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise InputError(where, f"line {n}", f"not valid JSON here: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError(where, f"line {n}", "expected a JSON object")
        row = Row(where, n, obj, None)
        for key in REQUIRED:
            if key not in obj:
                raise row.fail(key, "required key is missing")
        yield row
