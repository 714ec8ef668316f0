"""The service's rooms import downwards only: storage < clusters < loop < api < the entry points.

Every import of every module under fairshare/service (those under TYPE_CHECKING and inside
functions too) is resolved to the module it names; one from a room to a room above it fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fairshare.service

SERVICE = Path(fairshare.service.__file__).resolve().parent
SHARED = ("service_errors", "timefmt", "options", "__init__")
ROOMS = {"storage": 1, "clusters": 2, "loop": 3, "api": 4}
ENTRY = ("server", "serve_slurm", "service_cli", "ops_cli")


def room_rank(parts: tuple[str, ...]) -> int:
    """parts: the module's path under fairshare.service, without .py."""
    if parts[0] in ROOMS:
        return ROOMS[parts[0]]
    if parts[0] in SHARED:
        return 0
    assert parts[0] in ENTRY, f"fairshare.service.{'.'.join(parts)} is in no room"
    return 5


def service_imports(source: str, package: tuple[str, ...]) -> list[tuple[int, tuple[str, ...]]]:
    """(line, path under fairshare.service) of each import of a service module in `source`, a
    module of `package`."""
    out: list[tuple[int, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets: list[tuple[str, ...]] = []
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            mod = (*base, *(node.module.split(".") if node.module else ()))
            targets = [(*mod, a.name) for a in node.names]
        else:
            targets = [tuple(a.name.split(".")) for a in node.names]
        for t in targets:
            if t[:2] == ("fairshare", "service") and len(t) > 2:
                out.append((node.lineno, t[2:]))
    return out


def package_of(path: Path) -> tuple[str, ...]:
    return ("fairshare", "service", *path.parent.relative_to(SERVICE).parts)


MODULES = sorted(p for p in SERVICE.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SERVICE)) for p in MODULES])
def test_a_service_module_imports_no_room_above_its_own(path: Path) -> None:
    own = path.relative_to(SERVICE).with_suffix("").parts
    rank = room_rank(own)
    upward = [
        f"line {line}: fairshare.service.{'.'.join(t)}"
        for line, t in service_imports(path.read_text(), package_of(path))
        if room_rank(t) > rank and t[0] != own[0]
    ]
    assert not upward, f"{path.name} ({own[0]}) imports a room above it: {upward}"


def test_every_service_module_is_in_a_room() -> None:
    for path in MODULES:
        room_rank(path.relative_to(SERVICE).with_suffix("").parts)


UPWARD = """from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..loop.cycle import SchedulerLoop
def f() -> None:
    from fairshare.service.api import app
"""


def test_the_check_sees_upward_imports_under_type_checking_and_in_functions() -> None:
    found = service_imports(UPWARD, ("fairshare", "service", "storage"))
    assert found == [(4, ("loop", "cycle", "SchedulerLoop")), (6, ("api", "app"))]
    assert all(room_rank(t) > room_rank(("storage", "db")) for _, t in found)
