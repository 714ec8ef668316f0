"""Associations: `sacctmgr -P show assoc` (any format holding Account and User; ParentName and
Share/Fairshare for the tree and the shares) or a `sacctmgr dump <cluster>` file.

Both give one `Assoc` per association: an account's own (user empty) or a user's in an account. The
account tree comes from ParentName (show assoc) or the `Parent - 'x'` lines (dump); `show assoc`
without ParentName gives a flat tree (the import warns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import InputError
from ._text import BadRows, at


@dataclass(frozen=True)
class Assoc:
    cluster: str
    account: str
    user: str  # "" for the account's own association
    parent: str  # the parent account ("" for root or when unknown)
    share: str  # as printed: a number, "parent", or "" (Slurm's default, 1)
    line: int


@dataclass
class Associations:
    form: str
    rows: list[Assoc] = field(default_factory=list)
    has_parents: bool = True

    def clusters(self) -> list[str]:
        return sorted({a.cluster for a in self.rows if a.cluster})


_DUMP_LINE = re.compile(r"^\s*(Cluster|Parent|Account|User)\s+-\s+'((?:[^'\\]|\\.)*)'(.*)$")
_DUMP_OPT = re.compile(r":(\w+)=('(?:[^'\\]|\\.)*'|[^:]*)")


def read_assoc(text: str, where: str, bad: BadRows) -> Associations:
    """Detect the form (dump lines start with `Cluster - '...'`) and read it."""
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if _DUMP_LINE.match(s):
            return _read_dump(text, where, bad)
        if "|" in s:
            return _read_show(text, where, bad)
        break
    raise InputError(
        where,
        "",
        "is neither `sacctmgr -P show assoc` output nor a `sacctmgr dump` file (no '|'-separated "
        "header line, no `Cluster - '...'` line)",
    )


def _read_show(text: str, where: str, bad: BadRows) -> Associations:
    out = Associations(form="sacctmgr -P show assoc")
    cols: dict[str, int] = {}
    width = 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        cells = raw.split("|")
        if not cols:
            if cells[-1] == "":
                cells.pop()
            cols = {c.strip().lower().replace(" ", ""): i for i, c in enumerate(cells)}
            width = len(cells)
            if "account" not in cols:
                raise InputError(
                    where,
                    at(n),
                    "lacks the Account column: run `sacctmgr -P show assoc` (optionally "
                    "format=Cluster,Account,User,ParentName,Share)",
                )
            out.has_parents = "parentname" in cols
            continue
        if len(cells) == width + 1 and cells[-1] == "":
            cells.pop()
        if len(cells) != width:
            bad.bad(at(n), f"has {len(cells)} fields where the header has {width}")
            continue

        def get(name: str, cells: list[str] = cells, cols: dict[str, int] = cols) -> str:
            i = cols.get(name)
            return cells[i].strip() if i is not None else ""

        share = get("share") or get("fairshare")
        if share and not _share_ok(share):
            i = cols["share"] if "share" in cols else cols["fairshare"]
            bad.bad(at(n, i + 1, "Share"), f"{share!r} is not a Fairshare value (a number or 'parent')")
            continue
        account = get("account").lower()
        if not account:
            bad.bad(at(n, cols["account"] + 1, "Account"), "is empty")
            continue
        out.rows.append(Assoc(get("cluster"), account, get("user"), get("parentname").lower(), share, n))
    return out


def _read_dump(text: str, where: str, bad: BadRows) -> Associations:
    out = Associations(form="sacctmgr dump")
    cluster = ""
    parent = ""
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = _DUMP_LINE.match(s)
        if m is None:
            bad.bad(
                at(n), f"is not a `sacctmgr dump` line (Cluster/Parent/Account/User - 'name'...): {s[:60]!r}"
            )
            continue
        kind, name, rest = m.group(1), m.group(2), m.group(3)
        opts = {k.lower(): v.strip("'") for k, v in _DUMP_OPT.findall(rest)}
        share = opts.get("fairshare", "")
        if share and not _share_ok(share):
            col = raw.find("Fairshare=") + len("Fairshare=") + 1
            bad.bad(at(n, col, "Fairshare"), f"{share!r} is not a Fairshare value (a number or 'parent')")
            continue
        if kind == "Cluster":
            cluster = name
            parent = ""
        elif kind == "Parent":
            parent = name.lower()
        elif kind == "Account":
            out.rows.append(Assoc(cluster, name.lower(), "", parent, share, n))
        else:
            out.rows.append(Assoc(cluster, parent, name, "", share, n))
    return out


def _share_ok(share: str) -> bool:
    if share.lower() == "parent":
        return True
    try:
        return float(share) >= 0
    except ValueError:
        return False
