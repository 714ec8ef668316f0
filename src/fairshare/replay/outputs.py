"""Writing a replay's output folder (FORMATS.md "Outputs") and reading it back for `explain`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..inputs.cluster import Cluster
from .results import ReplayOutput


def write_replay(out: Path, cluster: Cluster, policy_text: str, output: ReplayOutput) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # UTF-8 whatever the locale: names may be non-ASCII, and the same replay gives the same bytes
    utf8 = "utf-8"
    nodes = json.dumps([n.as_json() for n in cluster.nodes], indent=1)
    (out / "cluster.json").write_text(nodes + "\n", encoding=utf8)
    (out / "events.jsonl").write_text("\n".join(output.events) + "\n", encoding=utf8)
    decisions = "\n".join(output.decisions) + ("\n" if output.decisions else "")
    (out / "decisions.jsonl").write_text(decisions, encoding=utf8)
    metrics = json.dumps(output.result.metrics, indent=2, allow_nan=False)
    (out / "metrics.json").write_text(metrics + "\n", encoding=utf8)
    (out / "series.json").write_text(json.dumps(output.result.series.as_json()) + "\n", encoding=utf8)
    (out / "policy.yaml").write_text(policy_text, encoding=utf8)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
