"""Who may do what (DESIGN §5): viewer, member of a node, owner of a node, admin.

- viewer: read everything.
- member of node N: read; submit jobs for leaves at or under N.
- owner of node N: what a member of N may do, and grant or end share exceptions on groups strictly
  under N (an exception on N itself would take share from N's siblings, outside N), within the
  policy's limits (`gates.exception_max_days`).
- admin: everything, including the policy and tokens.

Pure functions of a `Principal` and a tree path; every write checks the node it touches.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InputError
from ..service_errors import Forbidden

ROLES = ("viewer", "member", "owner", "admin")
NODE_ROLES = ("member", "owner")
JOB_ROLE = "job"  # a job's own token: it reports that job's progress and reads nothing (docs/progress.md)


@dataclass(frozen=True)
class Principal:
    """The holder of a token, as the API sees them."""

    token_id: int
    name: str
    role: str
    node: str | None

    def describe(self) -> str:
        scope = f" of {self.node}" if self.node else ""
        return f"{self.name} ({self.role}{scope}, token {self.token_id})"


def under(path: str, node: str) -> bool:
    """`path` is `node` or a descendant of it."""
    return path == node or path.startswith(node + "/")


def strictly_under(path: str, node: str) -> bool:
    return path.startswith(node + "/")


def check_role(role: str, node: str | None, paths: tuple[str, ...] | None) -> None:
    """A token's role and node make sense together (and the node exists, when a tree is known)."""
    if role not in ROLES:
        raise InputError("token", "role", f"unknown role {role!r} (one of: {', '.join(ROLES)})")
    if role in NODE_ROLES:
        if not node:
            raise InputError("token", "node", f"a {role} token needs the tree node it acts for (--node PATH)")
        if paths is None:
            raise InputError(
                "token",
                "node",
                "no policy is stored yet, so node paths cannot be checked: store a policy first "
                "(fairshare policy push --db URL FILE, or PUT /api/policy with an admin token)",
            )
        if node not in paths:
            raise InputError(
                "token", "node", f"no node {node!r} in the current policy's tree (e.g. {paths[0]!r})"
            )
    elif node:
        raise InputError("token", "node", f"a {role} token is not tied to a node; leave the node out")


def require_admin(p: Principal, action: str) -> None:
    if p.role != "admin":
        raise Forbidden(f"{action} needs an admin token; {p.describe()} may not")


def require_submit(p: Principal, leaf: str) -> None:
    """Submitting (or acting on) a job of `leaf`."""
    if p.role == "admin":
        return
    if p.role in NODE_ROLES and p.node is not None and under(leaf, p.node):
        return
    where = f"outside {p.node}" if p.node else "for any group"
    raise Forbidden(f"{p.describe()} may not act on jobs of {leaf}: it is {where}")


def require_exception(p: Principal, group: str) -> None:
    """Granting or ending a share exception on `group`."""
    if p.role == "admin":
        return
    if p.role == "owner" and p.node is not None:
        if strictly_under(group, p.node):
            return
        if group == p.node:
            raise Forbidden(
                f"{p.describe()} may not grant exceptions on {group} itself: that takes share from "
                f"its siblings, outside {p.node}; ask the owner of its parent or an admin"
            )
        raise Forbidden(f"{p.describe()} may not grant exceptions on {group}: it is outside {p.node}")
    raise Forbidden(
        f"exceptions need an owner token of a node above {group} (or admin); {p.describe()} may not"
    )
