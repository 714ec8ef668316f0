"""What the readers share: where a value is (file, line, column), times, Slurm's empty values."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ...errors import InputError, warn

#: What Slurm prints for "no value" (22.05 through 24.x).
EMPTY = frozenset({"", "Unknown", "None", "none", "(null)", "N/A", "n/a", "None assigned", "INVALID"})


def at(line: int, column: int | None = None, name: str | None = None) -> str:
    """`line 12, column 5 (Start)`: the place of a value, as the workload loader names it."""
    if column is None:
        return f"line {line}"
    return f"line {line}, column {column}" + (f" ({name})" if name else "")


@dataclass
class BadRows:
    """Bad rows: an error (the first one) unless `skip`, then a warning each and a count."""

    where: str
    skip: bool
    count: int = 0
    shown: int = 0
    limit: int = 20  # warnings printed; the rest are only counted

    def bad(self, place: str, message: str) -> None:
        if not self.skip:
            raise InputError(self.where, place, message)
        self.count += 1
        if self.shown < self.limit:
            self.shown += 1
            warn(self.where, place, message + " (row skipped: --skip-bad)")


def timezone(name: str) -> dt.tzinfo:
    """The zone sacct printed its times in (`--tz`; sacct prints the local time of its host)."""
    if name.upper() == "UTC":
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError("--tz", name, "is not a time zone name (e.g. UTC, Europe/Berlin)") from None


def time_parser(tz: dt.tzinfo) -> Callable[[str], float | None]:
    """Slurm's times -> epoch seconds: ISO (`2026-10-01T08:00:00`, in `tz`) or epoch seconds
    (`SLURM_TIME_FORMAT=%s`); None for Unknown/None. Raises ValueError on anything else."""
    days: dict[str, float] = {}  # UTC fast path: date -> its midnight in epoch seconds

    def slow(text: str) -> float:
        try:
            t = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{text!r} is not a time (ISO such as 2026-10-01T08:00:00, or epoch seconds)"
            ) from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=tz)
        return t.timestamp()

    def parse(text: str) -> float | None:
        if text in EMPTY:
            return None
        if len(text) == 19 and text[10] == "T" and tz is dt.UTC:
            day = days.get(text[:10])
            if day is None:
                day = days[text[:10]] = slow(text[:10] + "T00:00:00")
            try:
                h, m, sec = int(text[11:13]), int(text[14:16]), int(text[17:19])
            except ValueError:
                return slow(text)
            if h < 24 and m < 60 and sec < 61 and text[13] == ":" and text[16] == ":":
                return day + h * 3600 + m * 60 + sec
            return slow(text)
        if text.isdigit() and len(text) <= 11:  # epoch seconds (Slurm prints no year-only date)
            n = float(text)
            return None if n == 0 else n
        return slow(text)

    return parse


def iso(t: float) -> str:
    """Epoch seconds -> `2026-10-01T08:00:00Z`."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_duration(seconds: float) -> str:
    """A FORMATS duration: `7d`, `1d2h`, `5m`, `30s` (whole seconds)."""
    s = round(seconds)
    if s <= 0:
        return "0s"
    out = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if s >= size:
            out.append(f"{s // size}{unit}")
            s %= size
    return "".join(out)


def num(x: float) -> str:
    """A CSV time or duration: at most 3 decimals, no trailing zeros (`12`, `12.5`)."""
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x}")
    i = int(x)
    if i == x:
        return str(i)
    r = round(x, 3)
    if r == int(r):
        return str(int(r))
    return f"{r:.3f}".rstrip("0")


@dataclass
class Anonymizer:
    """Stable pseudonyms for users and accounts (`--anonymize`): the same name gives the same
    pseudonym in every import made with the same key, so sites can share and compare folders."""

    enabled: bool
    key: bytes = b"fairshare"
    _memo: dict[tuple[str, str], str] = field(default_factory=dict)

    def name(self, kind: str, value: str) -> str:
        if not self.enabled or not value:
            return value
        got = self._memo.get((kind, value))
        if got is None:
            digest = hmac.new(self.key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
            got = f"{kind[0]}{digest[:10]}"
            self._memo[(kind, value)] = got
        return got


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
