"""Accept envoy-data-plane (betterproto2) messages at the plugin boundary.

Third-party plugins written against envoy-data-plane may hand such messages to the core (for
example from their own resource cache).  They are converted once, here, into the equivalent
xds-protos (upb) message by serialising and parsing: betterproto2 is about 3000x slower to
serialise, so it never appears on the hot path.  Install with ``pip install 'cpx[betterproto]'``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

BETTERPROTO_ROOT = "envoy_data_plane."


def is_betterproto(obj: Any) -> bool:
    return any(cls.__module__.startswith("betterproto2") for cls in type(obj).__mro__)


def _flat_names(descriptor: Descriptor, prefix: str = "") -> dict[str, Descriptor]:
    """betterproto names nested messages by concatenation (Cluster.LbPolicy -> ClusterLbPolicy)."""
    name = prefix + descriptor.name
    found = {name: descriptor}
    for nested in descriptor.nested_types:
        found.update(_flat_names(nested, name))
    return found


@functools.cache
def _package_index(package: str) -> dict[str, Descriptor]:
    """Import every xds-protos module of one proto package and index its messages by flat name."""
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(module.__path__):
        if info.name.endswith("_pb2"):
            importlib.import_module(f"{package}.{info.name}")
    pool = descriptor_pool.Default()
    index: dict[str, Descriptor] = {}
    for info in pkgutil.iter_modules(module.__path__):
        if not info.name.endswith("_pb2"):
            continue
        file = pool.FindFileByName(importlib.import_module(f"{package}.{info.name}").DESCRIPTOR.name)
        for descriptor in file.message_types_by_name.values():
            index.update(_flat_names(descriptor))
    return index


def xds_class_for(betterproto_class: type) -> type[Message]:
    module = betterproto_class.__module__
    if not module.startswith(BETTERPROTO_ROOT):
        raise TypeError(f"{module}.{betterproto_class.__name__} is not an envoy-data-plane message")
    package = module.removeprefix(BETTERPROTO_ROOT)
    try:
        descriptor = _package_index(package)[betterproto_class.__name__]
    except (ModuleNotFoundError, KeyError):
        raise TypeError(f"no xds-protos message matches {module}.{betterproto_class.__name__}") from None
    cls: type[Message] = message_factory.GetMessageClass(descriptor)
    return cls


def to_xds(message: Any) -> Message:
    """An xds-protos message equal to ``message`` (returned as is if it already is one)."""
    if isinstance(message, Message):
        return message
    if not is_betterproto(message):
        raise TypeError(f"expected a protobuf or envoy-data-plane message, got {type(message).__name__}")
    converted = xds_class_for(type(message))()
    converted.ParseFromString(bytes(message))
    return converted
