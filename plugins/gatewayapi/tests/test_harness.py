"""The conformance harness itself (cpx_gatewayapi.testing), without cpx or Envoy: port mapping,
the echo backend's contract, the answer comparisons and the API-server bookkeeping of applies."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from cpx_gatewayapi.testing import (
    Answer,
    Conformance,
    EchoBackend,
    Expect,
    Redirect,
    compare,
    envoy_port,
    h2c_request,
)


@pytest.mark.parametrize(
    ("port", "mapped"), [(80, 8080), (443, 8443), (58000, 1488), (65535, 8000), (57536, 1024)]
)
def test_envoy_port_is_contours_mapping(port: int, mapped: int) -> None:
    assert envoy_port(port) == mapped


def _get(
    echo: EchoBackend, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", echo.port, timeout=5)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        conn.close()


def test_echo_answers_like_echo_basic() -> None:
    echo = EchoBackend("ns-a", "infra-backend-v1-abc-def")
    try:
        status, headers, body = _get(
            echo, "/status/418?x=1", {"Host": "h.example", "x-some": "v", "X-Echo-Set-Header": "A:1,B-C:two"}
        )
    finally:
        echo.stop()
    assert status == 418
    assert headers["A"] == "1" and headers["B-C"] == "two"
    assert body["path"] == "/status/418?x=1" and body["host"] == "h.example" and body["method"] == "GET"
    assert body["namespace"] == "ns-a" and body["pod"] == "infra-backend-v1-abc-def"
    assert body["headers"]["X-Some"] == ["v"]  # type: ignore[index]
    assert echo.seen_paths() == ["/status/418?x=1"]


def _echo(**fields: object) -> Answer:
    body: dict[str, Any] = {
        "path": "/",
        "host": "h",
        "method": "GET",
        "namespace": "ns",
        "pod": "v1-a-b",
        "headers": {},
    }
    body.update(fields)
    return Answer(200, {}, body)


def test_compare_checks_what_upstream_checks() -> None:
    expect = Expect(path="/", backend="v1", namespace="ns", expected_headers={"X-A": "1,2"})
    assert compare(expect, _echo(headers={"X-A": ["1", "2"]}), scheme="http") is None
    assert "header" in (compare(expect, _echo(headers={"X-A": ["1"]}), scheme="http") or "")
    assert "pod" in (compare(expect, _echo(pod="v2-a-b", headers={"X-A": ["1", "2"]}), scheme="http") or "")
    assert "status" in (compare(expect, Answer(500, {}, None), scheme="http") or "")
    assert compare(Expect(status=(504,)), Answer(408, {}, None), scheme="http") is None
    # An answer the Gateway gives itself (a CORS preflight): empty fields but the method sent.
    preflight = Expect(method="OPTIONS", path="/p", expected_path="", status=(200, 204))
    assert compare(preflight, Answer(204, {}, None), scheme="http") is None
    assert "path" in (compare(preflight, _echo(path="/p", method="OPTIONS"), scheme="http") or "")


def test_compare_redirects_default_port_and_path() -> None:
    redirect = Expect(path="/p", status=(302,), redirect=Redirect(scheme="https"))
    assert compare(redirect, Answer(302, {"location": ["https://h/p"]}, None), scheme="http") is None
    assert compare(redirect, Answer(302, {"location": ["https://h:443/p"]}, None), scheme="http") is None
    assert "port" in (
        compare(redirect, Answer(302, {"location": ["https://h:8443/p"]}, None), scheme="http") or ""
    )
    ported = Expect(path="/p", status=(302,), redirect=Redirect(port="8083"))
    assert compare(ported, Answer(302, {"location": ["http://h:8083/p"]}, None), scheme="http") is None


def test_applies_keep_generation_and_creation_time(tmp_path: Path) -> None:
    harness = Conformance(tmp_path, tmp_path / "unused.yaml")
    route: dict[str, Any] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute"}
    route |= {"metadata": {"name": "r", "namespace": "n"}, "spec": {"hostnames": ["a"]}}
    harness.apply_docs("r.yaml", [route])
    created = harness.get("HTTPRoute", "n", "r")
    harness.update(created)
    assert harness.generation("HTTPRoute", "n", "r") == 1  # same spec: same generation
    created["spec"]["hostnames"] = ["b"]
    harness.update(created)
    assert harness.generation("HTTPRoute", "n", "r") == 2
    harness.remove("r.yaml", wait=False)
    harness.apply_docs("r.yaml", [route])
    assert harness.generation("HTTPRoute", "n", "r") == 1  # deleted and created again


def test_gateways_get_their_own_loopback_address(tmp_path: Path) -> None:
    harness = Conformance(tmp_path, tmp_path / "unused.yaml")
    gateway: dict[str, Any] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}
    first = gateway | {"metadata": {"name": "a", "namespace": "n"}, "spec": {"listeners": [{"port": 80}]}}
    second = gateway | {"metadata": {"name": "b", "namespace": "n"}, "spec": {"listeners": [{"port": 80}]}}
    harness.apply_docs("g.yaml", [first, second])
    a, b = harness.addresses[("n", "a")], harness.addresses[("n", "b")]
    assert a != b and a.startswith("127.") and a != "127.0.0.1"
    written = (tmp_path / "manifests" / "g.yaml").read_text()
    assert f"value: {a}" in written and "type: IPAddress" in written


def test_echo_answers_h2c_with_prior_knowledge() -> None:
    echo = EchoBackend("ns-a", "infra-backend-v1-abc-def")
    try:
        answer = h2c_request(f"http://127.0.0.1:{echo.h2c_port}/x?y=1", "h.example", Expect(h2c=True), 5.0)
    finally:
        echo.stop()
    assert answer.status == 200 and answer.echo is not None
    assert answer.echo["proto"] == "HTTP/2.0" and answer.echo["path"] == "/x?y=1"
    assert answer.echo["host"] == "h.example" and answer.echo["pod"] == "infra-backend-v1-abc-def"


def test_echo_simulates_failures_to_retry() -> None:
    echo = EchoBackend("ns-a", "infra-backend-v3-abc-def")
    try:
        codes = [_status(echo, "/retry/x?uuid=u1&succeedAfter=2&responseCode=503") for _ in range(3)]
        with pytest.raises(ConnectionError):
            _status(echo, "/retry/x?uuid=u2&succeedAfter=1")
        after_reset = _status(echo, "/retry/x?uuid=u2&succeedAfter=1")
    finally:
        echo.stop()
    assert codes == [503, 503, 200]
    assert after_reset == 200


def _status(echo: EchoBackend, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", echo.port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
