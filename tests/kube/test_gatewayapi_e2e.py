"""Gateway API in Kubernetes mode: ``cpx serve --kubeconfig`` against the emulated API server, with
a real Envoy and a real echo backend.

With the Gateway API CRDs installed (the kinds served by the emulator): a GatewayClass, a Gateway on
its own loopback address, a Gateway with none (it reports the Envoy Service's load-balancer
address) and an HTTPRoute whose status already holds another controller's parent entry.  Traffic
flows through Envoy; the statuses cpx writes through the status subresource are read back from the
API; the other controller's entries survive every write; an edit converges; a status write coming
back through the watch does not make cpx write again.  Without the CRDs, cpx starts and serves
Ingress and HTTPProxy as before.
"""

from __future__ import annotations

import contextlib
import random
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from cpx_gatewayapi.kinds import (
    BACKEND_TLS_POLICY,
    CONFIG_MAP,
    GATEWAY,
    GATEWAY_CLASS,
    GROUP,
    GRPCROUTE,
    HTTPROUTE,
    REFERENCE_GRANT,
    TCPROUTE,
    TLSROUTE,
)
from cpx_gatewayapi.testing import objects as gateway_objects

from cpx import objects as k8s
from cpx.testing import EchoServer, EnvoyProcess, envoy_binary, http_get
from cpx.testing.cpxproc import CpxProcess, backend
from cpx.testing.kubeapi import KubeAPI
from cpx_ingress.testing import simple_ingress

pytestmark = pytest.mark.e2e

# ConfigMap is core/v1, always served; the Gateway API plugin watches it for BackendTLSPolicy CAs.
CORE_KINDS = (k8s.SERVICE, k8s.ENDPOINT_SLICE, k8s.SECRET, k8s.NAMESPACE, CONFIG_MAP)
GATEWAY_KINDS = (
    GATEWAY_CLASS,
    GATEWAY,
    HTTPROUTE,
    GRPCROUTE,
    TLSROUTE,
    TCPROUTE,
    REFERENCE_GRANT,
    BACKEND_TLS_POLICY,
)
INGRESS = k8s.GroupVersionKind(group="networking.k8s.io", version="v1", kind="Ingress", plural="ingresses")
HTTPPROXY = k8s.GroupVersionKind(
    group="projectcontour.io", version="v1", kind="HTTPProxy", plural="httpproxies"
)
CONTROLLER = "projectcontour.io/gateway-controller"
OTHER_CONTROLLER = "example.com/other-controller"
ENVOY_LB_IP = "192.0.2.10"


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.05)


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def free_loopback(port: int) -> str:
    """A random 127.x.y.z where ``port`` is free: concurrent runs on this machine never meet."""
    rng = random.Random()
    for _ in range(100):
        address = f"127.{rng.randint(1, 254)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        if _bindable(address, port):
            return address
    raise RuntimeError(f"no free loopback address for port {port}")


def free_gateway_port() -> int:
    """A Gateway listener port whose Envoy port (port + 8000) is free on 127.0.0.1."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            envoy_port = int(sock.getsockname()[1])
        if envoy_port > 8000 + 1023:
            return envoy_port - 8000
    raise RuntimeError("no free port above 9023")


def condition(found: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    return next(c for c in found.get("conditions") or () if c.get("type") == type_)


def holds(found: Mapping[str, Any], type_: str, reason: str, generation: int) -> bool:
    """Whether ``found`` has condition ``type_`` True with ``reason``, observed at ``generation``."""
    got = next((c for c in found.get("conditions") or () if c.get("type") == type_), None)
    return got is not None and (got["status"], got["reason"], got["observedGeneration"]) == (
        "True",
        reason,
        generation,
    )


def gateway(name: str, port: int, address: str | None = None) -> dict[str, Any]:
    listener = {"name": "http", "port": port, "protocol": "HTTP"}
    return gateway_objects.gateway(address, [listener], name=name, generation=1)


def route_spec(path: str) -> dict[str, Any]:
    return {
        "parentRefs": [{"name": "gw"}],
        "hostnames": ["example.com"],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "backendRefs": [{"name": "echo", "port": 80}],
            }
        ],
    }


def their_parent(name: str, reason: str = "Accepted") -> dict[str, Any]:
    """A parent entry another controller wrote (for one of our Gateways, or one of theirs)."""
    return {
        "parentRef": {"group": GROUP, "kind": "Gateway", "name": name},
        "controllerName": OTHER_CONTROLLER,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": reason,
                "message": "theirs",
                "observedGeneration": 1,
                "lastTransitionTime": "2020-01-01T00:00:00Z",
            }
        ],
    }


ROUTE = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "r", "namespace": "default", "generation": 1},
    "spec": route_spec("/v1"),
    "status": {"parents": [their_parent("gw")]},
}
# A route on the Gateway without an address; that Gateway goes away at the end of the test.
LB_ROUTE = {
    **ROUTE,
    "metadata": {"name": "on-lb", "namespace": "default", "generation": 1},
    "spec": {**route_spec("/"), "parentRefs": [{"name": "lb"}]},
    "status": {"parents": [their_parent("lb")]},
}
ENVOY_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "envoy", "namespace": "projectcontour"},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    "status": {"loadBalancer": {"ingress": [{"ip": ENVOY_LB_IP}]}},
}


@attrs.define(eq=False)
class Stack:
    api: KubeAPI
    cpx: CpxProcess
    envoy: EnvoyProcess

    def status(self, gvk: k8s.GroupVersionKind, name: str) -> dict[str, Any]:
        path = f"/apis/{gvk.api_version}"
        if gvk.namespaced:
            path += "/namespaces/default"
        got: dict[str, Any] = self.api.request("GET", f"{path}/{gvk.plural}/{name}").get("status") or {}
        return got

    def programmed_gateway(self, name: str) -> dict[str, Any]:
        """The Gateway's status once it is Programmed at generation 1."""

        def programmed() -> dict[str, Any] | None:
            got = self.status(GATEWAY, name)
            return got if holds(got, "Programmed", "Programmed", 1) else None

        found: dict[str, Any] = wait_until(programmed, what=f"Gateway {name} Programmed")
        return found

    def status_patches(self) -> list[str]:
        return [
            r.url.path
            for r in self.api.requests()
            if r.method == "PATCH" and r.url.path.endswith("/status") and GROUP in r.url.path
        ]

    def dump(self) -> None:
        print(f"--- cpx log (tail) ---\n{self.cpx.log_text()[-6000:]}")
        print(f"--- envoy log (tail) ---\n{self.envoy.log_text()[-3000:]}")


@contextlib.contextmanager
def running(workdir: Path, api: KubeAPI, plugins: list[str] | None) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    api.start()
    kubeconfig = api.write_kubeconfig(workdir / "kubeconfig")
    cpx = CpxProcess([], workdir, plugins=plugins, extra_args=["--kubeconfig", str(kubeconfig)])
    envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
    stack = Stack(api, cpx, envoy)
    try:
        cpx.start()
        envoy.start()
        envoy.wait_ready()
        yield stack
    except BaseException:
        stack.dump()
        raise
    finally:
        envoy.stop()
        cpx.kill()
        api.stop()


def answer(address: str, path: str, host: str = "example.com", port: int = 8080) -> tuple[int, str | None]:
    """Status and backend of a GET through Envoy (0 while nothing listens there)."""
    try:
        response = http_get(f"http://{address}:{port}{path}", host_header=host, timeout=2.0)
    except OSError:
        return 0, None
    return response.status, response.headers.get("x-backend")


def test_gateway_api_in_kubernetes_mode(tmp_path: Path) -> None:
    address = free_loopback(8080)
    lb_port = free_gateway_port()
    with EchoServer("echo") as echo:
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
            *backend("echo", echo.port),
            ENVOY_SERVICE,
            gateway_objects.gateway_class(generation=1),
            gateway("gw", 80, address),
            gateway("lb", lb_port),  # no address of its own: the Envoy Service's
            ROUTE,
            LB_ROUTE,
        ]
        api = KubeAPI(kinds=(*CORE_KINDS, *GATEWAY_KINDS), objects=objects)
        with running(tmp_path, api, ["gatewayapi"]) as s:
            # Traffic through Envoy, on the Gateway's own address and listener port + 8000.
            wait_until(lambda: answer(address, "/v1/x") == (200, "echo"), what="/v1 through Envoy")
            assert answer(address, "/v2/x") == (404, None)

            # The statuses, read back from the API server.
            wait_until(
                lambda: holds(s.status(GATEWAY_CLASS, "contour"), "Accepted", "Accepted", 1),
                what="GatewayClass Accepted",
            )
            gw = s.programmed_gateway("gw")
            assert holds(gw, "Accepted", "Accepted", 1)
            assert gw["addresses"] == [{"type": "IPAddress", "value": address}]
            [listener] = gw["listeners"]
            assert listener["name"] == "http" and listener["attachedRoutes"] == 1
            assert [k["kind"] for k in listener["supportedKinds"]] == ["HTTPRoute", "GRPCRoute"]
            assert all(holds(listener, t, t, 1) for t in ("Accepted", "Programmed", "ResolvedRefs")), listener
            lb = s.programmed_gateway("lb")  # with the Envoy Service's address
            assert lb["addresses"] == [{"type": "IPAddress", "value": ENVOY_LB_IP}]
            assert lb["listeners"][0]["attachedRoutes"] == 1

            def route_parents(name: str = "r") -> list[dict[str, Any]]:
                parents: list[dict[str, Any]] = s.status(HTTPROUTE, name).get("parents") or []
                return parents

            def ours(generation: int, name: str = "r") -> dict[str, Any] | None:
                mine = [p for p in route_parents(name) if p["controllerName"] == CONTROLLER]
                if len(mine) == 1 and holds(mine[0], "Accepted", "Accepted", generation):
                    return mine[0]
                return None

            entry = wait_until(lambda: ours(1), what="the route's parent entry")
            assert entry["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw"}
            assert holds(entry, "ResolvedRefs", "ResolvedRefs", 1)
            # The other controller's entry, written before cpx started, is exactly as it was.
            assert route_parents() == [their_parent("gw"), entry]

            # Another controller adds an entry after our write.
            s.api.request(
                "PATCH",
                f"/apis/{GROUP}/v1/namespaces/default/httproutes/r/status",
                {"status": {"parents": [*route_parents(), their_parent("elsewhere", "Pending")]}},
            )

            # An edit converges: traffic moves, our entry is observed at the new generation, and
            # both of the other controller's entries survive our write.
            s.api.patch(ROUTE, {"metadata": {"generation": 2}, "spec": route_spec("/v2")})
            wait_until(lambda: answer(address, "/v2/x") == (200, "echo"), what="/v2 after the edit")
            assert answer(address, "/v1/x") == (404, None)
            entry = wait_until(lambda: ours(2), what="our entry at generation 2")
            assert route_parents() == [their_parent("gw"), entry, their_parent("elsewhere", "Pending")]

            # Our own writes come back through the watch: no write follows from them, even
            # across rebuilds a second or more later (fresh lastTransitionTimes are not news).
            time.sleep(1.1)
            before = len(s.status_patches())
            theirs = {**ROUTE, "metadata": {"name": "theirs", "namespace": "default", "generation": 1}}
            s.api.create({**theirs, "spec": {**route_spec("/"), "parentRefs": [{"name": "elsewhere"}]}})
            s.api.patch(gateway("lb", lb_port), {"metadata": {"annotations": {"touched": "1"}}})
            time.sleep(1.5)
            assert s.status_patches()[before:] == []
            assert route_parents() == [their_parent("gw"), entry, their_parent("elsewhere", "Pending")]

            # A route left without a Gateway of ours (never edited since our write: what cpx knows
            # of our entry came through the watch) loses our entry and keeps the other one.
            assert ours(1, "on-lb") is not None
            s.api.delete(gateway("lb", lb_port))
            wait_until(lambda: route_parents("on-lb") == [their_parent("lb")], what="our stale entry dropped")


def test_without_the_gateway_api_crds_ingress_and_httpproxy_are_served(tmp_path: Path) -> None:
    with EchoServer("echo") as echo:
        proxy = {
            "apiVersion": "projectcontour.io/v1",
            "kind": "HTTPProxy",
            "metadata": {"name": "p", "namespace": "default", "generation": 1},
            "spec": {
                "virtualhost": {"fqdn": "proxy.test"},
                "routes": [{"services": [{"name": "echo", "port": 80}]}],
            },
        }
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
            *backend("echo", echo.port),
            simple_ingress("i", [("ingress.test", "/", "echo")]),
            proxy,
        ]
        api = KubeAPI(kinds=(*CORE_KINDS, INGRESS, HTTPPROXY), objects=objects)
        with running(tmp_path, api, None) as s:  # every installed plugin, gatewayapi included

            def served(host: str) -> bool:
                return answer("127.0.0.1", "/", host, s.cpx.http_port) == (200, "echo")

            wait_until(lambda: served("ingress.test"), what="the Ingress")
            wait_until(lambda: served("proxy.test"), what="the HTTPProxy")
            for kind in GATEWAY_KINDS:
                line = s.cpx.wait_log(f"does not serve {kind.api_version}/{kind.kind}")
                assert "(plugin 'gatewayapi')" in line
            wait_until(lambda: s.status(HTTPPROXY, "p").get("currentStatus") == "valid", what="HTTPProxy")
