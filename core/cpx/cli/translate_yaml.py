"""YAML output of ``cpx translate``: PyYAML's safe dumper and libyaml's emitter, minus their overhead.

The output is byte for byte what ``yaml.dump(doc, Dumper=CSafeDumper, sort_keys=False)`` writes; for
the JSON-shaped values translate prints (dicts, lists, strings, numbers, booleans, None, nothing
shared), the generic representer's per-value lookups and alias bookkeeping, and the resolver's
regular expressions run twice per scalar by the emitter, cost more than libyaml's emitting itself.
"""

from __future__ import annotations

from typing import Any

import yaml

from cpx.sources.manifests import NoPathResolvers, resolve_tag

try:
    _Base: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeDumper

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Dumper(NoPathResolvers, _Base):  # type: ignore[misc]
    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # The emitter passes a collection's items as its value; its tag depends on the kind alone.
        return resolve_tag(kind, value if kind is yaml.ScalarNode else None, implicit)

    def represent_data(self, data: Any) -> yaml.Node:
        """Strings, dicts and lists as ``SafeRepresenter`` makes them (block style, as ``yaml.dump``
        sets); anything else through it.  No object is shared, so no node needs an anchor."""
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data)
        if kind is dict:
            items = [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            return yaml.MappingNode(_MAP, items, flow_style=False)
        if kind is list:
            return yaml.SequenceNode(_SEQ, [self.represent_data(item) for item in data], flow_style=False)
        node: yaml.Node = super().represent_data(data)
        return node


def dump(doc: Any) -> str:
    """``doc`` (JSON-shaped: plain dicts, lists and scalars, no object twice) as block YAML."""
    text: str = yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    return text
