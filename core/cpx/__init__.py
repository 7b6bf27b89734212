"""cpx: an Envoy control plane that does what Project Contour does, built as a plugin framework.

The public facade for plugin authors: the hook marker and the records plugins yield.
"""

from __future__ import annotations

from cpx.hookspecs import hookimpl
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

__version__ = "0.1.0"
__all__ = [
    "GroupVersionKind",
    "ObjectKey",
    "Observer",
    "OptionSpec",
    "Phase",
    "Processor",
    "ProcessorSpec",
    "ResourceCache",
    "ResourceCacheSpec",
    "StatusWriterSpec",
    "WatchSpec",
    "hookimpl",
]
