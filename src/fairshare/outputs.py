"""Writing a replay's output folder (FORMATS.md "Outputs") and reading it back for `explain`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .cluster import Cluster
from .sim import ReplayOutput


def write_replay(out: Path, cluster: Cluster, policy_text: str, output: ReplayOutput) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "cluster.json").write_text(json.dumps([n.as_json() for n in cluster.nodes], indent=1) + "\n")
    (out / "events.jsonl").write_text("\n".join(output.events) + "\n")
    (out / "decisions.jsonl").write_text("\n".join(output.decisions) + ("\n" if output.decisions else ""))
    (out / "metrics.json").write_text(json.dumps(output.result.metrics, indent=2, allow_nan=False) + "\n")
    (out / "series.json").write_text(json.dumps(output.result.series.as_json()) + "\n")
    (out / "policy.yaml").write_text(policy_text)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
