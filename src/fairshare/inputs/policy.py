"""The policy file: budget tree, job classes (execution contracts), GPU rates, exceptions, gates.

Loaded with pydantic; every error names the file and the key path. `TreeIndex` is the flattened
tree the ledger and scheduler work on (arrays indexed by node id, parents before children).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .._units import fmt_duration, format_epoch, instant, is_duration_text, parse_duration, to_utc
from ..core.model import Knobs, ResolvedException
from ..core.tree import TreeIndex
from ..errors import InputError
from ._validation import AtPath, StrictModel, load_yaml, validate
from .slurm_section import SlurmSection, check_against_policy

Seconds = float


def _dur(v: Any) -> float:
    return parse_duration(v)


def _not_bool(v: Any) -> Any:
    """YAML reads `yes`/`true` as booleans; pydantic would take them as 1.0 for a number."""
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r}")
    return v


class GroupNode(StrictModel):
    name: str = Field(min_length=1)
    share: float
    owner: str | None = None
    review: dt.date | None = None
    hypothesis: str | None = None
    children: tuple[GroupNode, ...] = ()

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if "/" in v or v.strip() != v:
            raise ValueError(f"a group name may not contain '/' or surrounding spaces: {v!r}")
        return v

    @field_validator("share", mode="before")
    @classmethod
    def _share_number(cls, v: Any) -> Any:
        return _not_bool(v)

    @field_validator("share")
    @classmethod
    def _share_positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"share must be > 0, got {v:g}")
        return v

    @field_validator("children")
    @classmethod
    def _unique_children(cls, v: tuple[GroupNode, ...]) -> tuple[GroupNode, ...]:
        _check_unique(v)
        return v


def _check_unique(nodes: tuple[GroupNode, ...]) -> None:
    seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.name in seen:
            raise AtPath(
                (i, "name"),
                f"duplicate sibling name {n.name!r} (also entry [{seen[n.name]}]): "
                "names under one parent must differ",
            )
        seen[n.name] = i


class JobClass(StrictModel):
    """An execution contract. Durations in seconds after parsing."""

    protected: Seconds = 0.0
    max_protected: Seconds | None = None
    resumable: bool = False
    checkpoint: Seconds | None = None
    restore: Seconds = 0.0
    startup: Seconds = 0.0
    max_stall: Seconds = 3600.0
    deadline: Seconds | None = None

    @field_validator(
        "protected",
        "max_protected",
        "checkpoint",
        "restore",
        "startup",
        "max_stall",
        "deadline",
        mode="before",
    )
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return None if v is None else _dur(v)

    @model_validator(mode="after")
    def _contract(self) -> JobClass:
        if self.max_protected is not None and self.protected > self.max_protected:
            raise ValueError(
                f"protected ({fmt_duration(self.protected)}) is above max_protected "
                f"({fmt_duration(self.max_protected)}): raise max_protected or lower protected"
            )
        if self.resumable and not (self.checkpoint is not None and self.checkpoint > 0):
            got = "missing" if self.checkpoint is None else fmt_duration(self.checkpoint)
            raise ValueError(
                f"resumable: true needs checkpoint > 0 (how often the job saves its "
                f"progress, e.g. checkpoint: 30m); checkpoint is {got}"
            )
        return self

    @property
    def protected_cap(self) -> float:
        return self.protected if self.max_protected is None else self.max_protected


class ShareException(StrictModel):
    group: str
    extra_share: float
    expires: Any = Field(default=None, validate_default=True)
    approver: str | None = None
    reason: str | None = None

    @field_validator("extra_share", mode="before")
    @classmethod
    def _share_number(cls, v: Any) -> Any:
        return _not_bool(v)

    @field_validator("extra_share")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"extra_share must be > 0, got {v:g}")
        return v

    @field_validator("expires", mode="before")
    @classmethod
    def _expiry(cls, v: Any) -> Any:
        if v is None or v == "":
            raise ValueError(
                "every exception must expire: add expires: with a date (2026-12-15), "
                "a datetime, or a duration from the epoch (14d)"
            )
        if isinstance(v, dt.date | dt.datetime) or is_duration_text(v):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool):
            return parse_duration(v)  # seconds after the epoch; raises on negative or non-finite
        to_utc(v)  # raises a clear ValueError
        return v


class Gates(StrictModel):
    share_floor: float = 0.9
    lost_work_pct: float = 5.0
    deadline_met_pct: float = 95.0
    exception_max_days: float = 30.0


class Scheduling(StrictModel):
    """Knobs of the scheduling strategies (defaults are the documented behaviour; the core reads
    them as `fairshare.core.model.Knobs`, field for field).

    gang_reserve_after  a job that cannot start after waiting this long gets capacity reserved
    lookahead           L in the fair-share priority (fairness.py)
    deadline_slack      a deadline job becomes urgent this long before its latest start
    requeue_delay       a pass is scheduled this long after every preemption, so a requeued job
                        is reconsidered even when nothing else happens (it may start sooner)
    preempt_backoff     a job that found no victims tries fair-share or label preemption again
                        only this long after (deadline preemption is exempt)
    slurm-multifactor baseline (Slurm's names): decay_half_life (PriorityDecayHalfLife, 7d),
    decay_period (PriorityCalcPeriod, 5m), priority_max_age (PriorityMaxAge, 7d),
    weight_fairshare (PriorityWeightFairshare, 10000), weight_age (PriorityWeightAge, 1000)
    """

    preemption: Literal["over_served", "none"] = "over_served"
    gang_reserve_after: Seconds = 1800.0
    lookahead: Seconds = 3600.0
    deadline_slack: Seconds = 900.0
    requeue_delay: Seconds = 10.0
    preempt_backoff: Seconds = 300.0
    decay_half_life: Seconds = 7 * 86400.0
    decay_period: Seconds = 300.0
    priority_max_age: Seconds = 7 * 86400.0
    weight_fairshare: float = Field(default=10000.0, ge=0)
    weight_age: float = Field(default=1000.0, ge=0)

    @field_validator(
        "gang_reserve_after",
        "lookahead",
        "deadline_slack",
        "requeue_delay",
        "preempt_backoff",
        "decay_half_life",
        "decay_period",
        "priority_max_age",
        mode="before",
    )
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return _dur(v)

    def knobs(self) -> Knobs:
        """The core's copy of these knobs (same names; the core imports no pydantic)."""
        return Knobs(**self.model_dump())


class Policy(StrictModel):
    window: Seconds = 7 * 86400.0
    gpu_rates: dict[str, float] = Field(default_factory=dict)
    tree: tuple[GroupNode, ...] = Field(min_length=1)
    classes: dict[str, JobClass] = Field(min_length=1)
    exceptions: tuple[ShareException, ...] = ()
    gates: Gates = Gates()
    scheduling: Scheduling = Scheduling()
    slurm: SlurmSection | None = None  # read by the Slurm driver only (slurm_section.py)

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v: Any) -> float:
        w = _dur(v)
        if w <= 0:
            raise ValueError("the rolling window must be longer than 0")
        return w

    @field_validator("gpu_rates")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for k, r in v.items():
            if not r > 0:
                raise AtPath((k,), f"the rate of {k} must be > 0 GPU-equivalents per GPU, got {r:g}")
        return v

    @field_validator("tree")
    @classmethod
    def _unique_top(cls, v: tuple[GroupNode, ...]) -> tuple[GroupNode, ...]:
        _check_unique(v)
        return v

    @model_validator(mode="after")
    def _exception_groups(self) -> Policy:
        paths = TreeIndex.build(self.tree).paths
        for i, ex in enumerate(self.exceptions):
            if ex.group not in paths:
                raise AtPath(
                    ("exceptions", i, "group"),
                    f"no group {ex.group!r} in the tree (a group is its path, e.g. {paths[-1]!r})",
                )
        if self.slurm is not None:
            tree = TreeIndex.build(self.tree)
            leaves = tuple(tree.paths[i] for i in tree.leaves)
            inner = tuple(p for p in tree.paths if p not in leaves)
            try:
                check_against_policy(self.slurm, leaves, inner, self.classes, self.gpu_rates)
            except AtPath as exc:
                raise AtPath(("slurm", *exc.rel), str(exc)) from None
        return self


def resolve_exceptions(
    policy: Policy, tree: TreeIndex, epoch: dt.datetime, where: str, strict: bool
) -> tuple[ResolvedException, ...]:
    """Place exception expiries on the replay clock; in a replay (strict) a past expiry is an error."""
    idx = tree.index()
    out = []
    for i, ex in enumerate(policy.exceptions):
        try:
            t = instant(ex.expires, epoch)
        except ValueError as exc:
            raise InputError(where, f"exceptions[{i}].expires", str(exc)) from None
        if strict and t <= 0:
            raise InputError(
                where,
                f"exceptions[{i}].expires",
                f"the exception for {ex.group} expires at or before the epoch (expires "
                f"{_when(ex.expires, epoch, t)}, the cluster's epoch is {format_epoch(epoch)}): "
                "an expired exception cannot take part in a replay; remove it or extend it",
            )
        out.append(ResolvedException(idx[ex.group], ex.group, ex.extra_share, t, ex.approver, ex.reason))
    return tuple(out)


def _when(expires: Any, epoch: dt.datetime, t: float) -> str:
    if isinstance(expires, dt.date | dt.datetime | str) and not is_duration_text(expires):
        try:
            return format_epoch(to_utc(expires))
        except ValueError:
            pass
    return format_epoch(epoch + dt.timedelta(seconds=t))


def load_policy(path: Path | str) -> Policy:
    p = Path(path)
    return validate(Policy, load_yaml(p), str(p))
