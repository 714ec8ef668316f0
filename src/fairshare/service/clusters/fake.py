"""`FakeCluster`: the backend interface in memory, scripted by a test (DESIGN §5 "an in-repo fake").

A test pushes observations (submissions, finishes, hangs, drains, ...) with the instants it wants;
`observe` reports every observation it holds up to `until`, again and again, as a cluster that
re-reads its state would (the loop applies each key once). `act` records what it was told, confirms
starts and preemptions (also reported again later) and refuses the starts of jobs in `refuse`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...core.model import Node
from ...core.snapshot import Preempt, Start
from .backend import Cancelled, Failure, Observation, Outcome, Preempted, Started, Submitted, in_order


class FakeCluster:
    name = "fake"
    places_jobs = True
    accepts_submissions = True

    def __init__(self, nodes: Sequence[Node]) -> None:
        self._nodes = tuple(nodes)
        self.held: list[Observation] = []
        self.acted: list[tuple[float, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []
        self.refuse: set[str] = set()

    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def push(self, *observations: Observation) -> None:
        self.held.extend(observations)

    def observe(self, since: float, until: float) -> list[Observation]:
        return in_order([o for o in self.held if o.t <= until])

    def next_time(self) -> float | None:
        return None

    def not_startable(self) -> frozenset[str]:
        return frozenset()

    def resume(self, t: float) -> None:
        return None

    def act(
        self, preempts: Sequence[Preempt], starts: Sequence[Start], order: Sequence[str], t: float
    ) -> Outcome:
        self.acted.append((t, tuple(p.job for p in preempts), tuple(s.job for s in starts), tuple(order)))
        confirmed: list[Observation] = [Preempted(t, p.job, p.reason, p.by, 0.0, 0.0) for p in preempts]
        failed = []
        for s in starts:
            if s.job in self.refuse:
                failed.append(Failure(s.job, "start", "refused by the test"))
            else:
                confirmed.append(Started(t, s.job, tuple(s.alloc), s.charge))
        self.held.extend(confirmed)
        return Outcome(confirmed, failed)

    def submit(self, job: str, spec: Mapping[str, Any], t: float, by: str = "api") -> float:
        self.held.append(Submitted(t, job, dict(spec)))
        return t

    def cancel(self, job: str, t: float, by: str) -> None:
        self.held.append(Cancelled(t, job, by))
