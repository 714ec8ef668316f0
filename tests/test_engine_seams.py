"""The engine state's seams: only the state writes its members. A module that is handed an engine
state (a parameter annotated EngineState, ServingState or LiveEngine's `state`) reads it; it never
assigns its members (but the driver's attachments, `journal` and `listener`) nor touches a private
one. The rules of a serving engine's changes compute typed values that the state adopts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "fairshare"
STATE_TYPES = {"EngineState", "ServingState"}
# the state's own class, spread over its files (mixins of EngineState)
OWN = {"engine/state.py", "engine/progress.py", "engine/outcome.py"}
ATTACHMENTS = {"journal", "listener"}  # what a driver attaches to or detaches from a state


def _state_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg for a in args if a.annotation is not None and ast.unparse(a.annotation) in STATE_TYPES}


def _is_state(node: ast.expr, names: set[str]) -> bool:
    """`e` (a parameter typed as a state) or `<x>.state` (LiveEngine's; not a web app's `app.state`)."""
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute)
        and node.attr == "state"
        and not ast.unparse(node.value).endswith("app")
    )


def misuses(source: str) -> list[str]:
    """What a module does to an engine state it is handed: member assignments and private uses."""
    out = []
    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = _state_names(fn)
        for node in ast.walk(fn):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = [
                    t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])
                ]
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and _is_state(t.value, names) and t.attr not in ATTACHMENTS:
                    out.append(f"line {t.lineno}: assigns {ast.unparse(t)}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and _is_state(node.value, names):
                out.append(f"line {node.lineno}: uses {ast.unparse(node)}")
    return out


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("def f(e: EngineState) -> None:\n    e.pending = 1\n", 1, id="assigns-a-member"),
        pytest.param(
            "def f(e: ServingState) -> None:\n    e.a, e.b = 1, 2\n", 2, id="assigns-members-at-once"
        ),
        pytest.param(
            "def f(live: LiveEngine) -> None:\n    live.state.dirty = True\n", 1, id="assigns-via-live"
        ),
        pytest.param("def f(e: EngineState) -> None:\n    e._flush()\n", 1, id="calls-a-private-method"),
        pytest.param("def f(e: EngineState) -> None:\n    e.journal = None\n", 0, id="detaches-its-journal"),
        pytest.param("def f(e: EngineState) -> int:\n    return len(e.pending)\n", 0, id="reads-a-member"),
        pytest.param(
            "def f(app: App) -> None:\n    app.state.live = 1\n", 0, id="a-web-apps-state-is-no-engines"
        ),
    ],
)
def test_the_check_finds_what_a_module_does_to_a_state(source: str, found: int) -> None:
    assert len(misuses(source)) == found


def test_no_module_but_the_state_writes_its_members_or_uses_its_private_ones() -> None:
    seen = {}
    for p in sorted(SRC.rglob("*.py")):
        rel = str(p.relative_to(SRC))
        if rel not in OWN:
            found = misuses(p.read_text(encoding="utf-8"))
            if found:
                seen[rel] = found
    assert seen == {}
