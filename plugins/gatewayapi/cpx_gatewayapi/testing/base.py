"""What every part of the conformance harness shares: the suite's names, ports, waiting."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

GATEWAY_CLASS_NAME = "contour"
CONTROLLER_NAME = "projectcontour.io/gateway-controller"
GROUP = "gateway.networking.k8s.io"
INFRA_NS = "gateway-conformance-infra"
APP_NS = "gateway-conformance-app-backend"
WEB_NS = "gateway-conformance-web-backend"
# The echo backends of the base set: (namespace, Service).  Each gets one echo server.
ECHO_SERVICES = (
    (INFRA_NS, "infra-backend-v1"),
    (INFRA_NS, "infra-backend-v2"),
    (INFRA_NS, "infra-backend-v3"),
    (APP_NS, "app-backend-v1"),
    (APP_NS, "app-backend-v2"),
    (WEB_NS, "web-backend"),
)
# The base set's backends, under upstream's constant names (conformance/utils/suite).
INFRA_V1, INFRA_V2, INFRA_V3 = "infra-backend-v1", "infra-backend-v2", "infra-backend-v3"
APP_V1 = "app-backend-v1"
WEB_BACKEND = "web-backend"
SAME_NAMESPACE = (INFRA_NS, "same-namespace")
ALL_NAMESPACES = (INFRA_NS, "all-namespaces")
BACKEND_NAMESPACES = (INFRA_NS, "backend-namespaces")
HTTPS_GATEWAY = (INFRA_NS, "same-namespace-with-https-listener")

# The header edits several upstream manifests pair with another filter (mirror, rewrite), as
# upstream's tests send and expect them.
EDITS_SENT = {"X-Header-Remove": "remove-val", "X-Header-Add-Append": "append-val-1"}
EDITS_SEEN = {
    "X-Header-Add": "header-val-1",
    "X-Header-Add-Append": "append-val-1,header-val-2",
    "X-Header-Set": "set-overwrites-values",
}
EDITS_REMOVED = ("X-Header-Remove",)
ECHO_TARGET_PORT = 3000  # the echo container's HTTP port in the base manifests
ECHO_H2C_TARGET_PORT = 3001  # and its h2c port
WEBSOCKET = "kubernetes.io/ws"
CLUSTER_SCOPED = frozenset({"GatewayClass", "Namespace"})
BASE_KINDS = frozenset({"Namespace", "Gateway", "Service"})

T = TypeVar("T")


def timeout_default() -> float:
    return float(os.environ.get("CPX_CONFORMANCE_TIMEOUT", "10"))


def envoy_port(port: int) -> int:
    """Contour's mapping of a Gateway listener port to the port Envoy binds (80 -> 8080).

    Written here again on purpose, not imported from the plugin: the harness is the tests' oracle.
    """
    mapped = port + 8000
    if mapped > 65535:
        mapped -= 65535
    if mapped <= 1023:
        mapped += 1023
    return mapped


class NotYet(AssertionError):
    """A wait's check did not hold (yet); the message says what was seen."""


def wait_until(check: Callable[[], T], timeout: float | None = None, interval: float = 0.05) -> T:
    """Call ``check`` until it returns without raising :class:`AssertionError`; re-raise at the end."""
    deadline = time.monotonic() + (timeout if timeout is not None else timeout_default())
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)


def await_convergence(attempt: Callable[[], str | None], what: str, timeout: float | None) -> None:
    """``AwaitConvergence``: ``attempt`` (None = a match) must match 3 times in a row in time."""
    limit = timeout if timeout is not None else timeout_default()
    deadline = time.monotonic() + limit
    in_a_row = 0
    last = "no attempt"
    while True:
        problem = attempt()
        if problem is None:
            in_a_row += 1
            if in_a_row == 3:
                return
            continue
        in_a_row = 0
        last = problem
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: no 3 consecutive matches in {limit}s; last: {last}")
        time.sleep(0.1)


@attrs.frozen
class Key:
    kind: str
    namespace: str
    name: str


def key_of(doc: Mapping[str, Any]) -> Key:
    meta = doc.get("metadata") or {}
    return Key(str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
