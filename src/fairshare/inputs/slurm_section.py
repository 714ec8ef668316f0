"""The policy file's optional `slurm:` section: how a Slurm cluster's names map onto the policy.

Only the Slurm driver reads it (`fairshare slurm check`, and the service with `--cluster slurm`);
a replay ignores it. Defaults follow Slurm's own conventions so a small site writes one line
(`default_class`):

accounts        leaf path -> Slurm account; a leaf without an entry uses its own name in lower case
                (Slurm stores account names in lower case)
default_class   the class of a job whose comment and QOS name none
qos_classes     QOS -> class; a QOS named like a class is that class without an entry
gpu_types       Slurm gres type (`gpu:a100:8` -> `a100`) -> a `gpu_rates` key; without an entry the
                type matches a rate key case-insensitively
partitions      the partitions fairshare orders (empty: every partition)
comment_prefix  the word of a job's comment that carries its contract (`fairshare:protect=30m,...`)
priority_min    fairshare sets pending jobs' priorities in [priority_min, priority_max]; the band must
priority_max    lie above every priority Slurm computes itself (`fairshare slurm check` verifies it)
priority_step   the spacing of new priorities, leaving room to insert jobs without renumbering
cluster_name    when set, `slurm check` verifies Slurm's ClusterName
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from ._validation import AtPath, StrictModel

# sacctmgr lower-cases account names; keep them to characters every Slurm tool accepts unquoted
ACCOUNT_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
SLURM_PRIORITY_LIMIT = 0xFFFFFFFD  # 0xfffffffe is NO_VAL and 0xffffffff INFINITE in Slurm


class SlurmSection(StrictModel):
    accounts: dict[str, str] = Field(default_factory=dict)
    default_class: str | None = None
    qos_classes: dict[str, str] = Field(default_factory=dict)
    gpu_types: dict[str, str] = Field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    comment_prefix: str = Field(default="fairshare:", min_length=1)
    priority_min: int = Field(default=1_000_000, ge=1)
    priority_max: int = Field(default=1_000_000_000, ge=2, le=SLURM_PRIORITY_LIMIT)
    priority_step: int = Field(default=1000, ge=1)
    cluster_name: str | None = None

    @field_validator("accounts")
    @classmethod
    def _account_names(cls, v: dict[str, str]) -> dict[str, str]:
        for leaf, account in v.items():
            if not ACCOUNT_NAME.match(account):
                raise AtPath(
                    (leaf,),
                    f"{account!r} is not a Slurm account name: use lower-case letters, digits, "
                    "'_', '.' and '-' (sacctmgr stores account names in lower case)",
                )
        return v

    @field_validator("comment_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if any(c.isspace() for c in v) or "," in v or "=" in v:
            raise ValueError(f"the comment prefix may not contain spaces, ',' or '=', got {v!r}")
        return v

    @model_validator(mode="after")
    def _band(self) -> SlurmSection:
        if self.priority_min >= self.priority_max:
            raise AtPath(
                ("priority_max",),
                f"priority_max ({self.priority_max}) must be above priority_min ({self.priority_min})",
            )
        return self


def default_account(leaf_path: str) -> str:
    """The Slurm account of a leaf without an `accounts` entry: its own name, lower-cased."""
    return leaf_path.rsplit("/", 1)[-1].lower()


def check_against_policy(
    section: SlurmSection,
    leaves: tuple[str, ...],
    inner: tuple[str, ...],
    classes: Mapping[str, Any],
    gpu_rates: Mapping[str, float],
) -> None:
    """Cross-checks with the rest of the policy; raises AtPath relative to the `slurm` key."""
    for path in section.accounts:
        if path not in leaves:
            what = "an inner node" if path in inner else "not in the tree"
            raise AtPath(
                ("accounts", path),
                f"{path!r} is {what}: accounts map leaves of the tree (by path, e.g. {leaves[-1]!r})",
            )
    owner: dict[str, str] = {}
    for path in leaves:
        account = section.accounts.get(path) or default_account(path)
        if account in owner:
            key: tuple[str, ...] = ("accounts", path) if path in section.accounts else ("accounts",)
            raise AtPath(
                key,
                f"leaves {owner[account]!r} and {path!r} both map to Slurm account {account!r}: "
                f"give one of them its own account under slurm.accounts",
            )
        if not ACCOUNT_NAME.match(account):
            raise AtPath(
                ("accounts",),
                f"leaf {path!r} has no valid default Slurm account ({account!r}): "
                f"map it under slurm.accounts, e.g. {path}: {re.sub(r'[^a-z0-9_.-]', '-', account)}",
            )
        owner[account] = path
    known = ", ".join(classes)
    if section.default_class is not None and section.default_class not in classes:
        raise AtPath(("default_class",), f"unknown class {section.default_class!r} (known: {known})")
    for qos, cls in section.qos_classes.items():
        if cls not in classes:
            raise AtPath(("qos_classes", qos), f"unknown class {cls!r} (known: {known})")
    for gres_type, rate_key in section.gpu_types.items():
        if rate_key not in gpu_rates:
            raise AtPath(
                ("gpu_types", gres_type),
                f"{rate_key!r} is not a key of gpu_rates (known: {', '.join(sorted(gpu_rates)) or 'none'})",
            )
