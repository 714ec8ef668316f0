"""What a sweep varies: key paths into the policy and cluster files, their values, and the variants.

A key path is written as the error messages write places in a file (`classes.train.protected`,
`tree[0].share`), with two additions so a path reads the way people name things:

- a list of named entries (`tree`, `children`, `pools`, `exceptions` by `group`) may be indexed by
  name instead of position: `cluster.pools.a100.count`, `tree.research.share`; a tree node may be
  named by its path, `tree.research/arch.share` (= `tree.research.children.arch.share`);
- `cluster.` selects the cluster file, `policy.` (or nothing) the policy file.

Setting a class's `protected` above its `max_protected` raises `max_protected` to the same value
(a class may not grant more protection than it allows), unless the variant sets `max_protected`
itself; so `--vary classes.train.protected=1h,2h,4h` tries those protections.

A value is read as YAML reads a scalar (`3d` stays a duration, `0.5` is a number, `true` a bool);
`+N` and `-N` are relative to the base file's number at that path (`count=+0,+10`).

Several `--vary` make a grid: every combination, in the order given, the last option varying
fastest. A variants file lists the combinations instead (`[{name: ..., set: {KEY: VALUE, ...}}]`).
The variant ids are `v01`, `v02`, ... in that order, and the unchanged files are the variant `base`
(listed first; a grid that contains the base combination reuses it rather than running it twice).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from .._units import parse_duration
from ..errors import InputError

#: Which of the design's decisions (DESIGN §1, §6) a key answers, by its first segment.
DECISIONS: dict[str, str] = {
    "gpu_rates": "unit",
    "tree": "hierarchy",
    "window": "window",
    "classes": "contract",
    "exceptions": "exception",
    "cluster": "capacity",
}
DECISION_ORDER = ("unit", "hierarchy", "window", "contract", "exception", "capacity", "scheduling")
#: The most variants one sweep may hold (a grid multiplies quickly).
MAX_VARIANTS = 1_000
_RELATIVE = re.compile(r"^[+-]\s*[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$")
_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
# lists whose entries are addressed by this key instead of a position
_NAMED_BY = {"tree": "name", "children": "name", "pools": "name", "exceptions": "group"}


@dataclass(frozen=True)
class Change:
    """One key set to one value: `key` as the user wrote it, `raw` the text of the value."""

    key: str
    raw: str

    @property
    def file(self) -> str:
        return "cluster" if self.key.startswith("cluster.") else "policy"

    @property
    def path(self) -> str:
        """The key without its file prefix."""
        for prefix in ("cluster.", "policy."):
            if self.key.startswith(prefix):
                return self.key[len(prefix) :]
        return self.key

    @property
    def decision(self) -> str:
        if self.file == "cluster":
            return "capacity"
        head = _segments(self.path, self.key)[0]
        return DECISIONS.get(str(head), "scheduling")


@dataclass(frozen=True)
class Variant:
    """One combination of changes; `id` names its folder under the sweep's OUT. `effective` are the
    changes that alter the base files (a grid's `+0` or the base's own value changes nothing); the
    decisions a variant speaks to are those of its effective changes."""

    id: str
    name: str
    changes: tuple[Change, ...]
    effective: tuple[Change, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "set": {c.key: c.raw for c in self.changes}}

    @property
    def decisions(self) -> tuple[str, ...]:
        seen = {c.decision for c in self.effective}
        return tuple(d for d in DECISION_ORDER if d in seen)


def parse_vary(text: str) -> tuple[str, tuple[str, ...]]:
    """`KEY=V1,V2,...` -> (KEY, (V1, V2, ...)); errors name the option."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError("--vary", text, "expected KEY=V1,V2,..., e.g. window=3d,7d,14d")
    _segments(_strip_prefix(key), key)  # the key's shape, before any file is read
    items = tuple(v.strip() for v in values.split(","))
    if any(not v for v in items):
        raise InputError("--vary", text, "an empty value (a comma too many?)")
    if len(set(items)) != len(items):
        raise InputError("--vary", text, "a value is given twice")
    return key, items


def grid(varies: Sequence[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[Change, ...]]]:
    """Every combination of the --vary options: (name, changes), the last option varying fastest."""
    keys = [k for k, _ in varies]
    for k in keys:
        if keys.count(k) > 1:
            raise InputError("--vary", k, "the same key is varied twice: give its values in one --vary")
    out = []
    for combo in itertools.product(*(values for _, values in varies)):
        changes = tuple(Change(k, v) for k, v in zip(keys, combo, strict=True))
        out.append((",".join(f"{c.key}={c.raw}" for c in changes), changes))
    return out


def variants_file(data: Any, where: str) -> list[tuple[str, tuple[Change, ...]]]:
    """The combinations a variants file lists: `[{name: N, set: {KEY: VALUE}}, ...]` (name optional)."""
    if not isinstance(data, list) or not data:
        raise InputError(where, "", "expected a non-empty list of variants: - {name: ..., set: {KEY: VALUE}}")
    out = []
    names: set[str] = set()
    for i, entry in enumerate(data):
        at = f"[{i}]"
        if not isinstance(entry, dict) or not set(entry) <= {"name", "set"} or "set" not in entry:
            raise InputError(where, at, "expected {name: ..., set: {KEY: VALUE, ...}}")
        sets = entry["set"]
        if not isinstance(sets, dict) or not sets:
            raise InputError(where, f"{at}.set", "expected a mapping of KEY: VALUE with at least one key")
        changes = []
        for key, value in sets.items():
            if not isinstance(key, str):
                raise InputError(where, f"{at}.set", f"a key must be text, got {key!r}")
            _segments(_strip_prefix(key), f"{where}: {at}.set.{key}")
            if isinstance(value, bool):
                raw = "true" if value else "false"
            elif isinstance(value, str | int | float):
                raw = str(value)
            else:
                raise InputError(where, f"{at}.set.{key}", f"expected one value, got {value!r}")
            changes.append(Change(key, raw))
        name = entry.get("name")
        if name is None:
            name = ",".join(f"{c.key}={c.raw}" for c in changes)
        if not isinstance(name, str) or not name.strip():
            raise InputError(where, f"{at}.name", "expected a non-empty name")
        if name in names:
            raise InputError(where, f"{at}.name", f"the name {name!r} is used twice")
        names.add(name)
        out.append((name, tuple(changes)))
    return out


def number_variants(
    combos: Sequence[tuple[str, tuple[Change, ...]]], policy: Mapping[str, Any], cluster: Mapping[str, Any]
) -> list[Variant]:
    """`base` first, then `v01`, `v02`, ... (zero-padded to the count's width), each with its
    effective changes against the base files; a combination that changes nothing is the base
    itself and is not run twice (it is dropped, and `base` names it)."""
    if len(combos) > MAX_VARIANTS:
        raise InputError("--vary", "", f"{len(combos):,} variants; a sweep holds at most {MAX_VARIANTS:,}")
    width = max(2, len(str(len(combos))))
    out = [Variant("base", "base (the files as given)", ())]
    for i, (name, changes) in enumerate(combos, 1):
        v = Variant(f"v{i:0{width}d}", name, changes)
        effective = tuple(
            c for c in changes if apply(Variant(v.id, name, (c,)), policy, cluster) != (policy, cluster)
        )
        if not effective:
            out[0] = Variant("base", f"base (the files as given; {name})", changes)
            continue
        out.append(Variant(v.id, name, changes, effective))
    return out


def apply(
    variant: Variant, policy: Mapping[str, Any], cluster: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Deep copies of the base files with the variant's changes made; errors name the key."""
    files = {"policy": copy.deepcopy(dict(policy)), "cluster": copy.deepcopy(dict(cluster))}
    where = f"variant {variant.id} ({variant.name})"
    for change in variant.changes:
        _set(files[change.file], change, where)
    keys = {c.key.removeprefix("policy.") for c in variant.changes}
    for key in sorted(keys):
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "classes" and parts[2] == "protected":
            _raise_cap(files["policy"], parts[1], keys)
    return files["policy"], files["cluster"]


def _raise_cap(policy: dict[str, Any], name: str, keys: set[str]) -> None:
    """`max_protected` up to a new `protected` the variant set (unless it set the cap too)."""
    cls = (policy.get("classes") or {}).get(name)
    if f"classes.{name}.max_protected" in keys or not isinstance(cls, dict) or "max_protected" not in cls:
        return
    try:
        if parse_duration(str(cls["protected"])) > parse_duration(str(cls["max_protected"])):
            cls["max_protected"] = cls["protected"]
    except ValueError:
        return  # validation names the bad value


def _strip_prefix(key: str) -> str:
    for prefix in ("cluster.", "policy."):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _segments(path: str, shown: str) -> list[str | int]:
    """`pools.a100.count` -> ['pools', 'a100', 'count']; `tree[0].share` -> ['tree', 0, 'share']."""
    out: list[str | int] = []
    pos = 0
    for m in _SEGMENT.finditer(path):
        if m.start() != pos and not (m.start() == pos + 1 and path[pos] == "."):
            break
        pos = m.end()
        word, index = m.group(1), m.group(2)
        if word is not None:
            out.append(word)
        elif index.strip().lstrip("-").isdigit():
            out.append(int(index))
        else:
            out.append(index.strip().strip("'\""))
    if pos != len(path) or not out or not isinstance(out[0], str):
        raise InputError(
            "--vary",
            shown,
            "not a key path (e.g. window, classes.train.protected, "
            "cluster.pools.a100.count, tree.research.share)",
        )
    return out


def _value(change: Change, base: Any, where: str) -> Any:
    raw = change.raw
    if _RELATIVE.match(raw):
        if isinstance(base, bool) or not isinstance(base, int | float):
            raise InputError(
                where, change.key, f"{raw!r} is relative, but the base value is {base!r}, not a number"
            )
        delta = yaml.safe_load(raw.replace(" ", "").lstrip("+"))
        return base + delta
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _find_named(items: list[Any], key: str, name: str) -> tuple[list[Any], int] | None:
    """(the list, the position) of the entry whose `key` is `name`."""
    for i, item in enumerate(items):
        if isinstance(item, dict) and str(item.get(key)) == name:
            return items, i
    return None


def _set(root: dict[str, Any], change: Change, where: str) -> None:
    parts = _segments(change.path, change.key)
    node: Any = root
    parent_key = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if isinstance(part, int):
                if not -len(node) <= part < len(node):
                    raise InputError(where, change.key, f"index {part} is out of range ({len(node)} entries)")
                target, slot = node[part], part
            else:
                by = _NAMED_BY.get(parent_key, "name")
                found = _tree_path(node, part) if parent_key == "tree" else _find_named(node, by, part)
                if found is None:
                    known = ", ".join(str(x.get(by)) for x in node if isinstance(x, dict))
                    raise InputError(where, change.key, f"no entry named {part!r} (known: {known or 'none'})")
                node, slot = found
                target = node[slot]
            if last:
                node[slot] = _value(change, target, where)
                return
            node = target
        elif isinstance(node, dict):
            if isinstance(part, int):
                raise InputError(where, change.key, f"[{part}]: {parent_key or 'the file'} is not a list")
            if last:
                if part not in node and not _may_add(parts):
                    known = ", ".join(map(str, node)) or "none"
                    raise InputError(
                        where,
                        change.key,
                        f"the base file has no {part!r} here (keys: {known}); "
                        "set a key the file (or its defaults' documentation) has",
                    )
                node[part] = _value(change, node.get(part), where)
                return
            if part not in node:
                node[part] = {} if not isinstance(parts[i + 1], int) else []
            node = node[part]
        else:
            raise InputError(where, change.key, f"{parent_key!r} holds a value, not keys")
        parent_key = part if isinstance(part, str) else parent_key


def _may_add(parts: list[str | int]) -> bool:
    """Keys with defaults may be set although the base file leaves them out (`classes.train.restore`,
    `scheduling.requeue_delay`, `window`, `gates.share_floor`, a pool's `nodes_per_block`)."""
    return parts[0] in ("classes", "scheduling", "gates", "window", "gpu_rates", "pools", "horizon", "epoch")


def _tree_path(nodes: list[Any], path: str) -> tuple[list[Any], int] | None:
    """A tree node by its path (`research/arch`): (the list holding it, its position)."""
    level, found = nodes, None
    for name in path.split("/"):
        found = _find_named(level, "name", name)
        if found is None:
            return None
        holder, i = found
        level = holder[i].get("children") or []
    return found
