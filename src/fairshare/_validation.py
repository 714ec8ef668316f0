"""Turning pydantic validation errors and YAML problems into InputError naming file and key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError

M = TypeVar("M", bound=BaseModel)


def key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _message(err: Any) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def validate(model: type[M], data: Any, where: str, context: dict[str, Any] | None = None) -> M:
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(where, key_path(tuple(first["loc"])), _message(first)) from None


def load_yaml(path: Path) -> Any:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except OSError as exc:
        raise InputError(where, "", f"cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(where, at, f"not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(where, "", "expected a mapping at the top level")
    return data
