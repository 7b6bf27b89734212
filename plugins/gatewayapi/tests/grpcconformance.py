"""A small stand-in harness for the re-expressed upstream GRPCRoute conformance tests.

What upstream's suite does for them, without a cluster: the base objects they use (the
``same-namespace`` Gateway and the ``grpc-infra-backend-v1..v3`` Services of
conformance/base/manifests.yaml) plus the test's vendored manifest, served by the real ``cpx serve``
and a real Envoy; each Gateway gets a free loopback address (the harness contract: Envoy on listener
port + 8000); the backends are loopback gRPC echo servers reporting pod name and namespace as
echo-basic does.  The checks are upstream's (conformance/utils/grpc, conformance/utils/kubernetes):
routes Accepted, then the expected answer 3 times in a row within 30 s, a miss resetting the count.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import attrs
import grpc
import yaml
from cpx.testing import CpxProcess, EnvoyProcess, endpoint_slice, envoy_binary, write_manifest

from cpx_gatewayapi.testing.objects import HTTP_LISTENER, gateway, gateway_class

from .grpcecho import call, free_loopback, grpc_echo, unary

INFRA_NS = "gateway-conformance-infra"
SAME_NAMESPACE = "same-namespace"
BACKENDS = ("grpc-infra-backend-v1", "grpc-infra-backend-v2", "grpc-infra-backend-v3")
SERVICE = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"
CONTROLLER_NAME = "projectcontour.io/gateway-controller"
MANIFESTS = Path(__file__).parent / "manifests"
CONSISTENT, CONVERGENCE, ACCEPTANCE = 3, 30.0, 60.0  # upstream's default timeouts
ENVOY_HTTP_PORT = 8080  # listener port 80


def pod(backend: str) -> str:
    """A pod-like name: upstream checks the prefix; the weight test strips the last two parts."""
    return f"{backend}-6c8d9f7b5-x4k2p"


@attrs.frozen(kw_only=True)
class Expected:
    """One upstream ``grpc.ExpectedResponse``: the call and what must come back."""

    method: str  # Echo | EchoTwo | EchoThree of the conformance echo service
    backend: str | None = None  # the pod-name prefix; None: a failure ``code``
    code: grpc.StatusCode = grpc.StatusCode.OK
    authority: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    # Request headers the backend must see (beyond upstream, which checks none of them).
    headers: Mapping[str, list[str]] = attrs.field(factory=dict)
    absent: tuple[str, ...] = ()


@attrs.define
class GRPCConformance:
    workdir: Path
    manifest: str  # a file of manifests/
    addresses: dict[str, str] = attrs.field(factory=dict)  # Gateway name -> loopback address
    _stack: contextlib.ExitStack = attrs.field(factory=contextlib.ExitStack)

    @property
    def status_file(self) -> Path:
        return self.workdir / "status.yaml"

    def __enter__(self) -> GRPCConformance:
        envoy_binary()  # FileNotFoundError: no Envoy here
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        manifests = self.workdir / "manifests"
        ports = {b: self._stack.enter_context(grpc_echo(pod(b), INFRA_NS, (SERVICE,))) for b in BACKENDS}
        text = (MANIFESTS / self.manifest).read_text().replace("{GATEWAY_CLASS_NAME}", "contour")
        docs = [*_base_docs(ports), *(d for d in yaml.safe_load_all(text) if d)]
        for doc in docs:
            if doc["kind"] == "Gateway":
                address = free_loopback(ENVOY_HTTP_PORT)
                self.addresses[doc["metadata"]["name"]] = address
                doc["spec"]["addresses"] = [{"type": "IPAddress", "value": address}]
        write_manifest(manifests, "objects.yaml", docs)
        cpx = CpxProcess(
            manifests, workdir=self.workdir, status_file=self.status_file, plugins=["gatewayapi"]
        )
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=self.workdir / "envoy")
        cpx.start()
        self._stack.callback(cpx.kill)
        envoy.start()
        self._stack.callback(envoy.stop)

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    # -- status ---------------------------------------------------------------------------------------

    def status(self, kind: str, name: str) -> dict[str, Any]:
        try:
            loaded = yaml.safe_load(self.status_file.read_text()) or {}
        except FileNotFoundError:
            return {}
        for obj in loaded.get("objects") or ():
            if (obj["kind"], obj.get("namespace"), obj["name"]) == (kind, INFRA_NS, name):
                return dict(obj.get("status") or {})
        return {}

    def wait_accepted(self, gateway: str, *routes: str) -> str:
        """GatewayAndRoutesMustBeAccepted: the Gateway Programmed, each route Accepted with
        ResolvedRefs by our controller; the Gateway's address (host:port)."""

        def problem() -> str | None:
            gw = {c["type"]: c["status"] for c in self.status("Gateway", gateway).get("conditions") or ()}
            if gw.get("Accepted") != "True" or gw.get("Programmed") != "True":
                return f"Gateway {gateway}: {gw}"
            for route in routes:
                parents = self.status("GRPCRoute", route).get("parents") or ()
                ours = [p for p in parents if p["controllerName"] == CONTROLLER_NAME]
                found = [{c["type"]: c["status"] for c in p["conditions"]} for p in ours]
                if not found or any(
                    f.get("Accepted") != "True" or f.get("ResolvedRefs") != "True" for f in found
                ):
                    return f"GRPCRoute {route}: {found}"
            return None

        _until(problem, ACCEPTANCE, consecutive=1)
        return f"{self.addresses[gateway]}:{ENVOY_HTTP_PORT}"

    # -- traffic --------------------------------------------------------------------------------------

    def expect(self, target: str, expected: Expected) -> None:
        """MakeRequestAndExpectEventuallyConsistentResponse."""
        _until(lambda: _mismatch(target, expected), CONVERGENCE, consecutive=CONSISTENT)

    def weights(self, target: str, method: str, requests: int) -> Counter[str]:
        """Backends (pod name minus its last two parts) of ``requests`` calls, 10 in flight."""
        with grpc.insecure_channel(target) as channel, futures.ThreadPoolExecutor(10) as pool:
            answers = pool.map(lambda _: unary(channel, f"/{SERVICE}/{method}")["pod"], range(requests))
            return Counter(name.rsplit("-", 2)[0] for name in answers)


def _mismatch(target: str, expected: Expected) -> str | None:
    method = f"/{SERVICE}/{expected.method}"
    try:
        answer = call(target, method, expected.authority, expected.metadata)
    except grpc.RpcError as err:
        code = err.code()
        return None if code == expected.code else f"{method}: {code}, expected {expected.code}"
    if expected.code != grpc.StatusCode.OK:
        return f"{method}: answered by {answer['pod']}, expected {expected.code}"
    if answer["method"] != method or answer["namespace"] != INFRA_NS:
        return f"{method}: {answer}"
    if expected.backend is None or not answer["pod"].startswith(expected.backend):
        return f"{method}: answered by {answer['pod']}, expected {expected.backend}"
    seen = answer["metadata"]
    for name, values in expected.headers.items():
        if seen.get(name.lower()) != values:
            return f"{method}: header {name}: {seen.get(name.lower())}, expected {values}"
    present = [name for name in expected.absent if name.lower() in seen]
    return f"{method}: headers {present} should be absent" if present else None


def _until(problem: Any, timeout: float, consecutive: int) -> None:
    deadline, streak, last = time.monotonic() + timeout, 0, "never checked"
    while time.monotonic() < deadline:
        found = problem()
        if found is None:
            streak += 1
            if streak >= consecutive:
                return
            continue
        streak, last = 0, found
        time.sleep(0.1)
    raise AssertionError(f"not converged within {timeout}s: {last}")


def _base_docs(ports: Mapping[str, int]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": INFRA_NS, "labels": {"gateway-conformance": "infra"}},
        },
        gateway_class(),
        # upstream's base same-namespace Gateway (its address is set per run)
        gateway(
            None,
            [{**HTTP_LISTENER, "allowedRoutes": {"namespaces": {"from": "Same"}}}],
            name=SAME_NAMESPACE,
            namespace=INFRA_NS,
        ),
    ]
    for backend, port in ports.items():
        docs.append(
            {  # upstream's base Service
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": backend, "namespace": INFRA_NS},
                "spec": {
                    "selector": {"app": backend},
                    "ports": [
                        {
                            "protocol": "TCP",
                            "port": 8080,
                            "targetPort": 3000,
                            "appProtocol": "kubernetes.io/h2c",
                        }
                    ],
                },
            }
        )
        slice_ = endpoint_slice(backend, port, namespace=INFRA_NS)
        del slice_["ports"][0]["name"]  # the Service port has none
        docs.append(slice_)
    return docs
