"""The options `fairshare serve` runs with, and those of its Slurm backend: plain data, in a module
of their own so that the server, the Slurm start-up and the Slurm backend all import them from
below (no import circle between those modules)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ServeOptions:
    db: str | None
    policy: Path | None
    cluster: str | None
    speed: float | None
    host: str = "127.0.0.1"
    port: int = 8080
    demo: bool = False
    strategy: str = "fairshare"
    seed: int = 1
    metrics_public: bool = False
    auth_cache_s: float = 5.0
    crash: str | None = None
    dry_run: bool = False  # slurm: audit what it would do, change nothing in Slurm
    interval: float | None = None  # slurm: seconds between looks at Slurm (default 15)
    slurm_timeout: float = 30.0  # slurm: seconds for each Slurm command
    checkpoint_events: int | None = None  # journal events between checkpoints (None: LoopOptions')


@dataclass
class SlurmOptions:
    dry_run: bool = False
    grace_s: float = 30.0  # a job gone from squeue without an end in accounting: ended after this
    lookback_s: float = 0.0  # first start on an empty database: charge runs back this far
    margin_s: float = 120.0  # accounting is read from this long before the last cycle
