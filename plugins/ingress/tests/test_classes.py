"""Ingress class selection, and its effect on what reaches the DAG."""

from __future__ import annotations

import types
from typing import Any

import pytest

from cpx import Config
from cpx import ingress_class_accepts as accepts
from cpx import ingress_class_matches as matches
from cpx import ingress_class_names as class_names
from cpx_ingress.kinds import HTTP_LISTENER

PC, K8S = "projectcontour.io/ingress.class", "kubernetes.io/ingress.class"


def obj(annotations: dict[str, str] | None = None, spec_class: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "annotations": annotations or {}}
    spec = {} if spec_class is None else {"ingressClassName": spec_class}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("ingress", "names", "expected"),
    [
        # No class configured: no class, or "contour".
        (obj(), (), True),
        (obj(spec_class="contour"), (), True),
        (obj({K8S: "contour"}), (), True),
        (obj({PC: "contour"}), (), True),
        (obj(spec_class="nginx"), (), False),
        (obj({K8S: "nginx"}), (), False),
        # Annotations take precedence over the spec field, projectcontour.io first.
        (obj({K8S: "nginx"}, spec_class="contour"), (), False),
        (obj({K8S: "contour"}, spec_class="nginx"), (), True),
        (obj({PC: "contour", K8S: "nginx"}), (), True),
        (obj({PC: "nginx", K8S: "contour"}), (), False),
        # Classes configured: exactly those, and an object without a class is not ours.
        (obj(), ("internal",), False),
        (obj(spec_class="contour"), ("internal",), False),
        (obj(spec_class="internal"), ("internal", "external"), True),
        (obj({K8S: "external"}), ("internal", "external"), True),
        (obj({PC: "internal"}, spec_class="other"), ("internal",), True),
    ],
)
def test_matches(ingress: dict[str, Any], names: tuple[str, ...], expected: bool) -> None:
    assert matches(ingress, names) is expected


def test_class_names_accept_repeats_and_commas() -> None:
    assert class_names(None) == ()
    assert class_names("a, b") == ("a", "b")
    assert class_names(["a,b", "c", "a", ""]) == ("a", "b", "c")


def test_accepts_reads_the_option() -> None:
    assert accepts(obj(spec_class="internal"), Config(options={"ingress_class_name": ["internal"]}))
    assert not accepts(obj(spec_class="internal"), Config())


def test_other_classes_never_reach_the_dag(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress("mine", class_name="internal", rules=[k8s.rule("mine.example.com")]),
        k8s.ingress("theirs", class_name="nginx", rules=[k8s.rule("theirs.example.com")]),
        k8s.ingress("unclassed", rules=[k8s.rule("unclassed.example.com")]),
        options={"ingress_class_name": ["internal"]},
    )
    assert list(dag.listeners[HTTP_LISTENER].virtual_hosts) == ["mine.example.com"]
