"""YAML output of ``cpx translate``: block YAML written directly, libyaml for the hard scalars.

The output is byte for byte what ``yaml.dump(doc, Dumper=CSafeDumper, sort_keys=False)`` writes.
That goes value -> node (the representer) -> event (the serializer) -> text, costing more than the
whole translation at 10k routes.  For the JSON-shaped values translate prints (dicts, lists,
strings, numbers, booleans, None, nothing shared) the block layout is fixed, and nearly every
scalar is a plain word that needs neither quoting nor line folding: those are written here.  Any
other scalar (quoted, escaped, folded, a float) is written by libyaml itself, in a small document
that puts it at the same indentation and column, so its text is what the whole dump would hold.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import yaml

from cpx.sources.manifests import resolve_tag

try:
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Dumper = yaml.SafeDumper

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_PLAIN = (True, False)  # the ``implicit`` flags of a plain scalar, for the resolver
_QUOTED = (False, True)
_REPRESENTER = yaml.representer.SafeRepresenter()  # numbers, booleans and None, as yaml.dump writes them


def _events(data: Any, out: list[yaml.Event]) -> None:
    """``data``'s events, as ``SafeRepresenter`` and the serializer make them: block style (as
    ``yaml.dump`` sets), keys in dict order, no anchors; a scalar's tag is implicit when the
    resolver would find it again (``"true"`` as a string must be quoted, ``true`` need not)."""
    kind = type(data)
    if kind is str:
        out.append(
            yaml.ScalarEvent(None, _STR, (resolve_tag(yaml.ScalarNode, data, _PLAIN) == _STR, True), data)
        )
    elif kind is dict:
        out.append(yaml.MappingStartEvent(None, _MAP, True, flow_style=False))
        for key, value in data.items():
            _events(key, out)
            _events(value, out)
        out.append(yaml.MappingEndEvent())
    elif kind is list:
        out.append(yaml.SequenceStartEvent(None, _SEQ, True, flow_style=False))
        for item in data:
            _events(item, out)
        out.append(yaml.SequenceEndEvent())
    else:
        node = _REPRESENTER.represent_data(data)
        tag, text = node.tag, node.value
        implicit = (
            resolve_tag(yaml.ScalarNode, text, _PLAIN) == tag,
            resolve_tag(yaml.ScalarNode, text, _QUOTED) == tag,
        )
        out.append(yaml.ScalarEvent(None, tag, implicit, text))


def _event_dump(doc: Any) -> str:
    """``doc`` through libyaml's emitter, fed the events the dumper would make."""
    events: list[yaml.Event] = [yaml.StreamStartEvent(), yaml.DocumentStartEvent()]
    _events(doc, events)
    events += [yaml.DocumentEndEvent(), yaml.StreamEndEvent()]
    text: str = yaml.emit(events, Dumper=_Dumper)
    return text


def dump(doc: Any) -> str:
    """``doc`` as ``yaml.dump`` writes ``json.loads(json.dumps(doc))``: block YAML of plain dicts,
    lists and scalars, nothing anchored."""
    if type(doc) is dict and doc:
        out: list[str] = []
        try:
            _mapping(doc, 0, out, "")
        except _Irregular:
            pass
        else:
            return "".join(out)
    # Through JSON: plain lists and dicts only (tuples, subclasses and non-string keys converted), none
    # shared (the emitter would anchor them).
    return _event_dump(json.loads(json.dumps(doc)))


class _Irregular(Exception):
    """A key the emitter writes as a complex key (``? key``) above a block (the layout differs), a
    key that is not a string, or a value that is not of a JSON type itself (a tuple, a subclass)."""


# libyaml's line width: a plain scalar with spaces may be folded at one past this column.
_WIDTH = 80
# Plain in block context whatever the column (no indicator, quote, escape or break in them), when the
# resolver reads them back as strings: the scalars written here without asking libyaml.
_PLAIN_CANDIDATE = re.compile(r"[A-Za-z0-9_/][-A-Za-z0-9_./=+()@,;]*(?: +[-A-Za-z0-9_./=+()@,;]+)*")
_MAX_SIMPLE_KEY = 127  # longer keys are written as complex keys


@functools.lru_cache(maxsize=65536)
def _plain(text: str) -> bool:
    return _PLAIN_CANDIDATE.fullmatch(text) is not None and resolve_tag(yaml.ScalarNode, text, _PLAIN) == _STR


# A string's last column from which it is written plain (-1: never), looked up with a bare dict.get in
# the loops below: they run once per line of output, where a function call per value costs a third.
_LAST_COLUMN: dict[str, int] = {}
_ANY_COLUMN = 1 << 30
_CACHED = 65536


def _last_column(text: str) -> int:
    if len(_LAST_COLUMN) >= _CACHED:
        _LAST_COLUMN.clear()
    found = -1 if not _plain(text) else _WIDTH - len(text) if " " in text else _ANY_COLUMN
    _LAST_COLUMN[text] = found
    return found


# Keys written as they are, above a value or before one (``"key: "``), by key.
_SIMPLE_KEYS: dict[str, str] = {}


def _simple_key(key: Any) -> str | None:
    if type(key) is not str:
        raise _Irregular(key)  # not JSON: 1 and True would share a cache entry
    if len(key) <= _MAX_SIMPLE_KEY and _plain(key):
        if len(_SIMPLE_KEYS) >= _CACHED:
            _SIMPLE_KEYS.clear()
        _SIMPLE_KEYS[key] = key
        return key
    return None


def _scalar_text(value: Any, column: int) -> str | None:
    """The plain text of ``value`` when written from ``column``, or None when libyaml must write it."""
    kind = type(value)
    if kind is str:
        text: str = value
        last = _LAST_COLUMN.get(text)
        if last is None:
            last = _last_column(text)
        return text if column <= last else None
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is float:
        return None  # exponents, .nan, ...: as libyaml writes them
    raise _Irregular(value)  # a tuple, a subclass: not what JSON would hand back


def _mapping(data: dict[str, Any], indent: int, out: list[str], lead: str) -> None:
    """Block mapping entries, keys at column ``indent``; the first line starts with ``lead`` (its
    indentation, or nothing after a sequence item's dash)."""
    pad = " " * indent
    for key, value in data.items():
        kind = type(value)
        if kind is dict or kind is list:
            if value:
                out.append(f"{lead}{_key_text(key)}:\n")
                if kind is dict:
                    _mapping(value, indent + 2, out, pad + "  ")
                else:
                    _sequence(value, indent, out, pad)
            else:
                out.append(f"{lead}{_key_text(key)}: {'{}' if kind is dict else '[]'}\n")
        else:
            simple = _SIMPLE_KEYS.get(key) or _simple_key(key)
            text = _scalar_text(value, indent + len(key) + 2) if simple is not None else None
            if text is not None:
                out.append(f"{lead}{key}: {text}\n")
            else:
                out.append(lead + _pair_text(indent, key, value, kind.__name__))
        lead = pad


def _sequence(data: list[Any], indent: int, out: list[str], lead: str) -> None:
    """Block sequence items, dashes at column ``indent``; the first line starts with ``lead``."""
    pad = " " * indent
    for value in data:
        kind = type(value)
        if kind is dict and value:
            _mapping(value, indent + 2, out, lead + "- ")
        elif kind is list and value:
            _sequence(value, indent + 2, out, lead + "- ")
        else:
            text = "{}" if kind is dict else "[]" if kind is list else _scalar_text(value, indent + 2)
            out.append(
                f"{lead}- {text}\n" if text is not None else lead + _item_text(indent, value, kind.__name__)
            )
        lead = pad


def _nested(value: Any, levels: int) -> tuple[Any, int]:
    """``value`` under ``levels`` mappings of one key ``a``, and the length of their lines."""
    for _ in range(levels):
        value = {"a": value}
    return value, sum(2 * i + 3 for i in range(levels))


# Cached with the value's type: 1, 1.0 and True are equal keys to a cache, yet written differently.
@functools.lru_cache(maxsize=4096)
def _pair_text(indent: int, key: Any, value: Any, kind: str) -> str:
    """``key: value`` (a scalar) as libyaml writes it with the key at ``indent``."""
    doc, skip = _nested({key: value}, indent // 2)
    return _event_dump(doc)[skip + indent :]


@functools.lru_cache(maxsize=4096)
def _item_text(indent: int, value: Any, kind: str) -> str:
    """``- value`` (a scalar) as libyaml writes it with the dash at ``indent``."""
    doc, skip = _nested([value], indent // 2 + 1)
    return _event_dump(doc)[skip + indent :]


@functools.lru_cache(maxsize=4096)
def _key_text(key: Any) -> str:
    """A key above a block value, as libyaml writes it: a simple key does not depend on its column."""
    if type(key) is not str:
        raise _Irregular(key)  # not JSON: 1 and True would share a cache entry
    if len(key) <= _MAX_SIMPLE_KEY and _plain(key):
        return key
    text = _event_dump({key: None})
    if text.startswith("?"):
        raise _Irregular(key)
    return text[: -len(": null\n")]
