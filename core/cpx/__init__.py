"""cpx: an Envoy control plane that does what Project Contour does, built as a plugin framework.

The public facade for plugin authors: the hook marker, the records plugins yield, and ``blame``
(wrap each object's translation in it so that a crash leaves out that object, not the build).
"""

from __future__ import annotations

from cpx.errors import PluginDeclined
from cpx.hookspecs import hookimpl
from cpx.isolation import blame
from cpx.objects import GroupVersionKind, ObjectKey
from cpx.records import (
    Observer,
    OptionSpec,
    Phase,
    Processor,
    ProcessorSpec,
    ResourceCache,
    ResourceCacheSpec,
    StatusWriterSpec,
    WatchSpec,
)
from cpx.sources.view import Lookups, ReadIndex, SourceView

__version__ = "0.1.0"
__all__ = [
    "GroupVersionKind",
    "Lookups",
    "ObjectKey",
    "Observer",
    "OptionSpec",
    "Phase",
    "PluginDeclined",
    "Processor",
    "ProcessorSpec",
    "ReadIndex",
    "ResourceCache",
    "ResourceCacheSpec",
    "SourceView",
    "StatusWriterSpec",
    "WatchSpec",
    "blame",
    "hookimpl",
]
