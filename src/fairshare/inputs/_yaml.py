"""YAML to Python data in one pass over libyaml's events, with the input rules checked as it streams.

PyYAML's SafeLoader composes a node tree and resolves every scalar with regular expressions in
Python: a policy of 100,000 groups took about a minute. Here libyaml (PyYAML's C parser) produces
the events and this module builds the data from them directly, resolving each distinct plain scalar
once (SafeLoader's own resolver and constructors, so values are exactly what `yaml.safe_load`
gives). While it streams it refuses, at the line and column where they happen:

- a character YAML does not allow (a control character, checked before parsing),
- duplicate keys in a mapping (PyYAML silently keeps the last),
- nesting deeper than MAX_YAML_DEPTH (no recursion: a deep file cannot exhaust the stack),
- more than MAX_YAML_VALUES values (before aliases are expanded; `_count_values` counts after),
- more than one document, an undefined alias, a tag it does not know.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.resolver import Resolver

from ..errors import InputError
from .limits import MAX_YAML_DEPTH, MAX_YAML_VALUES

_Parser: Any
try:
    from yaml._yaml import CParser as _Parser
except ImportError:  # PyYAML built without libyaml: the same events, from its Python parser
    _Parser = None

STR = "tag:yaml.org,2002:str"
MAP = "tag:yaml.org,2002:map"
SEQ = "tag:yaml.org,2002:seq"
MERGE = "tag:yaml.org,2002:merge"

# YAML 1.1's printable characters (PyYAML's Reader.NON_PRINTABLE, inverted)
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _problem(mark: Any, message: str) -> ConstructorError:
    return ConstructorError(None, None, message, mark)


def check_printable(text: str, where: str) -> None:
    """A character YAML refuses, named at its line and column (PyYAML says only `position N`)."""
    bad = _NOT_PRINTABLE.search(text)
    if bad is None:
        return
    i = bad.start()
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    ch = text[i]
    raise InputError(
        where,
        f"line {line}, column {column}",
        f"not valid YAML: the control character U+{ord(ch):04X} is not allowed in a YAML file",
    )


class _Scalars:
    """Resolve and construct scalars as SafeLoader does; each distinct plain scalar once."""

    def __init__(self) -> None:
        self.resolver = Resolver()
        self.constructor = SafeConstructor()
        self.cache: dict[tuple[str, str], Any] = {}
        self.plain: dict[str, str] = {}

    def value(self, event: Any) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:  # quoted, or `! text`
                return event.value
            text = event.value
            tag = self.plain.get(text)
            if tag is None:
                tag = self.resolver.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
                self.plain[text] = tag
        if tag == STR:
            return event.value
        if tag == MERGE:
            return _Merge()
        key = (tag, event.value)
        if key in self.cache:
            return self.cache[key]
        make = self.constructor.yaml_constructors.get(tag)
        if make is None:
            raise _problem(event.start_mark, f"the tag {tag!r} is not supported here")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            out = make(self.constructor, node)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError) as exc:
            if tag.endswith((":int", ":float")):
                problem = f"is not a number within the limits ({len(str(event.value)):,} characters)"
            elif tag.endswith(":timestamp"):
                problem = f"is not a date: {exc}"
            else:
                problem = f"cannot be read: {exc}"
            raise _problem(event.start_mark, f"{_show(event.value)} {problem}") from None
        if isinstance(out, list | dict | set):  # a mutable result is never shared
            return out
        self.cache[key] = out
        return out


class _Merge:
    """The `<<` key of a mapping (YAML 1.1 merge): its value's keys come first, own keys win."""

    __slots__ = ()

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Merge)


class _Frame:
    __slots__ = ("container", "key", "key_mark", "marks", "merges", "start")

    def __init__(self, container: list[Any] | dict[Any, Any], start: Any) -> None:
        self.container = container
        self.start = start
        self.key: Any = _NO_KEY
        self.key_mark: Any = None
        self.marks: dict[Any, Any] = {}
        self.merges: list[tuple[Any, Any]] = []


_NO_KEY = object()


def _merge(frame: _Frame) -> dict[Any, Any]:
    """The mapping with its `<<` merges applied as PyYAML does (merged keys first, the first source
    giving a key wins, own keys win over all)."""
    own = frame.container
    assert isinstance(own, dict)
    out: dict[Any, Any] = {}
    for value, mark in frame.merges:
        sources = value if isinstance(value, list) else [value]
        for src in sources:  # the first source that gives a key wins
            if not isinstance(src, dict):
                raise _problem(mark, f"expected a mapping or list of mappings for merging, got {_show(src)}")
            for k, v in src.items():
                if k not in out:
                    out[k] = v
    out.update(own)
    return out


def load(text: str, where: str) -> Any:
    """The data of a one-document YAML text (None when it holds none)."""
    check_printable(text, where)
    parser = _Parser(text) if _Parser is not None else yaml.SafeLoader(text)
    scalars = _Scalars()
    anchors: dict[str, Any] = {}
    stack: list[_Frame] = []
    root: Any = None
    documents = 0
    count = 0
    scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    get_event, value_of = parser.get_event, scalars.value
    try:
        while True:
            event: Any = get_event()
            kind = type(event)
            if kind is scalar:
                count += 1
                if count > MAX_YAML_VALUES:
                    _too_many(where, event)
                value = value_of(event)
                if event.anchor is not None:
                    anchors[event.anchor] = value
                if stack:
                    frame = stack[-1]
                    if frame.key is not _NO_KEY and type(frame.key) is not _Merge:  # the common case
                        frame.container[frame.key] = value
                        frame.key = _NO_KEY
                        continue
                root = _add(stack, value, event.start_mark, root)
            elif kind in ends:
                frame = stack.pop()
                value = frame.container
                if frame.merges and isinstance(value, dict):
                    merged = _merge(frame)
                    value.clear()
                    value.update(merged)
                root = _add(stack, value, frame.start, root)
            elif kind is mapping_start or kind is sequence_start:
                count += 1
                if count > MAX_YAML_VALUES:
                    _too_many(where, event)
                is_map = kind is mapping_start
                tag = event.tag
                if tag is not None and tag not in ("!", MAP if is_map else SEQ):
                    raise _problem(event.start_mark, f"the tag {tag!r} is not supported here")
                if len(stack) >= MAX_YAML_DEPTH:
                    raise yaml.composer.ComposerError(
                        None,
                        None,
                        f"nested more than {MAX_YAML_DEPTH} levels deep (the limit; a policy tree may "
                        "have 16 levels)",
                        event.start_mark,
                    )
                container: list[Any] | dict[Any, Any] = {} if is_map else []
                if event.anchor is not None:
                    anchors[event.anchor] = container
                stack.append(_Frame(container, event.start_mark))
            elif kind is alias:
                count += 1
                if count > MAX_YAML_VALUES:
                    _too_many(where, event)
                if event.anchor not in anchors:
                    raise yaml.composer.ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                    )
                root = _add(stack, anchors[event.anchor], event.start_mark, root)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise yaml.composer.ComposerError(
                        "expected a single document in the stream",
                        None,
                        "but found another document",
                        event.start_mark,
                    )
            elif event is None or kind is yaml.StreamEndEvent:
                break
    except RecursionError:
        raise InputError(where, "", "not valid YAML: nested too deeply") from None
    return root


def _too_many(where: str, event: Any) -> None:
    raise InputError(
        where, _at(event.start_mark), f"more than {MAX_YAML_VALUES:,} values (the limit for one YAML file)"
    )


def _add(stack: list[_Frame], value: Any, mark: Any, root: Any) -> Any:
    """Put `value` into the innermost open collection (as an item, a key or a key's value); return
    the document's root (the value itself when nothing is open)."""
    if not stack:
        return value
    frame = stack[-1]
    container = frame.container
    if isinstance(container, list):
        container.append(value)
        return root
    if frame.key is _NO_KEY:
        if isinstance(value, _Merge):
            frame.key, frame.key_mark = value, mark
            return root
        try:
            first = frame.marks.get(value)
        except TypeError:
            raise _problem(mark, f"found an unhashable key {_show(value)}") from None
        if first is not None:
            raise _problem(mark, f"duplicate key {value!r} (first given at line {first.line + 1})")
        frame.marks[value] = mark
        frame.key, frame.key_mark = value, mark
        return root
    if isinstance(frame.key, _Merge):
        frame.merges.append((value, frame.key_mark))
    else:
        container[frame.key] = value
    frame.key = _NO_KEY
    return root
