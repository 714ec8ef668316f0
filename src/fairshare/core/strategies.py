"""Named scheduling policies: each is a bundle of small strategy functions chosen by name.

    fifo             submit order, first fit (any later job that fits starts), no reservation,
                     no preemption (DESIGN.md §3)
    priority-labels  (label, submit) order, first fit; a higher label may preempt a lower one past
                     its protected window when it cannot otherwise fit (reason `label`)
    slurm-multifactor  Slurm's priority/multifactor: Fair Tree fair-share over usage decayed with
                     a half-life (recalculated every 5 min) plus an age factor; Slurm's main
                     scheduler (strict priority: the partition blocks behind its first pending
                     job) and conservative backfill (every bf_interval after a change, each tested
                     job reserves its earliest start by time limits = estimates; backfill.py); no
                     preemption (PreemptType=none). The incumbent a lab should compare with.
    slurm-multifactor-firstfit  the same priority, first fit in that order (any later job that
                     fits starts), no reservation: the model before issue 10, kinder to small jobs
                     and harsher to large ones than Slurm is
    fairshare        debt order down the budget tree, a leaf's jobs in knobs.leaf_order; deadline
                     class reservation; the fast lane (knobs.fast_classes); reservations after a
                     bounded wait; preemption of over-served groups' runs past protection (reason
                     `fair_share`), within the preemption budget and the flip guard

The execution contract is enforced under every policy, because it belongs to the jobs and the
cluster, not to the queue order: runs on a node past its drain deadline are preempted (`drain`),
and a run that has made no progress for its class's `max_stall` is preempted (`no_progress`, the
hang watchdog, as a time limit would end it on a real cluster). The baselines differ from
fairshare in ordering, reservation and fairness preemption only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .fairness import PassPriorities
from .ordering import (
    DebtOrder,
    label_order,
    multifactor_order,
    rank_debt,
    rank_labels,
    rank_multifactor,
    rank_submit,
    submit_order,
)
from .snapshot import QueueKey, Snapshot
from .victims import NO_VICTIMS, RULES, NoVictims


class Order(Protocol):
    def next(self) -> tuple[QueueKey, str] | None: ...
    def started(self, qk: QueueKey) -> None: ...
    def failed(self, qk: QueueKey) -> None: ...
    def used_changed(self, leaf: int) -> None: ...


OrderFactory = Callable[[Snapshot, set[str], PassPriorities], Order]  # prio: the pass's priorities


@dataclass(frozen=True)
class Strategy:
    name: str
    order: OrderFactory
    rank: Callable[[Snapshot], list[str]]  # the whole queue as if each job started (decide's explain)
    victims: NoVictims  # the victim rule (fairshare.core.victims)
    watchdog: bool  # preempt hung jobs after max_stall (no_progress)
    deadline_reservation: bool
    gang_reservation: bool
    usage_model: Literal["window", "decay"] = "window"  # which ledger the driver keeps
    phases: tuple[str, ...] = ("forced", "ordered")  # scheduler.PHASES, in order
    leaf_order: bool = False  # the engine orders a leaf's queues by knobs.leaf_order
    max_preempt_attempts: int = 4
    max_victim_candidates: int = 512


def _fifo(snap: Snapshot, skip: set[str], prio: PassPriorities) -> Order:
    return submit_order(snap, skip)


def _labels(snap: Snapshot, skip: set[str], prio: PassPriorities) -> Order:
    return label_order(snap, skip)


def _multifactor(snap: Snapshot, skip: set[str], prio: PassPriorities) -> Order:
    return multifactor_order(snap, skip)


def _debt(snap: Snapshot, skip: set[str], prio: PassPriorities) -> Order:
    return DebtOrder(snap, skip, prio)


STRATEGIES: dict[str, Strategy] = {
    "fairshare": Strategy(
        "fairshare",
        _debt,
        rank_debt,
        RULES["over_served"],
        watchdog=True,
        deadline_reservation=True,
        gang_reservation=True,
        phases=("forced", "deadlines", "fast_lane", "ordered"),
        leaf_order=True,
    ),
    "fifo": Strategy(
        "fifo",
        _fifo,
        rank_submit,
        NO_VICTIMS,
        watchdog=True,
        deadline_reservation=False,
        gang_reservation=False,
    ),
    "priority-labels": Strategy(
        "priority-labels",
        _labels,
        rank_labels,
        RULES["lower_label"],
        watchdog=True,
        deadline_reservation=False,
        gang_reservation=False,
    ),
    "slurm-multifactor": Strategy(
        "slurm-multifactor",
        _multifactor,
        rank_multifactor,
        NO_VICTIMS,
        watchdog=True,
        deadline_reservation=False,
        gang_reservation=False,
        usage_model="decay",
        phases=("forced", "slurm"),
    ),
    "slurm-multifactor-firstfit": Strategy(
        "slurm-multifactor-firstfit",
        _multifactor,
        rank_multifactor,
        NO_VICTIMS,
        watchdog=True,
        deadline_reservation=False,
        gang_reservation=False,
        usage_model="decay",
    ),
}


def get_strategy(name: str, preemption: str = "over_served") -> Strategy:
    try:
        s = STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r} (known: {', '.join(STRATEGIES)})") from None
    if name == "fairshare" and preemption == "none":
        return dataclasses.replace(s, victims=NO_VICTIMS)
    return s
