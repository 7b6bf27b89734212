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
    text = block_text(doc) if type(doc) is dict and doc else None
    if text is not None:
        return text
    # Through JSON: plain lists and dicts only (tuples, subclasses and non-string keys converted), none
    # shared (the emitter would anchor them).
    return _event_dump(json.loads(json.dumps(doc)))


def block_text(doc: dict[str, Any]) -> str | None:
    """:func:`dump` of a non-empty dict written here (None: not without libyaml).  Each top-level
    entry's lines depend on that entry only: the dumps of a dict's parts, joined, are its dump."""
    out: list[str] = []
    try:
        _mapping(doc, 0, out, "")
    except _Irregular:
        return None
    return "".join(out)


def items_text(items: list[Any], indent: int) -> str | None:
    """The lines of ``items`` in a block sequence with its dashes at column ``indent``, as a dump
    holding that sequence writes them (None: not without libyaml).  An item's lines depend on that
    item and the column only."""
    out: list[str] = []
    try:
        _sequence(items, indent, out, " " * indent)
    except _Irregular:
        return None
    return "".join(out)


class _Irregular(Exception):
    """A key the emitter writes as a complex key (``? key``) above a block (the layout differs), a
    key that is not a string, or a value that is not of a JSON type itself (a tuple, a subclass)."""


# libyaml's line width: a plain scalar with spaces may be folded at one past this column.
_WIDTH = 80
# Plain in block context whatever the column (no indicator, quote, escape or break in them), when the
# resolver reads them back as strings: the scalars written here without asking libyaml.
_PLAIN_CANDIDATE = re.compile(r"[A-Za-z0-9_/][-A-Za-z0-9_./=+()@,;]*(?: +[-A-Za-z0-9_./=+()@,;]+)*")
_MAX_SIMPLE_KEY = 127  # longer keys are written as complex keys


# The first characters the resolver has implicit types for (None: any); other words are strings.
_RESOLVED_FIRST = frozenset(yaml.resolver.Resolver.yaml_implicit_resolvers)


def _plain(text: str) -> bool:
    if _PLAIN_CANDIDATE.fullmatch(text) is None:
        return False
    if text[0] not in _RESOLVED_FIRST and None not in _RESOLVED_FIRST:
        return True  # most names: the resolver would look at no pattern (a tenth of the writer's time)
    return bool(resolve_tag(yaml.ScalarNode, text, _PLAIN) == _STR)


# The loops below run once per line of output: the common line (a simple key, a plain string) is
# recognised with two dict lookups and no function call (a function call per line costs a sixth).
# A string's last column from which it is written plain (-1: never):
_LAST_COLUMN: dict[str, int] = {}
# A simple key's width in ``key: value`` (the key, the colon and the space):
_KEY_WIDTH: dict[str, int] = {}
_ANY_COLUMN = 1 << 30
_CACHED = 65536


def _last_column(text: str) -> int:
    if len(_LAST_COLUMN) >= _CACHED:
        _LAST_COLUMN.clear()
    found = -1 if not _plain(text) else _WIDTH - len(text) if " " in text else _ANY_COLUMN
    _LAST_COLUMN[text] = found
    return found


def _simple_key(key: Any) -> bool:
    """Whether ``key`` is written as it is before its value (and remember it)."""
    if type(key) is not str:
        raise _Irregular(key)  # not JSON: 1 and True would share a cache entry
    if len(key) <= _MAX_SIMPLE_KEY and _plain(key):
        if len(_KEY_WIDTH) >= _CACHED:
            _KEY_WIDTH.clear()
        _KEY_WIDTH[key] = len(key) + 2
        return True
    return False


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
        if kind is str:
            width = _KEY_WIDTH.get(key)
            if width is not None:
                last = _LAST_COLUMN.get(value)
                if last is None:
                    last = _last_column(value)
                if indent + width <= last:
                    out.append(f"{lead}{key}: {value}\n")
                    lead = pad
                    continue
        elif kind is dict or kind is list:
            if value:
                out.append(f"{lead}{_key_text(key)}:\n")
                if kind is dict:
                    _mapping(value, indent + 2, out, pad + "  ")
                else:
                    _sequence(value, indent, out, pad)
            else:
                out.append(f"{lead}{_key_text(key)}: {'{}' if kind is dict else '[]'}\n")
            lead = pad
            continue
        out.append(lead + _scalar_pair(indent, key, value))
        lead = pad


def _scalar_pair(indent: int, key: Any, value: Any) -> str:
    """``key: value`` (a scalar) with the key at ``indent``, from the key on."""
    if key in _KEY_WIDTH or _simple_key(key):
        text = _scalar_text(value, indent + len(key) + 2)
        if text is not None:
            return f"{key}: {text}\n"
    return _pair_text(indent, key, value, type(value).__name__)


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
