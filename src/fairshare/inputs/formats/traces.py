"""Where the public traces live: `$FAIRSHARE_TRACES/<trace>/...`.

FAIRSHARE_TRACES, when set, is the folder holding `philly/` and `alibaba-openb/`. When it is not set,
the folder is `../shared/traces` relative to the current directory if that exists, else relative to
the source checkout this package runs from (the folder holding `pyproject.toml` above `src/`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError

ENV = "FAIRSHARE_TRACES"
DEFAULT = Path("..") / "shared" / "traces"


@dataclass(frozen=True)
class Trace:
    name: str
    workload: str  # relative to the traces folder
    workload_format: str
    description: str


TRACES: dict[str, Trace] = {
    "philly": Trace(
        "philly", "philly/philly.csv", "philly", "Microsoft Philly 2017: 82,247 jobs of 15 teams"
    ),
    "openb": Trace(
        "openb",
        "alibaba-openb/openb_pod_list_default.csv",
        "openb",
        "Alibaba GPU cluster 2023 (openb): 8,152 pods on 1,213 heterogeneous GPU nodes",
    ),
}


def _checkout_root() -> Path | None:
    here = Path(__file__).resolve()
    for up in here.parents:
        if (up / "pyproject.toml").is_file() and (up / "src" / "fairshare").is_dir():
            return up
    return None


def traces_root() -> tuple[Path, str]:
    """The traces folder and how it was chosen (for messages)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env), f"{ENV}={env}"
    local = DEFAULT
    if local.is_dir():
        return local, f"{ENV} is not set; default {DEFAULT} from the current directory"
    root = _checkout_root()
    if root is not None and (root / DEFAULT).is_dir():
        return (root / DEFAULT).resolve(), f"{ENV} is not set; default {DEFAULT} from the checkout {root}"
    return local, f"{ENV} is not set; default {DEFAULT} (from the current directory)"


def trace_file(name: str) -> tuple[Path, Trace]:
    """The workload file of a named trace; an InputError naming the path and FAIRSHARE_TRACES if absent."""
    trace = TRACES.get(name)
    if trace is None:
        raise InputError("--trace", name, f"unknown trace (known: {', '.join(TRACES)})")
    root, how = traces_root()
    path = root / trace.workload
    if not path.is_file():
        raise InputError(
            str(path),
            "",
            f"trace file not found ({how}); set {ENV} to the folder holding "
            f"{trace.workload.split('/')[0]}/ (the traces are read where they are, never copied)",
        )
    return path, trace
