"""Envoy JSON of protobuf messages for ``cpx translate`` and debug output, with maps in key order.

The result is what ``json_format.MessageToDict`` gives (maps then sorted, since the runtime renders
them in no fixed order and translate output must not vary from run to run), built faster: the
runtime's printer asks each field descriptor what it is for every value it renders, which took
longer than the whole translation at 10k routes.  Here each field is looked at once and gets a
converter; well-known types with a JSON form of their own (Duration, Struct, ...) and the scalars
whose rendering has corner cases (enums, bytes, floats) still go through ``MessageToDict``.
"""

from __future__ import annotations

import functools
import json
import marshal
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_ANY = "google.protobuf.Any"
# Types rendered by the runtime itself: their JSON is not a plain object of their fields.
_OWN_FORM = frozenset({"google.protobuf.Duration", "google.protobuf.FieldMask", "google.protobuf.ListValue"})
_OWN_FORM |= {"google.protobuf.Struct", "google.protobuf.Timestamp", "google.protobuf.Value"}
_WRAPPERS_FILE = "google/protobuf/wrappers.proto"
_INT64 = frozenset(
    {FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64}  # quoted: JSON numbers lose precision
)
_AS_IS = frozenset({FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_UINT32})

Convert = Callable[[Any], Any]


def message_json(message: Message) -> Any:
    """``message`` as ``MessageToDict`` renders it, every map's entries in key order."""
    return _converter(message.DESCRIPTOR)(message)


# Per message type: how its messages render (a type whose memo was given up: without the memo).
_CONVERTERS: dict[Descriptor, Convert] = {}


def _converter(descriptor: Descriptor) -> Convert:
    known = _CONVERTERS.get(descriptor)
    if known is None:
        known = _CONVERTERS[descriptor] = _new_converter(descriptor)
    return known


def _new_converter(descriptor: Descriptor) -> Convert:
    name = descriptor.full_name
    if name == _ANY:
        return _by_content(descriptor, _any_json)
    if name in _OWN_FORM:
        return _own_form_json
    if descriptor.file.name == _WRAPPERS_FILE:
        value = _value_converter(descriptor.fields_by_name["value"])
        return lambda message: value(message.value)
    return _by_content(descriptor, _regular_json)


# Generated resources repeat their parts (every cluster's EDS config, every host's metadata and
# headers, a listener's filters): a type's JSON is kept by the part's serialised bytes, which
# determine it (serialising in C costs a fraction of the walk). A type whose parts keep missing
# (names, paths: unique) is walked without lookups, and without this wrapper, from then on.
_MEMO_TRIAL = 64  # misses before a type's hit rate is judged
_MEMO_ENTRIES = 4096  # per type


def _by_content(descriptor: Descriptor, convert: Convert) -> Convert:
    memo: dict[bytes, bytes] = {}
    hits = misses = 0
    given_up = False

    def by_content(message: Any) -> Any:
        nonlocal hits, misses, given_up
        data = message.SerializeToString(deterministic=True)
        known = memo.get(data)
        if known is not None:
            hits += 1
            return marshal.loads(known)  # a fresh copy: callers may change what they get
        misses += 1
        if misses >= _MEMO_TRIAL and hits * 4 < misses and not given_up:
            given_up = True
            _without_memo(descriptor, convert)
        js = convert(message)
        if len(memo) < _MEMO_ENTRIES and _nested(js):  # a flat object costs no more to walk again
            memo[data] = marshal.dumps(js)
        return js

    return by_content


def _without_memo(descriptor: Descriptor, convert: Convert) -> None:
    """From now on, render messages of this type with ``convert`` itself: fields made with the
    memo are made again (a call less per message, a tenth of rendering 10k routes)."""
    _CONVERTERS[descriptor] = convert
    for field in [f for f in _FIELDS if f.message_type is descriptor or _map_of(f, descriptor)]:
        del _FIELDS[field]


def _map_of(field: FieldDescriptor, descriptor: Descriptor) -> bool:
    entry = field.message_type
    return (
        entry is not None
        and entry.GetOptions().map_entry
        and (entry.fields_by_name["value"].message_type is descriptor)
    )


def _nested(js: dict[str, Any]) -> bool:
    """Whether rendering the object walked more than one message (it holds objects)."""
    return any(type(v) is dict or (type(v) is list and v and type(v[0]) is dict) for v in js.values())


# Per field: its JSON name and how its value renders (None: as it is), made when the field is first met.
_FIELDS: dict[FieldDescriptor, tuple[str, Convert | None]] = {}


def _regular_json(message: Message, out: dict[str, Any] | None = None) -> dict[str, Any]:
    js: dict[str, Any] = {} if out is None else out
    for field, value in message.ListFields():
        known = _FIELDS.get(field)
        if known is None:
            name = f"[{field.full_name}]" if field.is_extension else field.json_name
            known = _FIELDS[field] = (name, _field_converter(field))
        name, convert = known
        js[name] = value if convert is None else convert(value)
    return js


def _own_form_json(message: Message) -> Any:
    text = _own_form_text(message.DESCRIPTOR, message.SerializeToString(deterministic=True))
    return text if type(text) is str else json.loads(text[0])


# By content: translate renders the same few durations (and metadata) on thousands of resources.
@functools.lru_cache(maxsize=4096)
def _own_form_text(descriptor: Descriptor, data: bytes) -> str | tuple[str]:
    """The JSON of a well-known type: a string as it is, anything else as JSON text in a tuple (a
    fresh copy each time: the caller may change it)."""
    message = message_factory.GetMessageClass(descriptor).FromString(data)
    rendered = _sort_maps(message, json_format.MessageToDict(message))
    return rendered if type(rendered) is str else (json.dumps(rendered),)


def _any_json(message: Any) -> Any:
    if not message.ListFields():
        return {}
    js: dict[str, Any] = {"@type": message.type_url}
    inner = _unpacked(message)
    descriptor = inner.DESCRIPTOR
    if descriptor.full_name in _OWN_FORM or descriptor.file.name == _WRAPPERS_FILE:
        js["value"] = json_format.MessageToDict(inner)  # no map sorting, as before (a scalar or list)
        return js
    return _regular_json(inner, js)


def _unpacked(message: Any) -> Message:
    inner: Message = message_factory.GetMessageClass(
        descriptor_pool.Default().FindMessageTypeByName(message.TypeName())
    )()
    inner.ParseFromString(message.value)
    return inner


def _field_converter(field: FieldDescriptor) -> Convert | None:
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        key_field = message_type.fields_by_name["key"]
        value = _value_converter(message_type.fields_by_name["value"])
        bool_keys = key_field.cpp_type == FieldDescriptor.CPPTYPE_BOOL

        def convert_map(entries: Any) -> dict[str, Any]:
            keys = {(("true" if key else "false") if bool_keys else str(key)): key for key in entries}
            return {shown: value(entries[keys[shown]]) for shown in sorted(keys)}

        return convert_map
    one = _value_converter(field)
    if one is _same:  # strings and 32-bit integers, most of the fields: no call per value
        return list if field.is_repeated else None
    if field.is_repeated:
        return lambda values: list(map(one, values))
    return one


def _value_converter(field: FieldDescriptor) -> Convert:
    """How one value of ``field`` (or one item of it) renders."""
    if field.message_type is not None:
        return _converter(field.message_type)
    cpp_type = field.cpp_type
    if cpp_type == FieldDescriptor.CPPTYPE_STRING and field.type != FieldDescriptor.TYPE_BYTES:
        return _same
    if cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return bool
    if cpp_type in _AS_IS:
        return _same
    if cpp_type in _INT64:
        return str
    return functools.partial(_rendered_alone, field)  # enums, bytes, floats: the runtime's own rules


def _same(value: Any) -> Any:
    return value


@functools.lru_cache(maxsize=4096)
def _rendered_alone(field: FieldDescriptor, value: Any) -> Any:
    """The runtime's rendering of one value of ``field``: a message holding just that value."""
    holder = message_factory.GetMessageClass(field.containing_type)()
    target = holder.Extensions[field] if field.is_extension else None
    if field.is_repeated:
        (target if target is not None else getattr(holder, field.name)).append(value)
    elif target is not None:
        holder.Extensions[field] = value
    else:
        setattr(holder, field.name, value)
    rendered = json_format.MessageToDict(holder)
    if not rendered:  # a proto3 default value of a field without presence: MessageToDict leaves it out
        rendered = json_format.MessageToDict(holder, always_print_fields_with_no_presence=True)
    (shown,) = rendered.values() if len(rendered) == 1 else [rendered[field.json_name]]
    return shown[0] if field.is_repeated else shown


@functools.cache
def _message_fields(descriptor: Any) -> tuple[tuple[str, str, bool, bool, bool], ...]:
    """(name, JSON name, is a map, a map of messages, repeated) of the fields of ``descriptor``
    that are maps or may hold one (through an ``Any`` too), read from the descriptors once."""
    out = []
    for field in descriptor.fields:
        if field.message_type is None or not _may_hold_maps(field.message_type):
            continue
        is_map = field.message_type.GetOptions().map_entry
        map_of_messages = is_map and field.message_type.fields_by_name["value"].message_type is not None
        out.append((field.name, field.json_name, is_map, map_of_messages, field.is_repeated))
    return tuple(out)


_IN_PROGRESS: set[str] = set()


@functools.cache
def _may_hold_maps(descriptor: Any) -> bool:
    """Whether a message of this type can contain a map field at any depth."""
    name = descriptor.full_name
    if name == _ANY or descriptor.GetOptions().map_entry or name in _IN_PROGRESS:
        return True  # an Any can hold anything; a type met again while open: assume so
    _IN_PROGRESS.add(name)
    try:
        return any(f.message_type is not None and _may_hold_maps(f.message_type) for f in descriptor.fields)
    finally:
        _IN_PROGRESS.discard(name)


def _sort_maps(message: Message, rendered: Any) -> Any:
    """``rendered`` (``MessageToDict`` of a well-known type) with the entries of the maps it may
    hold in key order, as the renderer before this one sorted them."""
    if not isinstance(rendered, dict):
        return rendered  # Duration, Value, ...: no object of fields
    for name, json_name, is_map, map_of_messages, is_repeated in _message_fields(message.DESCRIPTOR):
        if json_name not in rendered:
            continue
        value = getattr(message, name)
        if is_map:
            entries = sorted(rendered[json_name].items())
            if map_of_messages:
                entries = [(k, _sort_maps(value[k], v)) for k, v in entries]
            rendered[json_name] = dict(entries)
        elif is_repeated:
            for item, out in zip(value, rendered[json_name], strict=True):
                _sort_maps(item, out)
        else:
            _sort_maps(value, rendered[json_name])
    return rendered
