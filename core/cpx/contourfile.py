"""Contour's configuration file (``contour serve -c contour.yaml``), read by ``cpx serve -c``.

:func:`load` checks a file against Contour's keys (:mod:`cpx.contourkeys`, from Contour's
``pkg/config/parameters.go``) plus the keys the loaded options claim (``OptionSpec.config_key``)
and returns the value of every key the file sets.  An unknown key, a value of the wrong type or
out of range refuses the file with the key's dotted path and the reason.  :func:`review` sorts
the keys no option claims: a value that changes nothing in cpx passes, one that ignoring would
weaken security refuses the start, any other is a warning (the file still loads, as Contour
users expect; see docs/design/0028-contour-config-file.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs
import yaml

from cpx.contourkeys import CONTOUR_KEYS, ContourKey, reference, tls_versions
from cpx.errors import ConfigError

KEYS = {key.path: key for key in CONTOUR_KEYS}


@attrs.frozen
class Findings:
    """What :func:`review` found in the keys no option claims."""

    warnings: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()


def _nodes(leaves: Collection[str]) -> set[str]:
    return {leaf.rsplit(".", i)[0] for leaf in leaves for i in range(1, leaf.count(".") + 1)}


def _claimed_value(value: Any) -> Any:
    # A Contour reference to an object ({namespace, name}) is "namespace/name" for a flag.
    if isinstance(value, Mapping) and set(value) == {"namespace", "name"}:
        return reference(value)
    return value


def _document(text: str, source: str) -> Mapping[Any, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not YAML: {err}") from None
    if document is not None and not isinstance(document, Mapping):
        raise ConfigError(f"{source}: expected a mapping of Contour's configuration keys")
    return document or {}


@attrs.define
class _Walk:
    leaves: set[str]
    nodes: set[str]
    found: dict[str, Any] = attrs.field(factory=dict)
    problems: list[str] = attrs.field(factory=list)

    def walk(self, mapping: Mapping[Any, Any], prefix: str = "") -> None:
        for name, value in mapping.items():
            path = f"{prefix}{name}"
            try:
                self.visit(path, value)
            except ValueError as err:
                self.problems.append(f"{path}: {err}")

    def visit(self, path: str, value: Any) -> None:
        known = KEYS.get(path)
        if known is not None:
            self.found[path] = known.check(value)
            if path in self.nodes and isinstance(value, Mapping):
                self.walk(value, path + ".")  # a block that is set (on) and has keys of its own
        elif path in self.leaves:
            self.found[path] = _claimed_value(value)
        elif path not in self.nodes:
            self.problems.append(f"{path}: unknown key")
        elif value is not None and not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping, got {value!r}")
        else:
            self.walk(value or {}, path + ".")

    def check_tls_versions(self) -> None:
        for prefix in ("tls.", "cluster.upstream-tls."):
            minimum, maximum = (self.found.get(prefix + end, "") for end in _TLS_VERSION_KEYS)
            try:
                tls_versions(minimum, maximum)
            except ValueError as err:
                self.problems.append(f"{prefix}{_TLS_VERSION_KEYS[1]}: {err}")


_TLS_VERSION_KEYS = ("minimum-protocol-version", "maximum-protocol-version")


def load(text: str, source: str, claimed: Collection[str] = ()) -> dict[str, Any]:
    """Every key the file sets (dotted path -> checked value); ConfigError lists every problem."""
    leaves = set(KEYS) | set(claimed)
    walk = _Walk(leaves, _nodes(leaves))
    walk.walk(_document(text, source))
    walk.check_tls_versions()
    if walk.problems:
        raise ConfigError(f"{source}: " + "; ".join(walk.problems))
    return walk.found


def _changes_nothing(key: ContourKey, value: Any) -> bool:
    return value in (None, "", [], {}) or value == key.default or value in key.cpx_does


def review(found: Mapping[str, Any], claimed: Collection[str]) -> Findings:
    """The unclaimed keys of ``found`` whose value cpx cannot honour: warnings and refusals."""
    warnings: list[str] = []
    refusals: list[str] = []
    for path, value in found.items():
        key = KEYS.get(path)
        if path in claimed or key is None or _changes_nothing(key, value):
            continue
        state = "planned, not supported yet" if key.planned else "not supported"
        if key.refuse:
            refusals.append(f"{path}: {state} ({key.note}); remove the key to start")
        else:
            warnings.append(f"{path}: {state}, ignored ({key.note})")
    return Findings(tuple(warnings), tuple(refusals))


def markdown_table(claims: Mapping[str, str]) -> str:
    """Contour's keys and their state in cpx (``claims``: key -> the flag that takes it)."""
    rows = ["| Contour key | cpx |", "| --- | --- |"]
    extra = sorted(set(claims) - set(KEYS))
    for key in [*CONTOUR_KEYS, *(ContourKey(path, check=_claimed_value) for path in extra)]:
        flag = claims.get(key.path)
        if flag is not None:
            state = f"supported: `{flag}`"
        elif key.planned:
            state = f"planned: {key.note}" + (" (refuses the start until then)" if key.refuse else "")
        elif not key.note:
            state = "accepted (no keys)"
        else:
            state = f"not supported: {key.note}" + (" (refuses the start)" if key.refuse else "")
        rows.append(f"| `{key.path}` | {state} |")
    return "\n".join(rows) + "\n"
