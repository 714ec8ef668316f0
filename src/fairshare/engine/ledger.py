"""The usage ledger: owed by hierarchical water-filling, delivered, debt over a rolling window.

Definitions (DESIGN.md §2, FORMATS.md):

    owed_g(t)      C(t) split over tree nodes with demand by water-filling (fairshare.engine.owed).
    delivered_g(t) the running charge of g's leaves.
    debt_g(t)      ∫ owed_g − ∫ delivered_g over the rolling window W. > 0 under-served, < 0 over-served.

The window is a ring of B buckets of width W / B per tree node with running sums, so an update
costs O(tree nodes) and never depends on the window length or the number of jobs. The debt read at
time t covers the last B − 1 whole buckets plus the current partial one: a window between W − W/B and W.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Vec = npt.NDArray[np.float64]


class Ledger:
    """Rolling-window owed/delivered per tree node, advanced by the driver (no clock of its own).

    Usage: `set_rates(owed, delivered)` whenever they change, `advance(t)` to integrate the current
    rates up to t, `debt()` for the window debt per node in GPU-equivalent seconds.
    """

    def __init__(self, n_nodes: int, window: float, buckets: int = 168, start: float = 0.0) -> None:
        if window <= 0 or buckets < 2:
            raise ValueError("window must be > 0 and buckets >= 2")
        self.width = window / buckets
        self.n_buckets = buckets
        # owed and delivered side by side (row 0 and row 1), so each step is one array operation
        self.ring: Vec = np.zeros((buckets, 2, n_nodes))
        self.sums: Vec = np.zeros((2, n_nodes))
        self.rate: Vec = np.zeros((2, n_nodes))
        self.t = start
        self.bucket = int(start // self.width)

    @property
    def owed_ring(self) -> Vec:
        view: Vec = self.ring[:, 0]
        return view

    @property
    def deliv_ring(self) -> Vec:
        view: Vec = self.ring[:, 1]
        return view

    @property
    def owed_sum(self) -> Vec:
        view: Vec = self.sums[0]
        return view

    @property
    def deliv_sum(self) -> Vec:
        view: Vec = self.sums[1]
        return view

    def set_rates(self, owed: Sequence[float] | Vec, delivered: Sequence[float] | Vec) -> None:
        self.rate = np.array([owed, delivered], dtype=np.float64)

    def set_rate_rows(self, rows: Vec) -> None:
        """set_rates from a (2, nodes) array of owed and delivered rates, kept as it is (the
        caller does not change it afterwards)."""
        self.rate = rows

    def advance(self, t: float) -> None:
        """Integrate the current rates from the ledger's time to t, rolling buckets as it goes."""
        if t <= self.t:
            return
        first = int(t // self.width) - self.n_buckets + 1  # oldest bucket still in the window at t
        if first > self.bucket:
            # Usage before `first` would be dropped again by t: skip it instead of integrating it
            # (keeps a gap longer than the window at O(buckets), and out of the sums).
            self._roll(first)
            self.t = first * self.width
        while True:
            edge = (self.bucket + 1) * self.width
            stop = min(t, edge)
            dt = stop - self.t
            if dt > 0:
                add = self.rate * dt
                self.ring[self.bucket % self.n_buckets] += add
                self.sums += add
            self.t = stop
            if t < edge:
                return
            self._roll(self.bucket + 1)  # one bucket at a time: each gets its own part of the gap

    def _roll(self, target: int) -> None:
        """Move to bucket `target`, dropping buckets that leave the window."""
        steps = target - self.bucket
        if steps >= self.n_buckets:
            self.ring[:] = 0.0
            self.sums[:] = 0.0
        else:
            for b in range(self.bucket + 1, target + 1):
                slot = b % self.n_buckets
                self.sums -= self.ring[slot]
                self.ring[slot] = 0.0
        self.bucket = target

    def debt(self) -> Vec:
        """Window debt per node (owed − delivered), GPU-equivalent seconds."""
        debt: Vec = self.sums[0] - self.sums[1]
        return debt

    def owed_in_window(self) -> Vec:
        return self.owed_sum.copy()

    def delivered_in_window(self) -> Vec:
        return self.deliv_sum.copy()


class DecayLedger:
    """Slurm-style usage with exponential decay (priority/multifactor, PriorityDecayHalfLife).

    Usage is recalculated every `period` (PriorityCalcPeriod, default 5 min): at each boundary
    `usage = usage · d + (usage charged during the period)` with `d = 2^(−period / half_life)`.
    Readers see the usage as of the last boundary, as Slurm's priorities do between recalculations.
    A gap of k whole periods at a constant rate r is applied in closed form:
    `usage · d^k + r · period · (1 − d^k) / (1 − d)`, so the cost does not grow with the gap.

    The boundaries fall at `phase + k · period` (k an integer; phase taken modulo the period).
    Slurm's decay thread ticks every PriorityCalcPeriod from its start, that is from slurmctld's
    boot: a site's history is replayed with the phase of its BOOT_TIME on the replay clock, so
    that the model's priorities change when the real ones did (a tick a few seconds off reorders
    the queue of a busy minute).
    """

    def __init__(
        self, n_nodes: int, half_life: float, period: float, start: float = 0.0, phase: float = 0.0
    ) -> None:
        if half_life <= 0 or period <= 0:
            raise ValueError("half_life and period must be > 0")
        self.period = period
        self.phase = phase % period
        self.d = 0.5 ** (period / half_life)
        self.usage: Vec = np.zeros(n_nodes)
        self.accum: Vec = np.zeros(n_nodes)
        self.rate: Vec = np.zeros(n_nodes)
        self.t = start
        self.index = math.floor((start - self.phase) / period)

    def set_rate(self, rate: Sequence[float] | Vec) -> None:
        self.rate = np.asarray(rate, dtype=np.float64)

    def advance(self, t: float) -> None:
        while t > self.t:
            edge = (self.index + 1) * self.period + self.phase
            if t < edge:
                self.accum += self.rate * (t - self.t)
                self.t = t
                return
            self.accum += self.rate * (edge - self.t)
            self.usage = self.usage * self.d + self.accum
            self.accum = np.zeros_like(self.accum)
            self.t = edge
            self.index += 1
            k = int((t - self.t) // self.period)
            if k > 0:
                dk = self.d**k
                self.usage = self.usage * dk + self.rate * self.period * (1 - dk) / (1 - self.d)
                self.t += k * self.period
                self.index += k
