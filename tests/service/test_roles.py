"""Roles as pure checks: every write is judged against the node it touches."""

from __future__ import annotations

import pytest

from fairshare.errors import InputError
from fairshare.service.service_errors import Forbidden
from fairshare.service.storage.roles import (
    Principal,
    check_role,
    require_admin,
    require_exception,
    require_submit,
    under,
)

PATHS = ("ml", "ml/vision", "ml/nlp", "mlops", "ops")


def who(role: str, node: str | None = None) -> Principal:
    return Principal(7, "pat", role, node)


def test_under_is_by_path_segment() -> None:
    assert under("ml/vision", "ml") and under("ml", "ml")
    assert not under("mlops", "ml") and not under("ml", "ml/vision")


@pytest.mark.parametrize(
    ("p", "leaf", "allowed"),
    [
        (who("member", "ml"), "ml/vision", True),
        (who("member", "ml/nlp"), "ml/nlp", True),
        (who("member", "ml/nlp"), "ml/vision", False),  # a member of one team cannot act on another's
        (who("member", "ml"), "mlops", False),  # a name prefix is not a subtree
        (who("owner", "ops"), "ops", True),
        (who("owner", "ops"), "ml/nlp", False),
        (who("viewer"), "ops", False),
        (who("admin"), "ml/nlp", True),
    ],
)
def test_submit(p: Principal, leaf: str, allowed: bool) -> None:
    if allowed:
        require_submit(p, leaf)
    else:
        with pytest.raises(Forbidden, match=f"may not act on jobs of {leaf}"):
            require_submit(p, leaf)


@pytest.mark.parametrize(
    ("p", "group", "message"),
    [
        (who("owner", "ml"), "ml/vision", None),
        (who("owner", "ml"), "ml", "takes share from its siblings"),
        (who("owner", "ml"), "mlops", "outside ml"),
        (who("owner", "ml/nlp"), "ml/vision", "outside ml/nlp"),
        (who("member", "ml"), "ml/vision", "need an owner token"),
        (who("viewer"), "ops", "need an owner token"),
        (who("admin"), "ml", None),
    ],
)
def test_exceptions(p: Principal, group: str, message: str | None) -> None:
    if message is None:
        require_exception(p, group)
    else:
        with pytest.raises(Forbidden, match=message):
            require_exception(p, group)


def test_admin_only() -> None:
    require_admin(who("admin"), "x")
    for role, node in (("viewer", None), ("member", "ml"), ("owner", "ml")):
        with pytest.raises(Forbidden, match=r"changing the policy needs an admin token; pat \("):
            require_admin(who(role, node), "changing the policy")


@pytest.mark.parametrize(
    ("role", "node", "paths", "field", "message"),
    [
        ("root", None, PATHS, "role", "unknown role 'root'"),
        ("member", None, PATHS, "node", "needs the tree node"),
        ("owner", "ml/speech", PATHS, "node", "no node 'ml/speech'"),
        ("member", "ml", None, "node", "no policy is stored yet"),
        ("viewer", "ml", PATHS, "node", "not tied to a node"),
    ],
)
def test_token_roles_are_checked(
    role: str, node: str | None, paths: tuple[str, ...] | None, field: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as err:
        check_role(role, node, paths)
    assert err.value.at == field


def test_valid_token_roles() -> None:
    check_role("viewer", None, None)
    check_role("admin", None, PATHS)
    check_role("owner", "ml", PATHS)
