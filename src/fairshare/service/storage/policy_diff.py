"""What a policy version changes, node by node (`fairshare policy diff`)."""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from ...inputs._validation import parse_yaml


def _nodes(tree: list[dict[str, Any]], prefix: str = "") -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n in tree or []:
        path = f"{prefix}{n['name']}"
        out[path] = {k: v for k, v in n.items() if k not in ("name", "children")}
        out.update(_nodes(n.get("children") or [], path + "/"))
    return out


def diff_policies(old_text: str, new_text: str, where: str) -> list[str]:
    """Lines: `+ path`, `- path`, `~ path: key a -> b`, and the same for classes, rates, window."""
    new = parse_yaml(new_text, where)
    old = parse_yaml(old_text, "the live policy")
    if not isinstance(new, dict) or "tree" not in new:
        raise InputError(where, "tree", "not a policy: no tree")
    out: list[str] = []
    a, b = _nodes(old.get("tree", [])), _nodes(new.get("tree", []))
    for path in sorted(set(a) | set(b)):
        if path not in a:
            out.append(f"+ {path} (share {b[path].get('share')})")
        elif path not in b:
            out.append(f"- {path}")
        else:
            for k in sorted(set(a[path]) | set(b[path])):
                if a[path].get(k) != b[path].get(k):
                    out.append(f"~ {path}: {k} {a[path].get(k)} -> {b[path].get(k)}")
    for section in ("classes", "gpu_rates", "gates", "scheduling"):
        x, y = old.get(section) or {}, new.get(section) or {}
        for k in sorted(set(x) | set(y)):
            if k not in x:
                out.append(f"+ {section}.{k}")
            elif k not in y:
                out.append(f"- {section}.{k}")
            elif x[k] != y[k]:
                out.append(f"~ {section}.{k}: {x[k]} -> {y[k]}")
    if old.get("window") != new.get("window"):
        out.append(f"~ window: {old.get('window')} -> {new.get('window')}")
    return out
