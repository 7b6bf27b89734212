"""Errors the core raises for the user to read (start-up, configuration, input)."""

from __future__ import annotations


class CpxError(Exception):
    """Base of every cpx error that is reported to the user without a traceback."""


class PluginError(CpxError):
    """A plugin is missing, broken, or conflicts with another."""


class ConfigError(CpxError):
    """An option or configuration value is invalid."""


class ManifestError(CpxError):
    """A manifest file cannot be read or parsed; names the file and document."""


class PluginDeclined(Exception):
    """Raised by a plugin's ``cpx_configure`` to opt out of this run: the host unregisters the
    plugin, logs the reason once, and uses none of its records."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
