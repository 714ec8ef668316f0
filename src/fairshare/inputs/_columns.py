"""`fairshare check` of a workload CSV a block of rows at a time, column by column.

`WorkloadBuilder.check` reads one row at a time (`fairshare.inputs._quick`, else the full way);
at 2,000,000 rows of 18 columns that took about 13 s of CPU. `ColumnChecker.check` reads a
`CsvBlock` (rows.py) by the quick reader's rules, column by column: the job ids as one set, the
submit and deadline times converted with `map(float, ...)` and their range checked once per
column, every other value once per distinct cell of the block (groups, classes, users, labels,
durations), and the shapes (GPUs, nodes, GPU types, CPUs, memory) and contracts (class,
protected, resumable, checkpoint) once per distinct tuple of cells. Groups, classes, users,
labels, shapes and contracts found good are remembered from block to block (up to _CACHE_MAX each).

It gives the block's result only when the quick reader would have read every row of it; otherwise
it returns None before changing anything, and the caller checks the block row by row the usual
way, which names the first error. Both ways give the same result (tests/test_robust_bounded.py
checks workloads both ways and compares).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, product
from operator import lt
from typing import TYPE_CHECKING, Protocol

from ..core.model import LABELS
from . import limits
from ._quick import _FALSE, _TRUE, Builder, QuickReader, _number

if TYPE_CHECKING:
    from .policy import JobClass


class ColumnBuilder(Builder, Protocol):
    """What the column checker reads of, and adds to, its builder (WorkloadBuilder): the quick
    reader's, its quick reader, the ids seen and the deadlines before submit."""

    @property
    def seen(self) -> set[str]: ...
    @property
    def late(self) -> list[tuple[str, float]]: ...
    @property
    def quick(self) -> QuickReader: ...


_CACHE_MAX = 100_000  # distinct cells (or tuples of them) remembered per kind: bounded memory
#: Optional numbers checked only for their range: (low, high, whether low itself is refused).
_RANGES = {
    "estimate": (0.0, limits.MAX_DURATION, True),
    "stall_after": (0.0, limits.MAX_DURATION, True),
    "work": (0.0, limits.MAX_DURATION, True),
}
_SHAPE = ("gpus", "nodes", "gpu_type", "cpus", "mem_gb")
_CONTRACT = ("class", "protected", "resumable", "checkpoint")


@dataclass(frozen=True, slots=True)
class BlockCheck:
    """What a block's rows add to a workload's check: how many had their protection capped, and
    the first of those with the earliest submit (its submit and index in the block)."""

    capped: int
    first_capped: tuple[float, int] | None


def _numbers(cells: Sequence[str]) -> tuple[Sequence[float | None], list[float]] | None:
    """Cells as `_quick._number` reads them (None where blank) and the numbers among them; None
    when a cell is not a finite number."""
    try:
        xs = list(map(float, cells))
    except ValueError:
        try:
            given = [None if not c or c.isspace() else float(c) for c in cells]
        except ValueError:
            return None
        got = [x for x in given if x is not None]
        return (given, got) if math.isfinite(sum(got)) else None
    return (xs, xs) if math.isfinite(sum(xs)) else None


def _within(xs: list[float], low: float, high: float, *, above: bool = False) -> bool:
    """Whether every value is >= low (> low when `above`) and <= high (the values are finite)."""
    if not xs:
        return True
    least = min(xs)
    return (least > low if above else least >= low) and max(xs) <= high


def _distinct(cols: Sequence[Sequence[str]], sets: Sequence[set[str]]) -> Iterable[tuple[str, ...]]:
    """The distinct rows of these columns (each column's distinct cells given): their product
    when at most one column has more than one, else the set of the rows."""
    if sum(len(s) > 1 for s in sets) <= 1:
        return product(*sets)
    return set(zip(*cols, strict=True))


class ColumnChecker:
    """Checks blocks of a workload CSV with the columns `columns` (name: number from 1)."""

    def __init__(self, builder: ColumnBuilder, columns: dict[str, int]) -> None:
        self.b, self.quick = builder, builder.quick
        self.at = {k: i - 1 for k, i in columns.items()}
        self.deadline_at = f"column {columns['deadline']} (deadline)" if "deadline" in columns else ""
        self.good: dict[str, set[str]] = {k: set() for k in ("group", "user", "label")}
        self.classes: dict[str, JobClass] = {}
        self.shapes: set[tuple[str, ...]] = set()  # shapes (cells) known to fit
        self.contracts: dict[tuple[str, ...], bool] = {}  # contracts (cells) -> whether capped

    def check(self, cells: list[list[str]], first_line: int) -> BlockCheck | None:
        """Check the rows of a block (CsvBlock.cells) whose first is on line `first_line`; None
        (nothing changed) when a row is not one the quick reader reads."""
        try:
            return self._check(cells, first_line)
        except (ValueError, KeyError, OverflowError):  # what makes the quick reader give up
            return None

    def _check(self, cells: list[list[str]], first_line: int) -> BlockCheck | None:
        b, n, at = self.b, len(cells), self.at
        cols = list(zip(*cells, strict=True))
        ids = list(map(str.strip, cols[at["job_id"]]))
        if not all(ids) or max(map(len, ids)) > limits.MAX_NAME_CHARS or not all(map(str.isprintable, ids)):
            return None
        unique = set(ids)
        if len(unique) != n or not b.seen.isdisjoint(unique):
            return None
        submit = _numbers(cols[at["submit"]])
        if submit is None or len(submit[1]) != n or not _within(submit[1], 0.0, limits.MAX_TIME):
            return None
        blank = ("",) * n
        column = {k: cols[i] for k, i in at.items()}
        sets = {k: set(c) for k, c in column.items() if k not in ("job_id", "submit", "deadline")}
        none: set[str] = {""}
        if not self._names(sets) or not self._ranges(sets):
            return None
        shape = [column.get(k, blank) for k in _SHAPE]
        if not self._shapes(_distinct(shape, [sets.get(k, none) for k in _SHAPE])):
            return None
        four = [column.get(k, blank) for k in _CONTRACT]
        any_capped = self._contracts(_distinct(four, [sets.get(k, none) for k in _CONTRACT]))
        if any_capped is None:
            return None
        deadline = _numbers(column["deadline"]) if "deadline" in column else ([], [])
        if deadline is None or not _within(deadline[1], 0.0, limits.MAX_TIME):
            return None
        # every row is good: what the rows add
        b.seen.update(unique)
        given, values = deadline
        times = submit[1]
        if values and (
            any(map(lt, values, times))
            if len(values) == n
            else any(d is not None and d < s for d, s in zip(given, times, strict=True))
        ):
            for j, (d, s) in enumerate(zip(given, times, strict=True)):
                if d is not None and d < s:
                    b.late.append((f"line {first_line + j}, {self.deadline_at}", d - s))
        if not any_capped:
            return BlockCheck(0, None)
        flags = [self.contracts[k] for k in zip(*four, strict=True)]
        first = min(compress(zip(times, range(n), strict=True), flags), default=None)
        return BlockCheck(sum(flags), first)

    def _remember(self, kind: str, cells: Iterable[str]) -> None:
        good = self.good[kind]
        if len(good) < _CACHE_MAX:
            good.update(cells)

    def _names(self, sets: dict[str, set[str]]) -> bool:
        """Groups (a leaf of the tree), classes, users and labels, each distinct cell once."""
        b = self.b
        todo = sets["group"].difference(self.good["group"])
        for cell in todo:
            leaf = b.paths.get(cell.strip())
            if leaf is None or leaf not in b.leafset:
                return False
        self._remember("group", todo)
        for cell in sets["class"].difference(self.classes):
            cls = b.policy.classes.get(cell.strip())
            if cls is None:
                return False
            if len(self.classes) < _CACHE_MAX:  # else a KeyError below: the block goes row by row
                self.classes[cell] = cls
        todo = sets.get("user", set()).difference(self.good["user"])
        for cell in todo:
            user = cell.strip()
            if user and (len(user) > limits.MAX_NAME_CHARS or not user.isprintable()):
                return False
        self._remember("user", todo)
        todo = sets.get("label", set()).difference(self.good["label"])
        if any((cell.strip() or "medium").lower() not in LABELS for cell in todo):
            return False
        self._remember("label", todo)
        return True

    def _ranges(self, sets: dict[str, set[str]]) -> bool:
        """work (required), estimate and stall_after: numbers in their range, each distinct cell of
        the block once (not remembered: converting one is as quick as looking it up)."""
        for key, (low, high, above) in _RANGES.items():
            cells = sets.get(key, ())
            xs = _numbers(list(cells))
            if xs is None or not _within(xs[1], low, high, above=above):
                return False
            if key == "work" and len(xs[1]) != len(cells):  # a blank work
                return False
        return True

    def _shapes(self, shapes: Iterable[tuple[str, ...]]) -> bool:
        """Each distinct (gpus, nodes, gpu_type, cpus, mem_gb) cells is a job that fits the cluster."""
        b = self.b
        for shape in shapes:
            if shape in self.shapes:
                continue
            gpus_cell, nodes_cell, type_cell, cpus_cell, mem_cell = shape
            gpus_x = float(gpus_cell)
            if not b.min_gpus <= gpus_x <= limits.MAX_JOB_GPUS or gpus_x != int(gpus_x):
                return False
            gpus = int(gpus_x)
            nodes_x = _number(nodes_cell)
            nodes = None
            if nodes_x is not None:
                if not 1 <= nodes_x <= limits.MAX_NODES or nodes_x != int(nodes_x):
                    return False
                nodes = int(nodes_x)
                if gpus % nodes:
                    return False
            cpus, mem = _number(cpus_cell), _number(mem_cell)
            if (cpus is not None and not 0 < cpus <= limits.MAX_JOB_CPUS) or (
                mem is not None and not 0 < mem <= limits.MAX_JOB_MEM_GB
            ):
                return False
            types = self.quick._types(type_cell)  # ValueError: an unknown type
            size, problem, _ = b._fit(gpus, nodes, types or b.all_types, cpus, mem)
            if problem is not None or size is None:
                return False
            if len(self.shapes) < _CACHE_MAX:
                self.shapes.add(shape)
        return True

    def _contracts(self, contracts: Iterable[tuple[str, ...]]) -> bool | None:
        """Each distinct (class, protected, resumable, checkpoint) cells is a contract the quick
        reader takes (else None); whether one of them caps the protection."""
        if len(self.contracts) >= _CACHE_MAX:
            self.contracts.clear()
        any_capped = False
        for key in contracts:
            capped = self.contracts.get(key)
            if capped is None:
                capped = self._contract(*key)
                if capped is None:
                    return None
                self.contracts[key] = capped
            any_capped |= capped
        return any_capped

    def _contract(self, cls_cell: str, protected: str, resumable: str, checkpoint: str) -> bool | None:
        """Whether the protection is capped (None: a contract the quick reader does not take)."""
        cls = self.classes[cls_cell]
        asked = self.quick._duration(protected)  # ValueError: not a duration the quick reader takes
        interval = self.quick._duration(checkpoint)
        is_resumable: bool = cls.resumable
        if resumable and not resumable.isspace():
            word = resumable.strip().lower()
            if word not in _TRUE and word not in _FALSE:
                return None
            is_resumable = word in _TRUE
        if interval is None:
            interval = cls.checkpoint
        if is_resumable and not (interval and interval > 0):
            return None
        return (cls.protected if asked is None else asked) > cls.protected_cap
