"""Settings: `scontrol show config` output or the slurm.conf file itself, and the incumbent.yaml
they give (the site's slurm-multifactor settings; /work/coord/site-contract.md).

Form: `Key = value` lines (scontrol) or `Key=value` lines with `#` comments (slurm.conf; keys are
case-insensitive there, and `NodeName=`/`PartitionName=` lines hold several pairs). Slurm's
defaults fill what a slurm.conf leaves out.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from ...errors import InputError
from ...slurm.parse import parse_config, parse_duration_text
from ._text import at, fmt_duration, time_parser

# Slurm's defaults for the settings the incumbent reads (slurm.conf(5), 22.05 through 24.x)
DEFAULTS = {
    "prioritytype": "priority/basic",
    "prioritydecayhalflife": "7-0",
    "prioritycalcperiod": "5",
    "prioritymaxage": "7-0",
    "priorityweightfairshare": "0",
    "priorityweightage": "0",
    "priorityweightjobsize": "0",
    "priorityweightpartition": "0",
    "priorityweightqos": "0",
    "priorityweightassoc": "0",
    "priorityflags": "",
    "schedulerparameters": "",
    "schedulertype": "sched/backfill",
}
#: SchedulerParameters the model implements, with Slurm's defaults.
BF_DEFAULTS = {"bf_interval": "30", "bf_window": "1440", "bf_resolution": "60", "bf_max_job_test": "500"}
SCHED_INTERVAL_DEFAULT = "60"


@dataclass
class Settings:
    form: str
    values: dict[str, str]  # lower-case key -> value as written
    partitions: dict[str, dict[str, str]] = field(default_factory=dict)  # slurm.conf only
    node_lines: list[tuple[int, str]] = field(default_factory=list)  # slurm.conf NodeName lines

    def get(self, key: str) -> str:
        v = self.values.get(key.lower())
        if v is None or v in ("(null)", "N/A"):
            return DEFAULTS.get(key.lower(), "")
        return v

    def partition_max_time(self, partition: str) -> float | None:
        """A partition's MaxTime in seconds (None: unknown or UNLIMITED)."""
        p = self.partitions.get(partition)
        if p is None:
            return None
        text = p.get("maxtime") or self.partitions.get("default", {}).get("maxtime", "")
        secs = parse_duration_text(text) if text else None
        return None if secs is None else float(secs)


_SCONTROL = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\s+= ")


def is_scontrol_config(text: str) -> bool:
    return any(_SCONTROL.match(line) for line in text.splitlines()[:50])


def read_settings(text: str, where: str) -> Settings:
    if is_scontrol_config(text):
        values = {k.lower(): v for k, v in parse_config(text).items()}
        return Settings("scontrol show config", values)
    return read_slurm_conf(text, where)


def pairs(line: str) -> dict[str, str]:
    """`NodeName=n[1-4] CPUs=16 Gres=gpu:a100:8` -> {'nodename': 'n[1-4]', ...}."""
    out: dict[str, str] = {}
    for key, value in re.findall(r"(\w+)=(\"[^\"]*\"|\S*)", line):
        out.setdefault(key.lower(), value.strip('"'))
    return out


def read_slurm_conf(text: str, where: str) -> Settings:
    s = Settings("slurm.conf", {})
    found = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key.strip()):
            raise InputError(
                where,
                at(n),
                f"is neither a slurm.conf `Key=value` line nor `scontrol show config` output: {line[:60]!r}",
            )
        found = True
        k = key.strip().lower()
        if k == "nodename":
            s.node_lines.append((n, line))
        elif k == "partitionname":
            p = pairs(line)
            s.partitions[
                p["partitionname"].lower() if p["partitionname"] == "DEFAULT" else p["partitionname"]
            ] = p
        elif k not in s.values:
            s.values[k] = value.strip()
    if not found:
        raise InputError(
            where, "", "holds no settings (expected `scontrol show config` output or a slurm.conf)"
        )
    return s


def _seconds(text: str, unit: str = "min") -> float:
    """A Slurm time value: `7-0`, `7-00:00:00`, `00:05:00`, or a bare number in `unit`."""
    t = text.strip()
    m = re.fullmatch(r"(\d+)\s*(sec|min)?", t)
    if m:
        n = float(m.group(1))
        u = m.group(2) or unit
        return n if u == "sec" else n * 60
    secs = parse_duration_text(t)
    if secs is None:
        raise ValueError(f"{text!r} is not a duration")
    return float(secs)


def incumbent(
    settings: Settings,
    where: str,
    epoch: float | None = None,
    tz: dt.tzinfo = dt.UTC,
    first: float | None = None,
) -> dict[str, Any]:
    """incumbent.yaml's content (keys as policy `scheduling:` names them). With the history's
    epoch, `scontrol show config`'s BOOT_TIME gives `decay_phase`: Slurm's decay thread ticks
    every PriorityCalcPeriod from slurmctld's start, so its priorities change at
    BOOT_TIME + k·PriorityCalcPeriod, at (BOOT_TIME − epoch) mod PriorityCalcPeriod on the replay
    clock. A boot after `first` (the earliest submission) is noted: the ticks before it had another
    phase. slurm.conf has no boot time: the phase is then 0 and the import says so."""
    g = settings.get
    not_modelled: list[dict[str, str]] = []

    def note(key: str, value: str, why: str) -> None:
        not_modelled.append({"key": key, "value": value, "why": why})

    def dur(key: str, unit: str = "min") -> str:
        try:
            return fmt_duration(_seconds(g(key), unit))
        except ValueError:
            raise InputError(where, key, f"{g(key)!r} is not a Slurm duration") from None

    def weight(key: str) -> float:
        try:
            return float(g(key) or 0)
        except ValueError:
            raise InputError(where, key, f"{g(key)!r} is not a number") from None

    sched = _sched_params(g("SchedulerParameters"))
    bf = {k: sched.get(k, v) for k, v in BF_DEFAULTS.items()}
    try:
        out: dict[str, Any] = {
            "decay_half_life": dur("PriorityDecayHalfLife"),
            "decay_period": dur("PriorityCalcPeriod"),
            "priority_max_age": dur("PriorityMaxAge"),
            "weight_fairshare": weight("PriorityWeightFairshare"),
            "weight_age": weight("PriorityWeightAge"),
            "bf_interval": fmt_duration(float(bf["bf_interval"])),
            "bf_window": fmt_duration(float(bf["bf_window"]) * 60),
            "bf_resolution": fmt_duration(float(bf["bf_resolution"])),
            "bf_max_job_test": int(bf["bf_max_job_test"]),
            "bf_continue": "bf_continue" in sched,
            "sched_interval": fmt_duration(float(sched.get("sched_interval", SCHED_INTERVAL_DEFAULT))),
            "weight_job_size": weight("PriorityWeightJobSize"),
            "weight_partition": weight("PriorityWeightPartition"),
            "weight_qos": weight("PriorityWeightQOS"),
            "slurm_version": g("SLURM_VERSION"),
            "priority_type": g("PriorityType"),
            "priority_flags": g("PriorityFlags"),
        }
    except ValueError as exc:
        raise InputError(where, "SchedulerParameters", f"{g('SchedulerParameters')!r}: {exc}") from None
    for key in (
        "PriorityWeightJobSize",
        "PriorityWeightPartition",
        "PriorityWeightQOS",
        "PriorityWeightAssoc",
    ):
        if weight(key) != 0:
            note(
                key, g(key), "this priority factor is not modelled (slurm-multifactor has fair-share and age)"
            )
    tres = g("PriorityWeightTRES")
    if tres:
        note("PriorityWeightTRES", tres, "TRES priority factors are not modelled")
    if g("PriorityFavorSmall").lower() in ("yes", "1", "true"):
        note("PriorityFavorSmall", g("PriorityFavorSmall"), "the job-size factor is not modelled")
    flags = [f for f in g("PriorityFlags").split(",") if f.strip()]
    for f in flags:
        note(
            "PriorityFlags",
            f.strip(),
            "priority flags are not modelled (the model's fair share is classic decay)",
        )
    if g("PriorityType") != "priority/multifactor":
        note("PriorityType", g("PriorityType"), "slurm-multifactor models priority/multifactor")
    if g("SchedulerType") not in ("sched/backfill", ""):
        note("SchedulerType", g("SchedulerType"), "slurm-multifactor models sched/backfill")
    preempt = g("PreemptType")
    if preempt and preempt != "preempt/none":
        note("PreemptType", preempt, "Slurm's own preemption is not modelled")
    for k in sorted(sched):
        if k not in BF_DEFAULTS and k not in ("bf_continue", "sched_interval"):
            note("SchedulerParameters", f"{k}={sched[k]}" if sched[k] else k, "not modelled")
    boot = g("BOOT_TIME")
    if boot and epoch is not None:
        try:
            booted = time_parser(tz)(boot)
        except ValueError:
            raise InputError(where, "BOOT_TIME", f"{boot!r} is not a time") from None
        if booted is not None:
            period = _seconds(g("PriorityCalcPeriod"), "min")
            out["decay_phase"] = fmt_duration(round((booted - epoch) % period, 3))
            out["slurmctld_boot"] = boot
            if booted > (epoch if first is None else first):
                note(
                    "BOOT_TIME",
                    boot,
                    "slurmctld started after the history began: before its start the decay ticks had"
                    " another phase, which the model does not know",
                )
    elif epoch is not None:
        note("BOOT_TIME", "", "not in the settings file (slurm.conf): the decay ticks' phase is taken as 0")
    out["not_modelled"] = not_modelled
    return out


def _sched_params(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if text in ("", "(null)"):
        return out
    for item in text.split(","):
        k, _, v = item.strip().partition("=")
        if k:
            out[k.lower()] = v
    return out
