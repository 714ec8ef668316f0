"""The Slurm account tree a policy asks for, and the mapping between accounts and leaves.

Leaves map to Slurm accounts by `slurm.accounts` (default: the leaf's own name in lower case).
Inner nodes of the budget tree become parent accounts of the same name, so `sshare` shows the
same tree; fairshare itself charges and orders by leaf only.

A job's account maps to a leaf when the account is a leaf's account or lies below one in Slurm's
account tree (a sub-account an admin created for a team is charged to the team's leaf). Any other
account is unknown: its jobs are reported and neither ordered nor charged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..core.tree import TreeIndex
from ..inputs.policy import Policy
from ..inputs.slurm_section import SlurmSection, default_account


@dataclass(frozen=True, slots=True)
class AccountSpec:
    name: str
    parent: str  # "root" at the top
    fairshare: int
    leaf_path: str | None  # the policy leaf it charges, None for inner nodes
    path: str  # the tree path it stands for


def section_of(policy: Policy) -> SlurmSection:
    return policy.slurm if policy.slurm is not None else SlurmSection()


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-") or "group"


def account_plan(policy: Policy) -> list[AccountSpec]:
    """One account per tree node, parents first; shares scaled to Slurm's integer Fairshare."""
    tree = TreeIndex.build(policy.tree)
    section = section_of(policy)
    leaves = {tree.paths[i] for i in tree.leaves}
    scale = 1 if all(float(s).is_integer() for s in tree.share) else 100
    names: dict[int, str] = {}
    out = []
    for i, path in enumerate(tree.paths):
        is_leaf = path in leaves
        name = (
            (section.accounts.get(path) or default_account(path))
            if is_leaf
            else _slug(path.rsplit("/", 1)[-1])
        )
        names[i] = name
        parent = names[tree.parent[i]] if tree.parent[i] >= 0 else "root"
        out.append(
            AccountSpec(name, parent, max(1, round(tree.share[i] * scale)), path if is_leaf else None, path)
        )
    return out


def leaf_accounts(policy: Policy) -> dict[str, str]:
    """Slurm account -> leaf path."""
    return {a.name: a.leaf_path for a in account_plan(policy) if a.leaf_path is not None}


@dataclass(frozen=True)
class AccountMap:
    """Resolves a job's account to a leaf; `parents` is Slurm's account tree (account -> parent)."""

    leaves: Mapping[str, str]  # account -> leaf path
    inner: Mapping[str, str]  # account of an inner tree node -> its path
    parents: Mapping[str, str]

    @staticmethod
    def build(policy: Policy, parents: Mapping[str, str] | None = None) -> AccountMap:
        plan = account_plan(policy)
        return AccountMap(
            leaves={a.name: a.leaf_path for a in plan if a.leaf_path is not None},
            inner={a.name: a.path for a in plan if a.leaf_path is None},
            parents=dict(parents or {}),
        )

    def leaf_of(self, account: str) -> tuple[str | None, str]:
        """(leaf path or None, why): why explains an unknown account or names the sub-account."""
        account = account.lower()
        seen: set[str] = set()
        a: str | None = account
        while a is not None and a not in seen:
            if a in self.leaves:
                via = "" if a == account else f"sub-account of {a}"
                return self.leaves[a], via
            if a in self.inner:
                return None, (
                    f"account {account!r} is the budget group {self.inner[a]!r}, not a leaf: "
                    f"jobs must use a leaf's account ({', '.join(sorted(self.leaves))})"
                )
            seen.add(a)
            a = self.parents.get(a)
        return None, (
            f"account {account!r} maps to no leaf of the policy's tree "
            f"(leaf accounts: {', '.join(sorted(self.leaves))}); its jobs are not ordered or charged"
        )


def sacctmgr_commands(
    plan: Iterable[AccountSpec], users: Iterable[str] = (), qos: Iterable[str] = ()
) -> list[list[str]]:
    """sacctmgr command lines creating the accounts (and each user in every leaf account)."""
    cmds = []
    plan = list(plan)
    for a in plan:
        cmds.append(
            [
                "sacctmgr",
                "-i",
                "add",
                "account",
                a.name,
                f"parent={a.parent}",
                f"fairshare={a.fairshare}",
                f"description={a.path}",
                "organization=fairshare",
            ]
        )
    qos = sorted(set(qos))
    for user in users:
        for a in plan:
            if a.leaf_path is not None:
                extra = [f"qos=normal,{','.join(qos)}"] if qos else []
                cmds.append(["sacctmgr", "-i", "add", "user", user, f"account={a.name}", *extra])
    return cmds
