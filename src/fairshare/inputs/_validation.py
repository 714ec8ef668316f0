"""Turning pydantic validation errors and YAML problems into InputError naming file and key path."""

from __future__ import annotations

import csv
import difflib
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from ..errors import InputError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Every input model: unknown keys are errors, values are immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
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
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[
            kind
        ]
        bound = next(iter(ctx.values()), "?")
        return f"must be {op} {bound}, got {_show(got)}"
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


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last one)."""


def _mapping_without_duplicates(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, yaml.Mark] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: construct_mapping reports it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first given at line {first.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


@contextmanager
def reading_errors(where: str) -> Iterator[None]:
    """Turn a text file that cannot be read, decoded or parsed as CSV into an InputError naming it."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(where, "", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    except csv.Error as exc:
        raise InputError(where, "", f"not valid CSV: {exc}") from None
    except OSError as exc:
        raise InputError(where, "", f"cannot read: {exc.strerror or exc}") from None


def load_yaml(path: Path) -> Any:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(where, "", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise InputError(where, "", f"cannot read: {exc.strerror or exc}") from None
    return parse_yaml(text, where)


def parse_yaml(text: str, where: str) -> Any:
    """A YAML mapping from text (e.g. a policy sent to the service); errors name `where` and the line."""
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects
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
    return data
