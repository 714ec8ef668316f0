"""The policy file: budget tree, job classes (execution contracts), GPU rates, exceptions, gates.

Loaded with pydantic; every error names the file and the key path. `TreeIndex` is the flattened
tree the ledger and scheduler work on (arrays indexed by node id, parents before children).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .._units import fmt_duration, format_epoch, instant, is_duration_text, parse_duration, to_utc
from ..core.model import BACKLOGGED_DEFAULT, Knobs, ResolvedException
from ..core.tree import TreeIndex
from ..errors import InputError, warn
from . import limits
from ._validation import (
    AtPath,
    Date,
    Loc,
    Name,
    Number,
    StrictModel,
    Text,
    Whole,
    check_year,
    key_path,
    load_yaml,
    validate,
)
from .slurm_section import SlurmSection, check_against_policy

Seconds = float


def _dur(v: Any, minimum: float = 0.0, maximum: float = limits.MAX_DURATION) -> float:
    """A duration within [minimum, maximum] seconds (README: Limits and bad input)."""
    x = parse_duration(v)
    if x > maximum:
        raise ValueError(f"must be at most {limits.fmt_limit(maximum)} ({maximum:g} s, the limit), got {v!r}")
    if x < minimum:
        raise ValueError(f"must be at least {fmt_duration(minimum)}, got {v!r}")
    return x


def _share_range(v: float, key: str) -> float:
    if not v > 0:
        raise ValueError(f"{key} must be > 0, got {v:g}")
    if not limits.MIN_SHARE <= v <= limits.MAX_SHARE:
        raise ValueError(
            f"{key} must be between {limits.MIN_SHARE:g} and {limits.MAX_SHARE:g} (the limits; shares "
            f"are relative weights), got {v:g}"
        )
    return v


class GroupNode(StrictModel):
    name: Name = Field(min_length=1)
    share: Number
    owner: Name | None = None
    review: Date | None = None
    hypothesis: Text | None = None
    children: tuple[GroupNode, ...] = ()

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if "/" in v or v.strip() != v:
            raise ValueError(f"a group name may not contain '/' or surrounding spaces: {v!r}")
        return v

    @field_validator("share")
    @classmethod
    def _share_positive(cls, v: float) -> float:
        return _share_range(v, "share")

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
    # required: a run that never reports progress counts as stalled after max_stall (docs/progress.md)
    progress: Literal["required", "optional"] = "optional"

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
    group: Text
    extra_share: Number
    expires: Any = Field(default=None, validate_default=True)
    approver: Name | None = None
    reason: Text | None = None

    @field_validator("extra_share")
    @classmethod
    def _positive(cls, v: float) -> float:
        return _share_range(v, "extra_share")

    @field_validator("expires", mode="before")
    @classmethod
    def _expiry(cls, v: Any) -> Any:
        if v is None or v == "":
            raise ValueError(
                "every exception must expire: add expires: with a date (2026-12-15), "
                "a datetime, or a duration from the epoch (14d)"
            )
        if isinstance(v, dt.date | dt.datetime):
            check_year(v, "an expiry date")
            return v
        if is_duration_text(v) or (isinstance(v, int | float) and not isinstance(v, bool)):
            return _dur(v)  # seconds after the epoch; raises on negative, non-finite or too long
        check_year(to_utc(v), "an expiry date")  # raises a clear ValueError
        return v


class Gates(StrictModel):
    share_floor: Number = Field(default=0.9, ge=0, le=limits.MAX_SHARE_FLOOR)
    lost_work_pct: Number = Field(default=5.0, ge=0, le=100)
    deadline_met_pct: Number = Field(default=95.0, ge=0, le=100)
    exception_max_days: Number = Field(default=30.0, ge=0, le=limits.MAX_EXCEPTION_DAYS)


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
    weight_fairshare (PriorityWeightFairshare, 10000), weight_age (PriorityWeightAge, 1000);
    its backfill (SchedulerParameters): bf_interval (30s), bf_window (1d), bf_resolution (60s),
    bf_max_job_test (500), bf_continue (false: no effect, the model's backfill cycle never yields),
    sched_interval (0: the main scheduler runs at events only; > 0: also every sched_interval
    while jobs wait, as Slurm's periodic main scheduler does)
    fairshare against churn (docs/concepts.md): leaf_order (las), preempt_budget (3), flip_guard
    (None: the policy's window), max_reservations (0: no cap), fast_classes ([debug]: of the
    policy's classes, those listed)
    fairshare in overload (issue 20): requeue_within (None: the policy's window; 0: off): the
    requeue bound; a run preempted past protection and still waiting requeue_first_after (None:
    half of requeue_within; 0: at once) later goes first in its leaf, or at once when its leaf's
    oldest never-started waiting job has waited requeue_first_when_backlogged (None: 1 d when
    that is shorter than requeue_first_after, else off; 0: off); requeue_reserve_gpus (8; 0:
    off): such a run of at least this many GPUs, waiting half of requeue_within, reserves in its
    team's turn and its leaf's later jobs only backfill;
    reservation_backfill (true): a job whose estimated end comes before a reservation's expected
    start (by the running jobs' estimates) may use the reserved GPUs; larger_victims (false):
    fair-share preemption may take a run of more GPUs than the job it starts (the behaviour before)
    """

    preemption: Literal["over_served", "none"] = "over_served"
    gang_reserve_after: Seconds = 1800.0
    lookahead: Seconds = 3600.0
    deadline_slack: Seconds = 900.0
    requeue_delay: Seconds = 10.0
    preempt_backoff: Seconds = 300.0
    decay_half_life: Seconds = 7 * 86400.0
    decay_period: Seconds = 300.0
    decay_phase: Seconds = 0.0
    priority_max_age: Seconds = 7 * 86400.0
    weight_fairshare: Number = Field(default=10000.0, ge=0, le=limits.MAX_WEIGHT)
    weight_age: Number = Field(default=1000.0, ge=0, le=limits.MAX_WEIGHT)
    leaf_order: Literal["submit", "las", "shortest"] = "las"
    preempt_budget: Whole = Field(default=3, ge=0, le=limits.MAX_JOB_COUNT_KNOB)
    flip_guard: Seconds | None = None
    max_reservations: Whole = Field(default=0, ge=0, le=limits.MAX_JOB_COUNT_KNOB)
    fast_classes: tuple[Name, ...] | None = None
    requeue_within: Seconds | None = None
    requeue_first_after: Seconds | None = None
    requeue_first_when_backlogged: Seconds | None = None
    requeue_reserve_gpus: Whole = Field(default=8, ge=0, le=limits.MAX_JOB_GPUS)
    reservation_backfill: bool = True
    larger_victims: bool = False
    bf_interval: Seconds = 30.0
    bf_window: Seconds = 86400.0
    bf_resolution: Seconds = 60.0
    bf_max_job_test: Whole = Field(default=500, ge=1, le=limits.MAX_JOB_COUNT_KNOB)
    bf_continue: bool = False
    sched_interval: Seconds = 0.0

    @field_validator(
        "gang_reserve_after",
        "lookahead",
        "deadline_slack",
        "requeue_delay",
        "preempt_backoff",
        "bf_interval",
        "bf_window",
        "sched_interval",
        "decay_phase",
        mode="before",
    )
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return _dur(v)

    @field_validator(
        "flip_guard", "requeue_within", "requeue_first_after", "requeue_first_when_backlogged", mode="before"
    )
    @classmethod
    def _guard(cls, v: Any) -> Any:
        return None if v is None else _dur(v)

    @field_validator("bf_resolution", mode="before")
    @classmethod
    def _resolution(cls, v: Any) -> Any:
        return _dur(v, minimum=limits.MIN_BF_RESOLUTION)

    @field_validator("decay_half_life", "priority_max_age", mode="before")
    @classmethod
    def _positive_durations(cls, v: Any) -> Any:
        x = _dur(v)
        if not x > 0:
            raise ValueError(f"must be longer than 0, got {v!r}")
        return x

    @field_validator("decay_period", mode="before")
    @classmethod
    def _period(cls, v: Any) -> Any:
        return _dur(v, minimum=limits.MIN_DECAY_PERIOD)

    def knobs(self, window: float = 7 * 86400.0, classes: Iterable[str] = ("debug",)) -> Knobs:
        """The core's copy of these knobs (same names; the core imports no pydantic), with the
        defaults that depend on the policy resolved: `flip_guard` (None: `window`) and
        `fast_classes` (None: `debug` when the policy has that class). Policy.knobs() passes them."""
        values = self.model_dump()
        if values["flip_guard"] is None:
            values["flip_guard"] = window
        if values["requeue_within"] is None:
            values["requeue_within"] = window
        if values["requeue_first_after"] is None:
            values["requeue_first_after"] = values["requeue_within"] / 2
        if values["requeue_first_when_backlogged"] is None:  # the default acts where it can
            after = BACKLOGGED_DEFAULT
            values["requeue_first_when_backlogged"] = after if after < values["requeue_first_after"] else 0.0
        if values["fast_classes"] is None:
            values["fast_classes"] = tuple(c for c in ("debug",) if c in set(classes))
        return Knobs(**values)


class Policy(StrictModel):
    window: Seconds = 7 * 86400.0
    gpu_rates: dict[Name, Number] = Field(default_factory=dict)
    tree: tuple[GroupNode, ...] = Field(min_length=1)
    classes: dict[Name, JobClass] = Field(min_length=1, max_length=limits.MAX_CLASSES)
    exceptions: tuple[ShareException, ...] = Field(default=(), max_length=limits.MAX_GROUPS)
    gates: Gates = Gates()
    scheduling: Scheduling = Scheduling()
    slurm: SlurmSection | None = None  # read by the Slurm driver only (slurm_section.py)

    @model_validator(mode="before")
    @classmethod
    def _tree_shape(cls, data: Any) -> Any:
        """Depth and size of the tree, checked before pydantic walks it (it recurses per level)."""
        if isinstance(data, dict):
            _check_tree_shape(data.get("tree"))
        return data

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v: Any) -> float:
        w = _dur(v)
        if w <= 0:
            raise ValueError("the rolling window must be longer than 0")
        if w < limits.MIN_WINDOW:
            raise ValueError(f"the rolling window must be at least {fmt_duration(limits.MIN_WINDOW)}")
        return w

    @field_validator("gpu_rates")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for k, r in v.items():
            if not r > 0:
                raise AtPath((k,), f"the rate of {k} must be > 0 GPU-equivalents per GPU, got {r:g}")
            if not limits.MIN_RATE <= r <= limits.MAX_RATE:
                raise AtPath(
                    (k,),
                    f"the rate of {k} must be between {limits.MIN_RATE:g} and {limits.MAX_RATE:g} "
                    f"GPU-equivalents per GPU (the limits), got {r:g}",
                )
        return v

    @field_validator("tree")
    @classmethod
    def _unique_top(cls, v: tuple[GroupNode, ...]) -> tuple[GroupNode, ...]:
        _check_unique(v)
        return v

    def knobs(self) -> Knobs:
        """The scheduling knobs as the core reads them (Scheduling.knobs, with this policy's
        window and classes)."""
        return self.scheduling.knobs(self.window, self.classes)

    @model_validator(mode="after")
    def _requeue_first_after(self) -> Policy:
        s, k = self.scheduling, self.knobs()  # k: the defaults resolved (requeue_within, _first_after)
        within = k.requeue_within
        if s.requeue_first_after is not None and s.requeue_first_after > within:
            raise AtPath(
                ("scheduling", "requeue_first_after"),
                f"{s.requeue_first_after:g}s is longer than requeue_within ({within:g}s, the bound it"
                " serves): a requeued run would go first only after its bound",
            )
        backlogged = s.requeue_first_when_backlogged  # None: the default, off where it cannot act
        first_after = k.requeue_first_after
        if backlogged and (within == 0 or backlogged >= first_after):
            raise AtPath(
                ("scheduling", "requeue_first_when_backlogged"),
                f"{backlogged:g}s has no effect: "
                + (
                    "requeue_within is 0s (no requeued run goes first)"
                    if within == 0
                    else f"a requeued run goes first after requeue_first_after ({first_after:g}s) anyway"
                ),
            )
        return self

    @model_validator(mode="after")
    def _fast_classes(self) -> Policy:
        for i, c in enumerate(self.scheduling.fast_classes or ()):
            if c not in self.classes:
                raise AtPath(
                    ("scheduling", "fast_classes", i),
                    f"no class {c!r} in the policy (classes: {', '.join(self.classes)})",
                )
        return self

    @model_validator(mode="after")
    def _exception_groups(self) -> Policy:
        paths = TreeIndex.build(self.tree).paths if self.exceptions else ()
        known = set(paths)  # a set: 100,000 exceptions against 100,000 groups stay linear
        for i, ex in enumerate(self.exceptions):
            if ex.group not in known:
                raise AtPath(
                    ("exceptions", i, "group"),
                    f"no group {ex.group!r} in the tree (a group is its path, e.g. {paths[-1]!r})",
                )
        _check_share_ratio(self)
        if self.slurm is not None:
            tree = TreeIndex.build(self.tree)
            leaves = tuple(tree.paths[i] for i in tree.leaves)
            inner = tuple(p for p in tree.paths if p not in leaves)
            try:
                check_against_policy(self.slurm, leaves, inner, self.classes, self.gpu_rates)
            except AtPath as exc:
                raise AtPath(("slurm", *exc.rel), str(exc)) from None
        return self


def _check_tree_shape(tree: Any) -> None:
    """At most MAX_TREE_DEPTH levels and MAX_GROUPS nodes; raw data (not yet validated)."""
    if not isinstance(tree, list | tuple):
        return
    stack: list[tuple[Any, Loc, int]] = [(n, ("tree", i), 1) for i, n in enumerate(tree)]
    count = 0
    while stack:
        node, loc, depth = stack.pop()
        count += 1
        if count > limits.MAX_GROUPS:
            raise AtPath(("tree",), f"the tree has more than {limits.MAX_GROUPS:,} groups (the limit)")
        if depth > limits.MAX_TREE_DEPTH:
            raise AtPath(
                loc,
                f"the tree is nested more than {limits.MAX_TREE_DEPTH} levels deep here (the limit)",
            )
        children = node.get("children") if isinstance(node, dict) else None
        if isinstance(children, list | tuple):
            stack.extend((c, (*loc, "children", i), depth + 1) for i, c in enumerate(children))


def _check_share_ratio(policy: Policy) -> None:
    """The largest share (or extra share) at most MAX_SHARE_RATIO times the smallest."""
    shares: list[tuple[float, Loc]] = []

    def walk(nodes: tuple[GroupNode, ...], loc: Loc) -> None:
        for i, n in enumerate(nodes):
            shares.append((n.share, (*loc, i, "share")))
            walk(n.children, (*loc, i, "children"))

    walk(policy.tree, ("tree",))
    shares.extend(
        (ex.extra_share, ("exceptions", i, "extra_share")) for i, ex in enumerate(policy.exceptions)
    )
    low = min(shares, key=lambda s: s[0])
    high = max(shares, key=lambda s: s[0])
    if high[0] > low[0] * limits.MAX_SHARE_RATIO:
        raise AtPath(
            low[1],
            f"{low[0]:g} is {high[0] / low[0]:.3g} times smaller than the largest share "
            f"({key_path(high[1])}: {high[0]:g}): shares must be within a factor of "
            f"{limits.MAX_SHARE_RATIO:g} of each other (the limit)",
        )


def review_warnings(policy: Policy, where: str, now: dt.datetime, against: str) -> None:
    """Warn (InputWarning) about review dates before `now` (the epoch, or today for `check`)."""

    def walk(nodes: tuple[GroupNode, ...], loc: Loc) -> None:
        for i, n in enumerate(nodes):
            if n.review is not None and n.review < now.date():
                warn(
                    where,
                    key_path((*loc, i, "review")),
                    f"the review date {n.review.isoformat()} of {n.name} is past ({against})",
                )
            walk(n.children, (*loc, i, "children"))

    walk(policy.tree, ("tree",))


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
