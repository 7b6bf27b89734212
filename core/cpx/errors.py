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
