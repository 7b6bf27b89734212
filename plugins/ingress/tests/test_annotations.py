"""Annotation parsing: Go durations, timeouts, retries, websockets, unsupported annotations."""

from __future__ import annotations

import types

import pytest

from cpx.dag import Duration, RetryPolicy, TimeoutPolicy
from cpx_ingress.annotations import (
    IngressAnnotations,
    num_retries,
    parse_go_duration,
    parse_timeout,
    unsupported_annotations,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        (".5s", 0.5),
        ("1us", 1e-6),
        ("1µs", 1e-6),
        ("3ns", 3e-9),
        ("+5s", 5.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "10", "1x", "s", "1 s", "-1s", "1m-3s", "1.2.3s", "infinity", "99999999999999h", "2562048h"]
)
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("0s", None),  # zero means "use Envoy's default", as in Contour
        ("infinity", Duration(seconds=None)),
        ("infinite", Duration(seconds=None)),
        ("30s", Duration(seconds=30.0)),
    ],
)
def test_timeouts(text: str, expected: Duration | None) -> None:
    assert parse_timeout(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 1), ("0", 1), ("1", 1), ("7", 7), ("-1", 0), ("-5", 1), ("x", 1), ("3000000000", 1)],
)
def test_num_retries(text: str, expected: int) -> None:
    assert num_retries(text) == expected


def parsed(annotations: dict[str, str], k8s: types.SimpleNamespace) -> IngressAnnotations:
    return IngressAnnotations.from_ingress(k8s.ingress(annotations=annotations))


def test_defaults(k8s: types.SimpleNamespace) -> None:
    a = parsed({}, k8s)
    assert a == IngressAnnotations()
    assert (a.force_ssl_redirect, a.http_allowed, a.creates_http_routes) == (False, True, True)
    assert (a.min_tls_version, a.max_tls_version) == ("1.2", "1.3")
    assert a.retry_policy is None and a.timeout_policy == TimeoutPolicy()


def test_response_timeout_wins_over_the_legacy_name(k8s: types.SimpleNamespace) -> None:
    a = parsed({"projectcontour.io/response-timeout": "5s", "projectcontour.io/request-timeout": "9s"}, k8s)
    assert a.timeout_policy == TimeoutPolicy(response=Duration(seconds=5.0))
    legacy = parsed({"projectcontour.io/request-timeout": "9s"}, k8s)
    assert legacy.timeout_policy == TimeoutPolicy(response=Duration(seconds=9.0))


def test_retry_settings_need_retry_on(k8s: types.SimpleNamespace) -> None:
    a = parsed({"projectcontour.io/num-retries": "4", "projectcontour.io/per-try-timeout": "1s"}, k8s)
    assert a.retry_policy is None
    a = parsed({"projectcontour.io/retry-on": "5xx"}, k8s)
    assert a.retry_policy == RetryPolicy(retry_on="5xx", num_retries=1, per_try_timeout=None)


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({"projectcontour.io/response-timeout": "forever"}, "projectcontour.io/response-timeout"),
        ({"projectcontour.io/retry-on": "5xx", "projectcontour.io/num-retries": "many"}, "is not an integer"),
        ({"projectcontour.io/retry-on": "5xx", "projectcontour.io/per-try-timeout": "1"}, "per-try-timeout"),
    ],
)
def test_bad_values_become_warnings(
    k8s: types.SimpleNamespace, annotations: dict[str, str], fragment: str
) -> None:
    a = parsed(annotations, k8s)
    [note] = a.problems
    assert note.severity == "warning"
    assert fragment in note.message
    if a.retry_policy is not None:
        assert a.retry_policy == RetryPolicy(retry_on="5xx", num_retries=1)


def test_http_switches(k8s: types.SimpleNamespace) -> None:
    assert not parsed({"kubernetes.io/ingress.allow-http": "false"}, k8s).creates_http_routes
    assert parsed({"kubernetes.io/ingress.allow-http": "False"}, k8s).http_allowed  # only "false" counts
    forced = parsed(
        {"kubernetes.io/ingress.allow-http": "false", "ingress.kubernetes.io/force-ssl-redirect": "true"}, k8s
    )
    assert forced.creates_http_routes and forced.force_ssl_redirect
    assert not parsed({"ingress.kubernetes.io/force-ssl-redirect": "yes"}, k8s).force_ssl_redirect


def test_websocket_routes_and_cert_namespace(k8s: types.SimpleNamespace) -> None:
    a = parsed(
        {
            "projectcontour.io/websocket-routes": " /ws,, /chat ",
            "projectcontour.io/tls-cert-namespace": "certs",
        },
        k8s,
    )
    assert a.websocket_paths == frozenset({"/ws", "/chat"})
    assert a.tls_cert_namespace == "certs"


def test_unsupported_annotations(k8s: types.SimpleNamespace) -> None:
    obj = k8s.ingress(
        annotations={
            "projectcontour.io/retry-on": "5xx",
            "projectcontour.io/per-try-timeout": "1s",
            "projectcontour.io/max-connections": "3",  # a Service annotation
            "ingress.kubernetes.io/rewrite-target": "/",
            "kubernetes.io/ingress.global-static-ip-name": "ip",
            "kubernetes.io/ingress.class": "contour",
            "example.com/anything": "x",
        }
    )
    assert unsupported_annotations(obj) == [
        "ingress.kubernetes.io/rewrite-target",
        "kubernetes.io/ingress.global-static-ip-name",
        "projectcontour.io/max-connections",
    ]
