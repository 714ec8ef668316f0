"""The quick way through a workload CSV row: every value read in a few steps, by position.

`WorkloadBuilder.build` reads a row through `Row`'s generic methods, which name the culprit of every
error; at 2,000,000 rows (the limit) that took about a minute. `QuickReader.read` reads the same
columns by the same rules with no error messages: any value it is not sure of (a bad number, an
unknown group, a name with a control character, a job that fits no pool...) makes it give up and
return None, and the builder reads that row the full way, which names the error. Both ways give the
same job (tests/test_robust_bounded.py builds workloads both ways and compares).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

from .._units import parse_duration
from ..core.model import LABELS
from . import limits
from .policy import Policy
from .rows import COLUMNS, REQUIRED, Row

_TRUE = frozenset(("true", "1", "yes", "y"))
_FALSE = frozenset(("false", "0", "no", "n"))
_OPTIONAL = (
    "gpu_type",
    "nodes",
    "cpus",
    "mem_gb",
    "label",
    "deadline",
    "protected",
    "resumable",
    "checkpoint",
    "stall_after",
    "estimate",
    "user",
)
_CACHE_MAX = 10_000  # distinct texts remembered per column (durations, GPU types): bounded memory

#: What `read` gives: the JobRequest's fields but `seq` (id, submit, group, leaf, user, cls, gpus,
#: nodes, gpu_types, cpus, mem_gb, estimate, label, deadline, protected, protected_capped,
#: resumable, checkpoint, charge), then work, stall_after and whether the deadline is before submit.
Quick = tuple[Any, ...]


def _number(text: str) -> float | None:
    """A cell as `Row.number` reads it (None: blank); raises ValueError for what is not one."""
    if not text or text.isspace():
        return None
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(text)
    return x


class Builder(Protocol):
    """What the quick reader reads of its builder (fairshare.inputs.workload.WorkloadBuilder)."""

    @property
    def policy(self) -> Policy: ...
    @property
    def min_gpus(self) -> int: ...
    @property
    def paths(self) -> Mapping[str, int]: ...
    @property
    def leafset(self) -> AbstractSet[int]: ...
    @property
    def known_types(self) -> AbstractSet[str]: ...
    @property
    def all_types(self) -> tuple[str, ...]: ...
    @property
    def seen(self) -> AbstractSet[str]: ...

    def _fit(
        self, gpus: int, nodes: int | None, types: Sequence[str], cpus: float | None, mem: float | None
    ) -> tuple[int | None, str | None, float]: ...


class QuickReader:
    """Reads a builder's plain CSV rows by column position (see the module docstring)."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.header: dict[str, int] | None = None
        self.at: dict[str, int] = {}
        self.optional: tuple[int | None, ...] = ()
        self.any_optional = True
        self.durations: dict[str, float] = {}
        self.types: dict[str, tuple[str, ...]] = {}

    def _columns(self, cols: dict[str, int]) -> None:
        self.header = cols
        self.at = {k: i - 1 for k, i in cols.items()}
        self.optional = tuple(self.at.get(k) for k in _OPTIONAL)
        self.any_optional = any(i is not None for i in self.optional)

    def _duration(self, text: str) -> float | None:
        if not text or text.isspace():
            return None
        x = self.durations.get(text)
        if x is None:
            x = parse_duration(text)  # ValueError: the full way names it
            if x > limits.MAX_DURATION:
                raise ValueError(text)
            if len(self.durations) < _CACHE_MAX:
                self.durations[text] = x
        return x

    def _types(self, text: str) -> tuple[str, ...] | None:
        """The allowed GPU types of a `gpu_type` cell (None: any type); ValueError: unknown."""
        s = text.strip()
        if not s:
            return None
        got = self.types.get(s)
        if got is None:
            got = tuple(t.strip() for t in s.split("|") if t.strip())
            if not got or any(t not in self.b.known_types for t in got):
                raise ValueError(s)
            if len(self.types) < _CACHE_MAX:
                self.types[s] = got
        return got

    def _plain(
        self, job_id: str, submit: float, group: str, leaf: int, cls_name: str, gpus: int, work: float
    ) -> Quick | None:
        """A row of the required columns only (what `_read` gives when the others are blank)."""
        b = self.b
        size, problem, charge = b._fit(gpus, None, b.all_types, None, None)
        cls = b.policy.classes[cls_name]
        checkpoint, resumable = cls.checkpoint, cls.resumable
        if problem is not None or size is None or (resumable and not (checkpoint and checkpoint > 0)):
            return None
        cap = cls.protected_cap
        return (
            job_id,
            submit,
            group,
            leaf,
            None,
            cls_name,
            gpus,
            size,
            None,
            None,
            None,
            work,
            "medium",
            None if cls.deadline is None else submit + cls.deadline,
            min(cls.protected, cap),
            cls.protected > cap,
            resumable,
            float(checkpoint) if resumable and checkpoint else 0.0,
            charge,
            work,
            None,
            False,
        )

    def read(self, row: Row) -> Quick | None:
        cols, v = row.columns, row.cells
        if cols is None or v is None:
            return None
        if cols is not self.header:
            self._columns(cols)
        try:
            return self._read(row, v)
        except (ValueError, KeyError, OverflowError):
            return None

    def _read(self, row: Row, v: list[str]) -> Quick | None:
        b, at = self.b, self.at
        job_id = v[at["job_id"]].strip()
        if not job_id or len(job_id) > limits.MAX_NAME_CHARS or not job_id.isprintable() or job_id in b.seen:
            return None
        submit, gpus_x, work = float(v[at["submit"]]), float(v[at["gpus"]]), float(v[at["work"]])
        if not (0.0 <= submit <= limits.MAX_TIME and 0.0 < work <= limits.MAX_DURATION):
            return None
        if not b.min_gpus <= gpus_x <= limits.MAX_JOB_GPUS or gpus_x != int(gpus_x):
            return None
        group = v[at["group"]].strip()
        leaf = b.paths.get(group)
        cls_name = v[at["class"]].strip()
        cls = b.policy.classes.get(cls_name)
        if leaf is None or leaf not in b.leafset or cls is None:
            return None
        gpus = int(gpus_x)
        if not self.any_optional:  # the required columns only: the class gives the rest
            return self._plain(job_id, submit, group, leaf, cls_name, gpus, work)
        (
            i_types,
            i_nodes,
            i_cpus,
            i_mem,
            i_label,
            i_deadline,
            i_protected,
            i_resumable,
            i_checkpoint,
            i_stall,
            i_estimate,
            i_user,
        ) = self.optional
        i = i_types
        types = None if i is None else self._types(v[i])
        i = i_nodes
        nodes_x = None if i is None else _number(v[i])
        nodes = None
        if nodes_x is not None:
            if not 1 <= nodes_x <= limits.MAX_NODES or nodes_x != int(nodes_x):
                return None
            nodes = int(nodes_x)
            if gpus % nodes:
                return None
        i = i_cpus
        cpus = None if i is None else _number(v[i])
        i = i_mem
        mem = None if i is None else _number(v[i])
        if (cpus is not None and not 0 < cpus <= limits.MAX_JOB_CPUS) or (
            mem is not None and not 0 < mem <= limits.MAX_JOB_MEM_GB
        ):
            return None
        size, problem, charge = b._fit(gpus, nodes, types or b.all_types, cpus, mem)
        if problem is not None or size is None:
            return None
        i = i_label
        label = "medium" if i is None else (v[i].strip() or "medium").lower()
        if label not in LABELS:
            return None
        i = i_deadline
        deadline = None if i is None else _number(v[i])
        late = False
        if deadline is not None:
            if not 0.0 <= deadline <= limits.MAX_TIME:
                return None
            late = deadline < submit
        elif cls.deadline is not None:
            deadline = submit + cls.deadline
        i = i_protected
        asked = None if i is None else self._duration(v[i])
        protected = cls.protected if asked is None else asked
        capped = protected > cls.protected_cap
        protected = min(protected, cls.protected_cap)
        i = i_resumable
        resumable: bool = cls.resumable
        if i is not None and v[i] and not v[i].isspace():
            word = v[i].strip().lower()
            if word not in _TRUE and word not in _FALSE:
                return None
            resumable = word in _TRUE
        i = i_checkpoint
        checkpoint = None if i is None else self._duration(v[i])
        if checkpoint is None:
            checkpoint = cls.checkpoint
        if resumable and not (checkpoint and checkpoint > 0):
            return None
        i = i_stall
        stall_after = None if i is None else _number(v[i])
        i = i_estimate
        estimate = None if i is None else _number(v[i])
        for x in (stall_after, estimate):
            if x is not None and not 0.0 < x <= limits.MAX_DURATION:
                return None
        i = i_user
        user = None if i is None else v[i].strip() or None
        if user is not None and (len(user) > limits.MAX_NAME_CHARS or not user.isprintable()):
            return None
        return (
            job_id,
            submit,
            group,
            leaf,
            user,
            cls_name,
            gpus,
            size,
            types,
            cpus,
            mem,
            work if estimate is None else estimate,
            label,
            deadline,
            protected,
            capped,
            resumable,
            float(checkpoint) if resumable and checkpoint else 0.0,
            charge,
            work,
            stall_after,
            late,
        )


assert set(REQUIRED) | set(_OPTIONAL) == set(COLUMNS)  # every column is read here
