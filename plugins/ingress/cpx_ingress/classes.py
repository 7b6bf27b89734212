"""Ingress class selection (Contour's ``internal/ingressclass``).

The annotations ``projectcontour.io/ingress.class`` then ``kubernetes.io/ingress.class`` take
precedence over ``spec.ingressClassName``.  With no ``--ingress-class-name`` configured an object
with no class or class ``contour`` is ours; otherwise its class must be one of the configured
names.  IngressClass objects are not consulted (nor their ``is-default-class`` annotation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cpx.config import Config
from cpx_ingress.kinds import annotations_of

DEFAULT_CLASS_NAME = "contour"
CLASS_ANNOTATIONS = ("projectcontour.io/ingress.class", "kubernetes.io/ingress.class")


def class_names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """The configured class names; each flag value may itself be a comma-separated list."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else list(value)
    names = (part.strip() for v in values for part in str(v).split(","))
    return tuple(dict.fromkeys(n for n in names if n))


def annotation_class(obj: Mapping[str, Any]) -> str | None:
    """The class named by annotation; the first annotation present wins, even if empty."""
    annotations = annotations_of(obj)
    for name in CLASS_ANNOTATIONS:
        if name in annotations:
            return str(annotations[name])
    return None


def matches(obj: Mapping[str, Any], names: tuple[str, ...]) -> bool:
    """Whether an Ingress belongs to a control plane configured with these class names."""
    from_annotation = annotation_class(obj)
    spec = obj.get("spec")
    spec_class = str(spec.get("ingressClassName") or "") if isinstance(spec, Mapping) else ""
    # An empty annotation counts as unset, so the spec field is consulted (as Contour does).
    cls = from_annotation or spec_class
    if not names:
        return cls in ("", DEFAULT_CLASS_NAME)
    return cls in names


def accepts(obj: Mapping[str, Any], config: Config) -> bool:
    """WatchSpec.accept: objects of other classes are never cached."""
    return matches(obj, class_names(config.option("ingress_class_name")))
