"""Turning pydantic validation errors and YAML problems into InputError naming file and key path."""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import gzip
import types
import unicodedata
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from ..errors import InputError
from . import _yaml
from .limits import (
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    MAX_YAML_BYTES,
    MAX_YAML_VALUES,
    MAX_YEAR,
    MIN_YEAR,
    fmt_limit,
)
from .reader import decode, input_cap, read_bytes

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Every input model: unknown keys are errors, values are immutable once loaded, and a float is
    finite (`.inf` and `.nan` are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- one rule for the type of every value (README "Limits and bad input") ---------------------
# A number is a number or text holding one ("2", "1e3"); a whole number has no fractional part
# (2, 2.0, "2"); true/false are never numbers; text keys take text only; a date is a date, never a
# number. The same rule holds for the workload's CSV cells and JSON Lines values (workload.py).


def not_bool(v: Any) -> Any:
    """YAML reads `yes`/`true` as booleans; pydantic would take them as 1 for a number."""
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r}")
    return v


# Bidirectional-text controls (they reorder what a terminal shows: a name could look like another)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text_problem(value: str, *, name: bool, limit: int | None = None) -> str | None:
    """Why `value` cannot be a name (or free text), or None. Names refuse control characters
    (newline, tab, NUL...), line separators and bidirectional controls such as the right-to-left
    override; free text refuses the bidirectional controls and control characters but newlines and
    tabs. Emoji and every script are fine."""
    most = limit if limit is not None else (MAX_NAME_CHARS if name else MAX_TEXT_CHARS)
    if len(value) > most:
        return f"is {len(value):,} characters long, more than the limit of {most:,}"
    if value.isprintable():  # the common case, in C: no control or format character at all
        return None
    for ch in value:
        if ch in _BIDI:
            return (
                f"contains the invisible bidirectional control U+{ord(ch):04X} "
                f"({unicodedata.name(ch, 'bidi control')}), which changes how text is shown"
            )
        cat = unicodedata.category(ch)
        if cat == "Cs":  # a lone surrogate (from a YAML or JSON escape): not text, cannot be written
            return f"contains the lone surrogate U+{ord(ch):04X}, which is not a character"
        if (cat == "Cc" and (name or ch not in "\n\t\r")) or (name and cat in ("Zl", "Zp")):
            return f"contains the control character U+{ord(ch):04X}: names must be printable"
        if name and ch == "\ufeff":  # a byte-order mark inside a file: invisible, names look alike
            return "contains the byte-order mark U+FEFF, an invisible character: names must be printable"
    return None


def _name(v: str) -> str:
    problem = text_problem(v, name=True)
    if problem:
        raise ValueError(f"the name {_show(v)} {problem}")
    return v


def _text(v: str) -> str:
    problem = text_problem(v, name=False)
    if problem:
        raise ValueError(f"the text {_show(v)} {problem}")
    return v


def _date_only(v: Any) -> Any:
    if isinstance(v, bool | int | float):
        raise ValueError(f"expected a date such as 2027-01-31, got {v!r}")
    return v


def check_year(d: dt.date, what: str = "a date") -> None:
    if not MIN_YEAR <= d.year <= MAX_YEAR:
        raise ValueError(f"{what} must be in the years {MIN_YEAR} to {MAX_YEAR}, got {d.isoformat()}")


Number = Annotated[float, BeforeValidator(not_bool)]
Whole = Annotated[int, BeforeValidator(not_bool)]
Name = Annotated[str, AfterValidator(_name)]
Text = Annotated[str, AfterValidator(_text)]
Date = Annotated[dt.date, BeforeValidator(_date_only)]


Loc = tuple[int | str, ...]


class AtPath(ValueError):
    """A validator's error about a place below the value it validates (e.g. `[1].name` of a list).

    `rel` is appended to pydantic's location, so the message names the exact key; raise it from
    field or model validators instead of a bare ValueError when the culprit is deeper.
    """

    def __init__(self, rel: Loc, message: str) -> None:
        super().__init__(message)
        self.rel = rel


def key_path(loc: Loc) -> str:
    """`tree[0].children[1].share`; a key that is not a plain printable word is quoted
    (`classes['de\\u202ebug']`), so an invisible control cannot garble the message."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":  # pydantic's marker for "the key itself" of a dict entry
            continue
        elif not part.isprintable() or any(c in part for c in ".[]'\" "):
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(tp: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model class that validates the value at `loc` (None when it is not a model)."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            tp = field.annotation
            continue
        origin, args = get_origin(tp), get_args(tp)
        if origin in (tuple, list) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _unknown_key(model: type[BaseModel], loc: Loc) -> str:
    key = str(loc[-1]) if loc else "?"
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return f"unknown key {key!r}"
    known = list(owner.model_fields)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key {key!r}{hint} (allowed: {', '.join(known)})"


_TYPE_MESSAGES = {
    "int_parsing": "expected a whole number",
    "int_parsing_size": "expected a whole number within the limits (README: Limits and bad input)",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "finite_number": "expected a finite number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text (quote it in YAML)",
    "tuple_type": "expected a list (one `- item` per entry)",
    "list_type": "expected a list (one `- item` per entry)",
    "dict_type": "expected a mapping (`key: value` entries)",
    "model_type": "expected a mapping (`key: value` entries)",
    "model_attributes_type": "expected a mapping (`key: value` entries)",
    "date_type": "expected a date such as 2027-01-31",
    "date_parsing": "expected a date such as 2027-01-31",
    "date_from_datetime_parsing": "expected a date such as 2027-01-31",
    "date_from_datetime_inexact": "expected a date such as 2027-01-31 (no time of day)",
}


def _message(model: type[BaseModel], err: ErrorDetails, loc: Loc) -> str:
    kind = err.get("type", "")
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    got = err.get("input")
    if kind == "extra_forbidden":
        return _unknown_key(model, loc)
    if kind == "missing":
        return f"required key {loc[-1]!r} is missing" if loc else "required key is missing"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {_show(got)}"
    if kind in ("too_short", "string_too_short"):
        n = ctx.get("min_length", 1)
        return "must not be empty" if n == 1 else f"needs at least {n} entries"
    if kind in ("too_long", "string_too_long"):
        n = ctx.get("max_length", "?")
        return f"has more than the limit of {fmt_limit(n) if isinstance(n, int) else n} entries"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[
            kind
        ]
        bound = next(iter(ctx.values()), "?")
        shown = fmt_limit(bound) if isinstance(bound, int | float) else bound
        limit = " (the limit)" if op in ("<=", "<") else ""
        return f"must be {op} {shown}{limit}, got {_show(got)}"
    if kind == "string_pattern_mismatch":
        return f"may contain only letters, digits, '_', '.' and '-', got {_show(got)}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected', 'one of the allowed values')}, got {_show(got)}"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def validate(model: type[M], data: Any, where: str, context: dict[str, Any] | None = None) -> M:
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: Loc = tuple(first["loc"])
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, AtPath):
            raise InputError(where, key_path(loc + cause.rel), str(cause)) from None
        raise InputError(where, key_path(loc), _message(model, first, loc)) from None


def _count_values(data: Any, where: str) -> None:
    """Refuse data whose aliases expand to more than MAX_YAML_VALUES values (or loop)."""
    stack = [data]
    seen = 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_YAML_VALUES:
            raise InputError(
                where,
                "",
                f"more than {MAX_YAML_VALUES:,} values once its aliases (*name) are expanded (the "
                "limit): an alias that refers to itself or to many others",
            )
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@contextmanager
def reading_errors(where: str) -> Iterator[None]:
    """Turn a text file that cannot be read, decoded or parsed as CSV into an InputError naming it."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(where, "", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    except csv.Error as exc:
        raise InputError(where, "", f"not valid CSV: {exc}") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(where, "", f"a damaged gzip file: {exc or 'it ends too early'}") from None
    except IsADirectoryError:
        raise InputError(where, "", "is a folder, not a file") from None
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except OSError as exc:
        raise InputError(where, "", f"cannot read: {exc.strerror or exc}") from None


def read_text(path: Path, cap: int | None = None) -> str:
    """A UTF-8 text file (a leading byte-order mark is dropped), read whole through the bounded
    reader (fairshare.inputs.reader: special files refused, size capped, gzip decompressed). Errors
    name the file: not found, a folder, not UTF-8 (at its line and column), damaged gzip, too big."""
    data, gzipped = read_bytes(path, cap)
    return decode(data, str(path), gzipped)


def read_yaml_text(path: Path) -> str:
    """The text of a YAML input (policy, cluster) through the bounded reader, capped at
    MAX_YAML_BYTES (or FAIRSHARE_MAX_INPUT_BYTES)."""
    return read_text(path, input_cap(MAX_YAML_BYTES))


def load_yaml(path: Path) -> Any:
    return parse_yaml(read_yaml_text(path), str(path))


def parse_yaml(text: str, where: str) -> Any:
    """A YAML mapping from text (a file's, or a policy sent to the service); errors name `where`
    and the line and column."""
    try:
        data = _yaml.load(text, where)  # SafeLoader's values: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        detail = f"{problem} ({context})" if context and "duplicate key" not in problem else problem
        raise InputError(where, at, f"not valid YAML: {detail}") from None
    except RecursionError:
        raise InputError(where, "", "not valid YAML: nested too deeply") from None
    if data is None:
        raise InputError(where, "", "the file is empty: expected a mapping of keys (see FORMATS.md)")
    if not isinstance(data, dict):
        raise InputError(
            where, "", f"expected a mapping of keys at the top level, got a {type(data).__name__}"
        )
    _count_values(data, where)
    return data
