"""WatchSpec.validate: the API server's checks on an Ingress, for standalone mode."""

from __future__ import annotations

import copy
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpx_ingress.schema import _backend, _backend_passes, _is_ip, _path, _path_passes, validate


@pytest.fixture
def valid(k8s: types.SimpleNamespace) -> dict[str, Any]:
    return k8s.ingress(  # type: ignore[no-any-return]
        default_backend=k8s.backend(),
        rules=[
            k8s.rule("example.com", k8s.path("/app", port="http"), k8s.path("/x", path_type="Exact")),
            k8s.rule("*.example.com", k8s.path("/api.*", path_type="ImplementationSpecific")),
            k8s.rule(None, k8s.path("/")),
            {"host": "nohttp.example.com"},
        ],
        tls=[{"hosts": ["example.com", "*.example.com"], "secretName": "tls"}, {"hosts": ["example.com"]}],
        class_name="contour",
    )


def test_a_valid_ingress_has_no_problems(valid: dict[str, Any]) -> None:
    assert validate(valid) == []


def problems_after(valid: dict[str, Any], change: Any) -> list[str]:
    obj = copy.deepcopy(valid)
    change(obj)
    return validate(obj)


PATH0 = "spec.rules[0].http.paths[0]"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda o: o["metadata"].pop("name"), "metadata.name: Required value"),
        (lambda o: o["metadata"].update(name="Bad_Name"), 'metadata.name: Invalid value: "Bad_Name"'),
        (
            lambda o: o.update(spec={}),
            "spec: Invalid value: []: either `defaultBackend` or `rules` must be specified",
        ),
        (lambda o: o["spec"].update(rules="x"), 'spec.rules: Invalid value: "x": must be a list'),
        (lambda o: o["spec"]["rules"][0]["http"].pop("paths"), "spec.rules[0].http.paths: Required value"),
        (
            lambda o: o["spec"]["rules"][0]["http"].update(paths=[]),
            "spec.rules[0].http.paths: Required value",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].pop("pathType"),
            f"{PATH0}.pathType: Required value: pathType must be specified",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(pathType="Regex"),
            f'{PATH0}.pathType: Unsupported value: "Regex": supported values: '
            '"Exact", "ImplementationSpecific", "Prefix"',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(path="app"),
            f'{PATH0}.path: Invalid value: "app": must be an absolute path',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(path="/a//b"),
            f"{PATH0}.path: Invalid value: \"/a//b\": must not contain '//'",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(path="/a/.."),
            f"{PATH0}.path: Invalid value: \"/a/..\": cannot end with '/..'",
        ),
        (
            lambda o: o["spec"]["rules"][1]["http"]["paths"][0].update(path="api"),
            'spec.rules[1].http.paths[0].path: Invalid value: "api": must be an absolute path',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(backend={}),
            f'{PATH0}.backend: Invalid value: "": resource or service backend is required',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"].update(
                resource={"kind": "Bucket", "name": "b"}
            ),
            f'{PATH0}.backend: Invalid value: "": cannot set both resource and service backends',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0].update(backend={"resource": {"name": "b"}}),
            f"{PATH0}.backend.resource.kind: Required value: kind is required",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].update(port={}),
            f"{PATH0}.backend: Required value: port name or number is required",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].update(
                port={"name": "http", "number": 80}
            ),
            f'{PATH0}.backend: Invalid value: "": cannot set both port name & port number',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].update(
                port={"number": 70000}
            ),
            f"{PATH0}.backend.service.port.number: Invalid value: 70000: must be between 1 and 65535",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].update(
                port={"name": "HTTP"}
            ),
            f'{PATH0}.backend.service.port.name: Invalid value: "HTTP"',
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].pop("name"),
            f"{PATH0}.backend.service.name: Required value",
        ),
        (
            lambda o: o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"].update(name="9lives"),
            f'{PATH0}.backend.service.name: Invalid value: "9lives": a DNS-1035 label',
        ),
        (
            lambda o: o["spec"]["defaultBackend"].pop("service"),
            'spec.defaultBackend: Invalid value: "": resource or service backend is required',
        ),
        (
            lambda o: o["spec"]["rules"][0].update(host="192.0.2.1"),
            'spec.rules[0].host: Invalid value: "192.0.2.1": must be a DNS name, not an IP address',
        ),
        (
            lambda o: o["spec"]["rules"][0].update(host="Example.com"),
            'spec.rules[0].host: Invalid value: "Example.com"',
        ),
        (
            lambda o: o["spec"]["rules"][1].update(host="*.*.example.com"),
            'spec.rules[1].host: Invalid value: "*.*.example.com": a wildcard DNS-1123 subdomain',
        ),
        (
            lambda o: o["spec"]["tls"][0]["hosts"].append("bad host"),
            'spec.tls[0].hosts[2]: Invalid value: "bad host"',
        ),
        (
            lambda o: o["spec"]["tls"][0].update(secretName="Bad"),
            'spec.tls[0].secretName: Invalid value: "Bad"',
        ),
        (lambda o: o["spec"].update(ingressClassName="Bad!"), 'spec.ingressClassName: Invalid value: "Bad!"'),
        (
            lambda o: o["metadata"].update(annotations={"kubernetes.io/ingress.class": "contour"}),
            'annotations.kubernetes.io/ingress.class: Invalid value: "contour": '
            "can not be set when the class field is also set",
        ),
    ],
)
def test_problems(valid: dict[str, Any], change: Any, expected: str) -> None:
    problems = problems_after(valid, change)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported(valid: dict[str, Any]) -> None:
    def break_two_things(o: dict[str, Any]) -> None:
        o["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = "Nope"
        o["spec"]["tls"][0]["secretName"] = "Nope"

    assert len(problems_after(valid, break_two_things)) == 2


def test_garbage_is_reported_not_raised() -> None:
    assert validate({"metadata": "x", "spec": ["y"]})
    assert validate({"metadata": {"name": "x"}, "spec": {"rules": [None, 3, {"http": {"paths": [None]}}]}})


# Values the API server reads differently: wrong types, bounds, and strings near the rules' edges.
_ABSENT = object()  # the field left out
_ODD_VALUES: list[Any] = [None, True, False, -1, 0, 1, 80, 65535, 65536, 1.5, [], {}, ["x"], {"a": 1}]
_ODD_VALUES += ["", "x", "Svc", "/", "/a//b", "/.well-known", "/a/..", "/a/.", "/%2f", "/%2F", "/%20", "-"]
_ODD_VALUES += ["h--p", "a" * 64, "1.2.3.4", "Exact", "Prefix", "ImplementationSpecific", "http", _ABSENT]
_ODD_VALUES += [
    {"number": 80},
    {"name": "http"},
    {"kind": "K", "name": "n"},
    {"name": "s", "port": {"number": 8}},
]
_PATH_FIELDS = [
    ("path",),
    ("pathType",),
    ("backend",),
    ("backend", "service"),
    ("backend", "resource"),
    ("backend", "service", "name"),
    ("backend", "service", "port"),
    ("backend", "service", "port", "number"),
    ("backend", "service", "port", "name"),
]


def _changed_path(changes: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    path: dict[str, Any] = {
        "path": "/app",
        "pathType": "Prefix",
        "backend": {"service": {"name": "svc", "port": {"number": 80}}},
    }
    for fields, value in changes:
        parent: Any = path
        for field in fields[:-1]:
            parent = parent.get(field)
            if not isinstance(parent, dict):
                break
        else:
            if value is _ABSENT:
                parent.pop(fields[-1], None)
            else:
                parent[fields[-1]] = copy.deepcopy(value)
    return path


def _quick_check_agrees(path: Any) -> None:
    problems: list[str] = []
    _path(path, "p", problems)
    assert not (_path_passes(path) and problems), (path, problems)
    backend = path.get("backend") if isinstance(path, dict) else path
    problems = []
    _backend(backend, "b", problems)
    assert not (_backend_passes(backend) and problems), (backend, problems)


def test_a_path_passes_the_quick_check_only_where_the_detailed_one_finds_nothing() -> None:
    for fields in _PATH_FIELDS:
        for value in _ODD_VALUES:
            _quick_check_agrees(_changed_path([(fields, value)]))


@given(st.lists(st.tuples(st.sampled_from(_PATH_FIELDS), st.sampled_from(_ODD_VALUES)), max_size=3))
def test_a_path_changed_more_passes_the_quick_check_only_where_the_detailed_one_finds_nothing(
    changes: list[tuple[tuple[str, ...], Any]],
) -> None:
    _quick_check_agrees(_changed_path(changes))


def test_the_usual_path_passes_the_quick_check() -> None:
    backend = {"service": {"name": "svc", "port": {"number": 80}}}
    assert _path_passes({"path": "/app", "pathType": "Prefix", "backend": backend})
    assert _path_passes({"pathType": "ImplementationSpecific", "backend": backend})


@pytest.mark.parametrize(
    ("host", "is_ip"),
    [
        ("1.2.3.4", True),
        ("::1", True),
        ("fe80::1%eth0", True),
        ("1.2.3", False),
        ("a.com", False),
        ("1.2.3.4a", False),
    ],
)
def test_only_addresses_are_ip_addresses(host: str, is_ip: bool) -> None:
    assert _is_ip(host) is is_ip
