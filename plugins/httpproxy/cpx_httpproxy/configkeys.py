"""How the plugin's options take Contour's configuration file values (``OptionSpec.config_convert``):
a check that names the key's problem when the file is read, then the text the flag takes."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import yaml
from cpx import ConfigError

Validate = Callable[[Any, str], list[str]]


def namespaced_name(value: Any) -> str:
    """Contour's "namespace/name" (an ExtensionService reference)."""
    text = str(value)
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"expected namespace/name, got {text!r}")
    return text


def key_values(value: Mapping[str, str]) -> tuple[str, ...]:
    """A mapping as the ``key=value`` items a repeatable flag takes."""
    for key, text in value.items():
        # The flag splits at commas and a part with "=" starts an item: keep that unambiguous.
        if not key or "=" in key or "," in key or any("=" in part for part in text.split(",")[1:]):
            raise ValueError(
                f"{key}: {text!r}: a key must be non-empty without '=' or ',', no '=' after a ','"
            )
    return tuple(f"{key}={text}" for key, text in value.items())


def document(validate: Validate, name: str) -> Callable[[Any], str]:
    """A mapping checked as the CRD checks it (``name``: where its problems are), as JSON text."""

    def convert(value: Any) -> str:
        problems = validate(value, name)
        if problems:
            raise ValueError("; ".join(problems))
        return json.dumps(value)

    return convert


def parse_document(given: Any, flag: str, validate: Validate, name: str) -> Any:
    """A YAML/JSON option's value, checked as the CRD checks it (ConfigError naming the flag)."""
    data = given
    if not isinstance(given, Mapping):
        try:
            data = yaml.safe_load(str(given))  # JSON is YAML
        except yaml.YAMLError as err:
            raise ConfigError(f"{flag} is neither YAML nor JSON: {err}") from None
    problems = validate(data, name)
    if problems:
        raise ConfigError(f"{flag}: {'; '.join(problems)}")
    return data
