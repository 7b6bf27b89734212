"""Run-time configuration shared by the core and the plugins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class Config:
    # xDS server (Contour's defaults and flag names).
    xds_address: str = "127.0.0.1"
    xds_port: int = 8001
    xds_cafile: str | None = None
    xds_cert_file: str | None = None
    xds_key_file: str | None = None
    # Where Envoy listens for the two static listeners.
    http_address: str = "0.0.0.0"
    http_port: int = 8080
    https_address: str = "0.0.0.0"
    https_port: int = 8443
    # Debounce of the event loop (Contour's HoldoffDelay / HoldoffMaxDelay).
    holdoff_delay: float = 0.1
    holdoff_max_delay: float = 0.5
    # Plugin-contributed options by their Python name (e.g. "ingress_class_name").
    options: Mapping[str, Any] = attrs.field(factory=dict)

    def option(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name)
        return default if value is None else value
