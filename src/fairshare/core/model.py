"""The core's data: what a real scheduler can know of nodes, jobs and the policy's knobs.

Plain frozen dataclasses, standard library only, so that a driver, a test or a notebook can import
the core alone (DESIGN.md §4). A job is its *request* (GPUs, shape, types, class contract, deadline,
label) and its declared run-time *estimate* (FORMATS.md `estimate`); its true run time and hang
point are the simulator's (fairshare.inputs.workload.Job) and never reach the core or the engine.

Float tolerances are named here once, each with what it compares:

    TIME_EPS     seconds; and rates in GPU-equivalents per second inside one pass: two values this
                 close are equal (protection ends, latest starts, drain deadlines, over-service,
                 a priority's or a service ratio's zero denominator)
    STALL_EPS    seconds: a run that has not progressed for max_stall − STALL_EPS is hung that long;
                 progress within it of `stall_after` has reached it
    LEDGER_EPS   GPU-equivalents (rates) and GPU-equivalent seconds (integrals): water-filling's
                 demand and capacity tolerance, "owed nothing" in the metrics, exception expiry
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

TIME_EPS = 1e-9
STALL_EPS = 1e-6
LEDGER_EPS = 1e-6

# scheduling.requeue_first_when_backlogged's default (issue 20; docs/policy.md "2026-12-07 (5)")
BACKLOGGED_DEFAULT = 86400.0

LABELS = ("high", "medium", "low")
LABEL_RANK = {name: i for i, name in enumerate(LABELS)}  # high = 0 goes first


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the cluster: its GPUs (of one type), CPUs, memory and topology block."""

    name: str
    pool: str
    gpus: int
    gpu_type: str
    cpus: float
    mem_gb: float
    block: str

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # immutable: copies of an engine state share it

    def as_json(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "gpus": self.gpus,
            "gpu_type": self.gpu_type,
            "block": self.block,
            "cpus": self.cpus,
            "mem_gb": self.mem_gb,
        }


def charge_on(
    gpus: int, cpus: float | None, mem_gb: float | None, node: Node, rates: Mapping[str, float]
) -> float:
    """rate[type] x max(gpus, cpus / cpus_per_gpu, mem / mem_per_gpu): DRF priced as billing."""
    dominant = float(gpus)
    if cpus and node.cpus:
        dominant = max(dominant, cpus / (node.cpus / node.gpus))
    if mem_gb and node.mem_gb:
        dominant = max(dominant, mem_gb / (node.mem_gb / node.gpus))
    return rates.get(node.gpu_type, 1.0) * dominant


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A job as the scheduler sees it: every contract value resolved. Times in seconds on the
    driver's clock. `estimate` is the declared run time (like a Slurm time limit)."""

    id: str
    submit: float
    group: str
    leaf: int  # TreeIndex node id of the group
    user: str | None
    cls: str
    gpus: int
    nodes: int
    gpu_types: tuple[str, ...] | None  # None = any type
    cpus: float | None
    mem_gb: float | None
    estimate: float
    label: str
    deadline: float | None
    protected: float
    protected_capped: bool
    resumable: bool
    checkpoint: float  # 0 when not resumable
    restore: float
    startup: float
    max_stall: float
    charge: float  # pending charge: lowest over the pools it may use
    seq: int  # position in submit order (ties broken by input order)
    # the class's `progress: required`: a run that never reports progress is stalled after max_stall
    progress_required: bool = False

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # immutable: copies of an engine state share it

    @property
    def per_node(self) -> int:
        return self.gpus // self.nodes

    @property
    def label_rank(self) -> int:
        """0 for high, 1 medium, 2 low."""
        return LABEL_RANK[self.label]

    def charge_on(self, node: Node, rates: Mapping[str, float]) -> float:
        return charge_on(self.gpus, self.cpus, self.mem_gb, node, rates)


@dataclass(frozen=True, slots=True)
class Knobs:
    """The policy's scheduling knobs (policy file `scheduling:`; defaults documented there).

    gang_reserve_after  a job that cannot start after waiting this long gets capacity reserved
    lookahead           L in the fair-share priority (fairness.py)
    deadline_slack      a deadline job becomes urgent this long before its latest start
    requeue_delay       a pass is scheduled this long after every preemption
    preempt_backoff     a job that found no victims tries again only on the next grid point after
                        one full period (deadline preemption is exempt)
    preemption          "over_served" (fair-share preemption on) or "none"
    slurm-multifactor (Slurm's names): decay_half_life, decay_period, priority_max_age,
    weight_fairshare, weight_age; decay_phase: the decay ticks fall at decay_phase + k·decay_period
    on the replay clock (a site's slurmctld ticks from its boot, BOOT_TIME)
    fairshare against churn (issue 10; docs/concepts.md "Churn and the order within a leaf"):
    leaf_order          a leaf's pending jobs in "submit" order, by least attained service
                        ("las": GPU-seconds run so far, then submit) or "shortest" remaining
                        estimate first
    preempt_budget      a job preempted this many times is no victim any more (0: no budget)
    flip_guard          a side may not take from a side that took from it this recently (seconds;
                        the policy's window by default; 0: off)
    max_reservations    jobs of one pass that may hold GPUs (0: every waiting job that qualifies)
    fast_classes        classes tried first in every pass (the fast lane), e.g. debug
    requeue_within      (issue 20) the requeue bound (the policy's window by default; 0: off)
    requeue_first_after a run preempted and still waiting this long later goes first in its leaf's
                        order, ahead of the las/shortest keys (half of requeue_within by default;
                        0: at once)
    requeue_first_when_backlogged (issue 20) such a run goes first at once when its leaf's oldest
                        waiting job that never started has waited this long (1 d by default,
                        when shorter than requeue_first_after; 0: off; engine/requeue.py)
    requeue_reserve_gpus (issue 20) a requeued run of at least this many GPUs that went first in its
                        leaf and waited half of requeue_within reserves in its team's turn; its
                        leaf's later jobs in that pass only backfill (8 by default: a whole node
                        of the usual 8-GPU servers; 0: off; scheduler.py _reserves_in_turn)
    reservation_backfill (issue 20) a job may start on GPUs reserved for another job when its
                        estimated end comes by the time the reservation's job is expected to start
                        (the running jobs' estimated ends on those nodes; Slurm's backfill rule)
    larger_victims      (issue 20) fair-share preemption may take a run of more GPUs than the job
                        it starts (off: only fast classes may; the behaviour before when on)
    slurm-multifactor's backfill (Slurm's names): bf_interval, bf_window, bf_resolution,
    bf_max_job_test, bf_continue (no effect: the model's backfill cycle never yields); its main
    scheduler's periodic pass: sched_interval (0: at events only)
    """

    gang_reserve_after: float = 1800.0
    lookahead: float = 3600.0
    deadline_slack: float = 900.0
    requeue_delay: float = 10.0
    preempt_backoff: float = 300.0
    preemption: str = "over_served"
    decay_half_life: float = 7 * 86400.0
    decay_period: float = 300.0
    decay_phase: float = 0.0
    priority_max_age: float = 7 * 86400.0
    weight_fairshare: float = 10000.0
    weight_age: float = 1000.0
    leaf_order: str = "las"
    preempt_budget: int = 3
    flip_guard: float = 7 * 86400.0
    max_reservations: int = 0
    fast_classes: tuple[str, ...] = ("debug",)
    requeue_within: float = 7 * 86400.0
    requeue_first_after: float = 3.5 * 86400.0
    requeue_first_when_backlogged: float = BACKLOGGED_DEFAULT
    requeue_reserve_gpus: int = 8
    reservation_backfill: bool = True
    larger_victims: bool = False
    bf_interval: float = 30.0
    bf_window: float = 86400.0
    bf_resolution: float = 60.0
    bf_max_job_test: int = 500
    bf_continue: bool = False
    sched_interval: float = 0.0


@dataclass(frozen=True, slots=True)
class ResolvedException:
    """A policy exception placed on the driver's clock: `extra_share` on tree node `node` until
    `expires_t` (exclusive)."""

    node: int
    group: str
    extra_share: float
    expires_t: float
    approver: str | None
    reason: str | None
