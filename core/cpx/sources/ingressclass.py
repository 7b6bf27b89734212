"""Ingress class selection, shared by every kind that honours it (Contour's ``internal/ingressclass``).

Contour applies one ``--ingress-class-name`` setting to Ingress and HTTPProxy alike, so the core owns
the option and the rule; each plugin names it in its ``WatchSpec.accept``.  The annotations
``projectcontour.io/ingress.class`` then ``kubernetes.io/ingress.class`` take precedence over
``spec.ingressClassName`` (an empty annotation counts as unset).  With no class names configured an
object with no class or class ``contour`` is ours; otherwise its class must be one of the names.
IngressClass objects are not consulted (nor their ``is-default-class`` annotation).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from cpx import objects as k8s
from cpx.config import Config
from cpx.records import OptionSpec

DEFAULT_CLASS_NAME = "contour"
CLASS_ANNOTATIONS = ("projectcontour.io/ingress.class", "kubernetes.io/ingress.class")
CLASS_OPTION = OptionSpec(
    name="ingress_class_name",
    help="Serve only objects of these ingress classes (repeatable or comma-separated; "
    "default: no class or 'contour'). Applies to Ingress and HTTPProxy.",
    multiple=True,
)


def class_names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """The configured class names; each option value may itself be a comma-separated list."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else list(value)
    names = (part.strip() for v in values for part in str(v).split(","))
    return tuple(dict.fromkeys(n for n in names if n))


def object_class(obj: Mapping[str, Any]) -> str:
    """The class an object asks for ("" for none)."""
    # Runs before the schema check: a value of the wrong type counts as no class, so that the
    # object is not silently dropped but refused with the schema's reason.
    annotations = k8s.annotations_of(obj)
    for name in CLASS_ANNOTATIONS:
        if annotations.get(name):
            annotated = annotations[name]
            return annotated if isinstance(annotated, str) else ""
    spec = obj.get("spec")
    value = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""


def matches(obj: Mapping[str, Any], names: tuple[str, ...]) -> bool:
    """Whether an object belongs to a control plane configured with these class names."""
    cls = object_class(obj)
    if not names:
        return cls in ("", DEFAULT_CLASS_NAME)
    return cls in names


def accepts(obj: Mapping[str, Any], config: Config) -> bool:
    """For ``WatchSpec.accept``: objects of other classes are never cached."""
    value = config.option(CLASS_OPTION.name)
    # Asked for every object loaded: the option's few values are split and deduplicated once.
    names = _class_names_of(value) if value is None or isinstance(value, (str, tuple)) else class_names(value)
    return matches(obj, names)


_class_names_of = functools.lru_cache(maxsize=16)(class_names)
