"""A job's execution contract written in its Slurm comment.

    sbatch --comment "fairshare:protect=30m,checkpoint=10m,resumable" ...

The contract is the first word of the comment that starts with the prefix (default `fairshare:`);
the rest of the comment is the user's. Keys (durations as in the policy file: 30m, 1h30m, 90):

    class=NAME        the job class (else the QOS, else slurm.default_class)
    protect=DUR       protected period after each start (alias: protected); capped by the class
    checkpoint=DUR    checkpoint interval (a resumable job needs one, from here or its class)
    resumable         the job resumes from its last checkpoint (resumable=no: it does not)
    restore=DUR       time to restore from a checkpoint after a restart
    deadline=DUR      finish within DUR of submission (Slurm's own --deadline takes precedence)

A bad key or value is reported (naming the key) and ignored; the rest still applies.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._units import parse_duration

KEYS = ("class", "protect", "checkpoint", "resumable", "restore", "deadline")
ALIASES = {"protected": "protect", "cls": "class"}
TRUE = {"", "1", "yes", "true", "on", "y"}
FALSE = {"0", "no", "false", "off", "n"}


@dataclass(frozen=True, slots=True)
class JobComment:
    cls: str | None = None
    protect: float | None = None
    checkpoint: float | None = None
    resumable: bool | None = None
    restore: float | None = None
    deadline: float | None = None  # seconds after submission
    problems: tuple[str, ...] = ()
    found: bool = False  # whether the comment had a contract word at all


def contract_word(comment: str, prefix: str) -> str | None:
    for word in comment.replace(";", " ").split():
        if word.startswith(prefix):
            return word[len(prefix) :]
    return None


def parse_comment(comment: str, prefix: str = "fairshare:") -> JobComment:
    word = contract_word(comment or "", prefix)
    if word is None:
        return JobComment()
    values: dict[str, object] = {}
    problems: list[str] = []
    for item in word.split(","):
        if not item:
            continue
        key, has_value, value = item.partition("=")
        key = ALIASES.get(key.strip().lower(), key.strip().lower())
        if key not in KEYS:
            problems.append(f"comment: unknown key {key!r} (known: {', '.join(KEYS)})")
            continue
        if key in values:
            problems.append(f"comment: {key} given twice; the first value is used")
            continue
        if key == "class":
            if not value:
                problems.append("comment: class needs a name (class=train)")
                continue
            values[key] = value
        elif key == "resumable":
            v = value.strip().lower()
            if v in TRUE:
                values[key] = True
            elif v in FALSE:
                values[key] = False
            else:
                problems.append(f"comment: resumable: expected yes or no, got {value!r}")
        else:
            if not has_value:
                problems.append(f"comment: {key} needs a duration ({key}=30m)")
                continue
            try:
                values[key] = parse_duration(value)
            except ValueError as exc:
                problems.append(f"comment: {key}: {exc}")
    return JobComment(
        cls=_str(values.get("class")),
        protect=_num(values.get("protect")),
        checkpoint=_num(values.get("checkpoint")),
        resumable=_bool(values.get("resumable")),
        restore=_num(values.get("restore")),
        deadline=_num(values.get("deadline")),
        problems=tuple(problems),
        found=True,
    )


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _bool(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
