"""The session's cpx, Envoy and backends, and the objects a test applies."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import random
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    make_tls_secret,
    write_manifest,
)

from cpx_gatewayapi.testing.base import (
    BASE_KINDS,
    CONTROLLER_NAME,
    ECHO_H2C_TARGET_PORT,
    ECHO_SERVICES,
    ECHO_TARGET_PORT,
    GATEWAY_CLASS_NAME,
    INFRA_NS,
    WEB_NS,
    WEBSOCKET,
    Key,
    NotYet,
    envoy_port,
    key_of,
    wait_until,
)
from cpx_gatewayapi.testing.echo import EchoBackend
from cpx_gatewayapi.testing.objects import gateway_class
from cpx_gatewayapi.testing.traffic import Traffic
from cpx_gatewayapi.testing.waits import StatusWaits


def _free_loopback(ports: Iterable[int]) -> str:
    """A random 127.x.y.z whose ``ports`` nobody holds: concurrent runs on this machine never meet."""
    rng = random.SystemRandom()
    while True:
        address = f"127.{rng.randint(1, 254)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        try:
            for port in ports:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind((address, port))
        except OSError:
            continue
        return address


def substitute(text: str) -> str:
    """The placeholders upstream's suite fills in its manifests."""
    return text.replace("{GATEWAY_CLASS_NAME}", GATEWAY_CLASS_NAME).replace(
        "{GATEWAY_CONTROLLER_NAME}", CONTROLLER_NAME
    )


def load_yaml(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(substitute(path.read_text())) if doc]


# What GatewayStaticAddresses' placeholders stand for here (None: the Gateway's own loopback address).
_PLACEHOLDERS: dict[object, dict[str, str] | None] = {
    "PLACEHOLDER_UNUSABLE_ADDRS": {"type": "IPAddress", "value": "unusable.invalid"},
    "PLACEHOLDER_USABLE_ADDRS": None,
}


@attrs.define
class Conformance(StatusWaits, Traffic):
    """One ``cpx serve`` + one Envoy serving the base set, for a session of conformance tests."""

    workdir: Path
    base_manifest: Path  # upstream's conformance/base/manifests.yaml
    manifests: Path = attrs.field(init=False)
    status_file: Path = attrs.field(init=False)
    cpx: CpxProcess | None = None
    websocket: EchoServer = attrs.field(init=False)
    default_address: str = ""
    envoy: EnvoyProcess | None = None
    backends: dict[tuple[str, str], EchoBackend] = attrs.field(factory=dict)
    addresses: dict[tuple[str, str], str] = attrs.field(factory=dict)  # Gateway -> loopback address
    ca_pem: str = ""
    _generations: dict[Key, tuple[int, str, str]] = attrs.field(factory=dict)  # gen, spec, created
    _files: dict[str, list[Key]] = attrs.field(factory=dict)
    _docs: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)  # as given, per file

    def __attrs_post_init__(self) -> None:
        self.websocket = EchoServer("websocket")
        self.manifests = self.workdir / "manifests"
        self.status_file = self.workdir / "status.yaml"

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Conformance:
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.websocket.start()
        for namespace, service in ECHO_SERVICES:
            # A pod-like name: upstream checks the prefix, the weight test strips the last two parts.
            self.backends[(namespace, service)] = EchoBackend(namespace, f"{service}-6c8d9f7b5-x4k2p")
        self.apply_docs("00-base.yaml", self._base_docs())
        # Where Gateways without an address of their own are served (the core's HTTP address), and
        # what they report (as a deployment reports its Envoy Service's address): a loopback
        # address of this session's too, so that concurrent runs never meet there either.
        self.default_address = _free_loopback({envoy_port(80), envoy_port(8080), envoy_port(443)})
        self.cpx = CpxProcess(
            self.manifests,
            workdir=self.workdir,
            status_file=self.status_file,
            plugins=["gatewayapi"],
            start_timeout=60.0,
            extra_args=[
                "--envoy-service-http-address",
                self.default_address,
                "--ingress-status-address",
                self.default_address,
            ],
        )
        self.envoy = EnvoyProcess.with_xds(self.cpx.xds_port, workdir=self.workdir / "envoy")
        self.cpx.start()
        self.envoy.start()
        for namespace, name in self.addresses:
            if namespace == INFRA_NS:
                self.wait_gateway_ready(namespace, name)
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if self.envoy is not None:
                self.envoy.stop()
        with contextlib.suppress(Exception):
            if self.cpx is not None and self.cpx.running:
                self.cpx.stop()
        if self.cpx is not None:
            self.cpx.kill()
        for backend in self.backends.values():
            backend.stop()
        self.websocket.stop()

    def __enter__(self) -> Conformance:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _base_docs(self) -> list[dict[str, Any]]:
        docs = [doc for doc in load_yaml(self.base_manifest) if doc.get("kind") in BASE_KINDS]
        docs = [d for d in docs if d["kind"] != "Service" or _ns_name(d) in self.backends]
        docs.append(gateway_class())
        for (namespace, service), echo in self.backends.items():
            ports = {ECHO_TARGET_PORT: echo.port, ECHO_H2C_TARGET_PORT: echo.h2c_port}
            docs.append(self._endpoint_slice(namespace, service, ports, docs, self.websocket.port))
        secret, self.ca_pem = make_tls_secret(INFRA_NS, "tls-validity-checks-certificate", ["*", "*.org"])
        docs.append(secret)
        docs.append(make_tls_secret(WEB_NS, "certificate", ["*"])[0])
        return docs

    @staticmethod
    def _endpoint_slice(
        namespace: str,
        service: str,
        ports_by_target: Mapping[int, int],
        docs: Sequence[Mapping[str, Any]],
        websocket_port: int,
    ) -> dict[str, Any]:
        [svc] = [d for d in docs if d["kind"] == "Service" and _ns_name(d) == (namespace, service)]
        # echo-basic serves HTTP and WebSocket on one port; here the WebSocket echo is cpx's own.
        ports = [
            {
                **({"name": p["name"]} if "name" in p else {}),
                "port": websocket_port
                if p.get("appProtocol") == WEBSOCKET
                else ports_by_target[p["targetPort"]],
                "protocol": "TCP",
            }
            for p in svc["spec"]["ports"]
            if p.get("targetPort") in ports_by_target
        ]
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{service}-echo",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        }

    # -- objects ------------------------------------------------------------------------------------

    def apply(self, manifest: Path | str, name: str | None = None) -> list[Key]:
        """Apply an upstream YAML file (or text) as the file ``name``; returns the objects' keys."""
        if isinstance(manifest, Path):
            docs = load_yaml(manifest)
            name = name or manifest.name
        else:
            docs = [d for d in yaml.safe_load_all(substitute(manifest)) if d]
        if name is None:
            raise ValueError("a manifest given as text needs a file name")
        return self.apply_docs(name, docs)

    def apply_docs(self, name: str, docs: Sequence[Mapping[str, Any]]) -> list[Key]:
        """Write ``docs`` as the manifest file ``name`` (replacing it), as the API server would keep them."""
        prepared = [self._prepare(copy.deepcopy(dict(doc))) for doc in docs]
        keys = [key_of(doc) for doc in prepared]
        for gone in set(self._files.get(name, ())) - set(keys):
            self._generations.pop(gone, None)
        self._files[name] = keys
        self._docs[name] = [copy.deepcopy(dict(doc)) for doc in docs]
        write_manifest(self.manifests, name, prepared)
        return keys

    def remove(self, name: str, *, wait: bool = True) -> None:
        """Delete the manifest file ``name``; with ``wait``, until its objects left the status file."""
        keys = self._files.pop(name, [])
        self._docs.pop(name, None)
        with contextlib.suppress(FileNotFoundError):
            (self.manifests / name).unlink()
        for key in keys:
            self._generations.pop(key, None)
        if wait:
            statused = [k for k in keys if k.kind in ("Gateway", "HTTPRoute", "GatewayClass")]

            def gone() -> None:
                left = [k for k in statused if self.status(k.kind, k.namespace, k.name) is not None]
                if left:
                    raise NotYet(f"still in the status file: {left}")

            wait_until(gone)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """A copy of an applied object, as the test gave it (to edit and :meth:`update`)."""
        return copy.deepcopy(self._find(Key(kind, namespace, name))[2])

    def update(self, doc: Mapping[str, Any]) -> None:
        """Replace an applied object (``kubectl apply``); a changed spec moves its generation on."""
        file_name, index, _ = self._find(key_of(doc))
        docs = self._docs[file_name]
        docs[index] = copy.deepcopy(dict(doc))
        self.apply_docs(file_name, docs)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete one applied object, leaving the rest of its file."""
        file_name, index, _ = self._find(Key(kind, namespace, name))
        docs = self._docs[file_name]
        del docs[index]
        self.apply_docs(file_name, docs)

    def _find(self, key: Key) -> tuple[str, int, dict[str, Any]]:
        for file_name, docs in self._docs.items():
            for index, doc in enumerate(docs):
                if key_of(doc) == key:
                    return file_name, index, doc
        raise KeyError(f"{key} was not applied")

    @contextlib.contextmanager
    def applied(self, manifest: Path | str, name: str | None = None) -> Iterator[list[Key]]:
        """:meth:`apply`, then :meth:`remove` on the way out."""
        file_name = name or (manifest.name if isinstance(manifest, Path) else None)
        keys = self.apply(manifest, file_name)
        try:
            yield keys
        finally:
            self.remove(file_name or "")

    def _prepare(self, doc: dict[str, Any]) -> dict[str, Any]:
        key = key_of(doc)
        meta = doc.setdefault("metadata", {})
        if key.kind == "Gateway":
            self._give_address(key, doc)
        spec = json.dumps(doc.get("spec"), sort_keys=True)
        previous = self._generations.get(key)
        if previous is None:
            created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            generation = 1
        else:
            generation = previous[0] + (previous[1] != spec)
            created = previous[2]
        self._generations[key] = (generation, spec, created)
        meta["generation"] = generation
        meta["creationTimestamp"] = created
        return doc

    def _give_address(self, key: Key, doc: dict[str, Any]) -> None:
        spec = doc.setdefault("spec", {})
        gateway = (key.namespace, key.name)
        if gateway not in self.addresses:
            ports = {envoy_port(int(listener.get("port", 80))) for listener in spec.get("listeners") or ()}
            self.addresses[gateway] = _free_loopback(ports | {8080, 8443})
        mine = {"type": "IPAddress", "value": self.addresses[gateway]}
        given = spec.get("addresses") or []
        if given and all(a.get("type", "IPAddress") == "IPAddress" and not a.get("value") for a in given):
            return  # GatewayOptionalAddressValue: addresses for the implementation to assign
        if any(str(a.get("value", "")).startswith("PLACEHOLDER_") for a in given):
            # GatewayStaticAddresses: the suite substitutes addresses the implementation can and
            # cannot use; the rest of the list is the test's.
            spec["addresses"] = [_PLACEHOLDERS.get(a.get("value"), a) or mine for a in given]
        else:
            spec["addresses"] = [mine]

    def spec_addresses(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """A Gateway's ``spec.addresses`` as written to cpx (placeholders substituted)."""
        text = (self.manifests / self._find(Key("Gateway", namespace, name))[0]).read_text()
        written = [d for d in yaml.safe_load_all(text) if d and key_of(d) == Key("Gateway", namespace, name)]
        return list(written[0]["spec"].get("addresses") or [])

    def generation(self, kind: str, namespace: str, name: str) -> int:
        return self._generations[Key(kind, namespace, name)][0]

    def backend(self, namespace: str, service: str) -> EchoBackend:
        return self.backends[(namespace, service)]


def _ns_name(doc: Mapping[str, Any]) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))
