"""The scheduler loop's settings (`serve` builds them from its options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .requests import CrashPoints


@dataclass
class LoopOptions:
    strategy: str = "fairshare"
    poll_s: float = 5.0  # wall seconds between looks at a cluster that cannot say when it changes
    refresh_s: float = 1.0  # wall seconds between views while idle (the ledger moves with time)
    publish_s: float = 0.25  # at most this stale while busy
    forecast_s: float = 1.0  # wall seconds between forecasts (0.2 when a new job has none yet)
    forecast_passes: int = 3000
    follow_s: float = 1.0  # a reader's look at the journal
    speed: float = 1.0  # sim seconds per wall second (the demo's clock), for sleeping
    retry_max_s: float = 60.0  # wall seconds: the longest wait between retries of an unreadable cluster
    # the writer's checkpoints of the engine (fairshare.service.loop.checkpoint): one after a cycle once
    # this many journal events or wall seconds have passed since the last one (0: not by that rule;
    # both 0: none); the newest `checkpoint_keep` are kept
    checkpoint_events: int = 50_000
    checkpoint_s: float = 3600.0
    checkpoint_keep: int = 3
    crash: CrashPoints = field(default_factory=lambda: CrashPoints(None))
