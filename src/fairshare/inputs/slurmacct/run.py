"""Read the four inputs, build the site folder, write it into the (staged) output folder."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError
from ._text import Anonymizer, BadRows, sha256_file
from .assoc import Associations, read_assoc
from .nodes import read_nodes
from .sacct import Record, SacctFile, read_sacct
from .settings import Settings, read_settings
from .site import REASONS, Options, build_site, import_json


@dataclass
class Sources:
    sacct: list[Path]
    assoc: Path | None
    config: Path | None
    nodes: Path | None


def _text(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(option, str(path), f"cannot be read: {exc.strerror or exc}") from None


def run_import(
    src: Sources,
    out: Path,
    tz: dt.tzinfo,
    *,
    skip_bad: bool,
    anonymizer: Anonymizer,
    class_from: str,
    leaves: str,
    start: float | None,
    end: float | None,
) -> list[str]:
    """Write the site folder's files into `out`; return the lines to print."""
    sources: dict[str, dict[str, str]] = {}
    bads: list[BadRows] = []

    def bad_rows(path: Path) -> BadRows:
        b = BadRows(str(path), skip_bad)
        bads.append(b)
        return b

    assocs: Associations | None = None
    if src.assoc is not None:
        assocs = read_assoc(_text(src.assoc, "--assoc"), str(src.assoc), bad_rows(src.assoc))
        sources["assoc"] = {
            "path": str(src.assoc),
            "sha256": sha256_file(str(src.assoc)),
            "form": assocs.form,
        }
    settings: Settings | None = None
    if src.config is not None:
        settings = read_settings(_text(src.config, "--config"), str(src.config))
        sources["config"] = {
            "path": str(src.config),
            "sha256": sha256_file(str(src.config)),
            "form": settings.form,
        }
    if src.nodes is None:
        raise InputError("--nodes", "", "is required")
    form, nodes = read_nodes(_text(src.nodes, "--nodes"), str(src.nodes), bad_rows(src.nodes))
    sources["nodes"] = {"path": str(src.nodes), "sha256": sha256_file(str(src.nodes)), "form": form}
    infos: list[SacctFile] = []

    def records() -> Iterator[Record]:
        for path in src.sacct:
            info = SacctFile(str(path))
            infos.append(info)
            try:
                with open(path, encoding="utf-8", errors="replace", newline="") as f:
                    yield from read_sacct(f, str(path), tz, bad_rows(path), info)
            except OSError as exc:
                raise InputError("--sacct", str(path), f"cannot be read: {exc.strerror or exc}") from None

    where = {"sacct": str(src.sacct[0]), "nodes": str(src.nodes)}
    if src.assoc is not None:
        where["assoc"] = str(src.assoc)
    if src.config is not None:
        where["config"] = str(src.config)
    site = build_site(
        records(),
        lambda: max(i.latest for i in infos),
        assocs,
        settings,
        nodes,
        Options(
            class_from=class_from, leaves=leaves, anonymizer=anonymizer, span_start=start, span_end=end, tz=tz
        ),
        where,
    )
    for i, info in enumerate(infos):
        key = "sacct" if len(infos) == 1 else f"sacct.{i + 1}"
        sources[key] = {"path": info.path, "sha256": sha256_file(info.path), "form": info.form}
    summary = site.summary
    bad = sum(i.bad for i in infos)
    if bad:
        summary["jobs"]["skipped"]["bad_row"] = bad
        summary["jobs"]["skipped"] = dict(sorted(summary["jobs"]["skipped"].items()))
    summary["sources"] = dict(sorted(sources.items()))
    summary["steps_skipped"] = sum(i.steps for i in infos)
    other_bad = sum(b.count for b in bads) - bad
    if other_bad:
        summary["bad_rows_skipped"] = other_bad
    for name, text in site.files.items():
        (out / name).write_text(text, encoding="utf-8")
    (out / "import.json").write_text(import_json(summary), encoding="utf-8")
    return _report(summary)


def _report(summary: dict[str, object]) -> list[str]:
    jobs = summary["jobs"]
    assert isinstance(jobs, dict)
    span = summary["span"]
    assert isinstance(span, dict)
    lines = [
        f"imported {jobs['imported']:,} of {jobs['read']:,} jobs ({span['start']} .. {span['end']}); "
        f"{summary['steps_skipped']:,} job steps skipped (a step runs inside its job's allocation)"
    ]
    skipped = jobs["skipped"]
    assert isinstance(skipped, dict)
    for reason in REASONS:
        if skipped.get(reason):
            lines.append(f"  skipped {skipped[reason]:,}: {REASONS[reason]} ({reason})")
    nodes = summary["nodes"]
    assert isinstance(nodes, dict)
    cpu_only = summary.get("nodes_without_gpus", 0)
    lines.append(
        f"nodes: {len(nodes)} with GPUs" + (f", {cpu_only} without GPUs left out" if cpu_only else "")
    )
    lines.append(
        "wrote policy.yaml cluster.yaml workload.csv history.csv incumbent.yaml import.json "
        "(fill in the owners, review dates and class contracts in policy.yaml; `fairshare check` flags them)"
    )
    return lines
