"""A cluster-less runner for the Gateway API conformance tests: the real ``cpx serve`` and a real Envoy.

Upstream's suite (``kubernetes-sigs/gateway-api`` ``conformance/``) applies YAML to a cluster, waits
for statuses and sends requests to the Gateways' addresses.  :class:`Conformance` does the same with
no cluster: one ``cpx serve --manifests <dir> --status-file <file> --plugins gatewayapi`` and one
Envoy for a whole test session, the base set of ``conformance/base/manifests.yaml`` (namespaces,
the four base Gateways, the Services) with EndpointSlices pointing at :class:`EchoBackend` servers
named like pods, the GatewayClass ``contour`` and the TLS Secrets the suite creates.

* :meth:`Conformance.apply` writes a test's YAML (``{GATEWAY_CLASS_NAME}`` substituted, each Gateway
  given its own loopback address in ``spec.addresses[0]``, ``metadata.generation`` and
  ``creationTimestamp`` kept as the API server would) and :meth:`Conformance.remove` deletes it.
* The waits mirror ``conformance/utils/kubernetes/helpers.go`` (statuses read from the status
  file, conditions at the object's current generation), :meth:`Conformance.expect` mirrors
  ``conformance/utils/http/http.go`` (3 consecutive matching answers; the echo reports path, host,
  method, headers, namespace and pod).

Envoy serves a Gateway listener on port + 8000 (80 -> 8080); requests still carry the Gateway's port
in ``Host`` (none for 80), as in a cluster.  Timeouts are shorter than upstream's cluster ceilings
(cpx converges in well under a second): ``CPX_CONFORMANCE_TIMEOUT`` seconds, 10 by default.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import datetime as dt
import http.client
import json
import os
import random
import re
import socket
import socketserver
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs
import h2.config
import h2.connection
import h2.events
import httpx
import yaml
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    client_tls_context,
    make_tls_secret,
    write_manifest,
)

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
# What GatewayStaticAddresses' placeholders stand for here (None: the Gateway's own loopback address).
_PLACEHOLDERS: dict[object, dict[str, str] | None] = {
    "PLACEHOLDER_UNUSABLE_ADDRS": {"type": "IPAddress", "value": "unusable.invalid"},
    "PLACEHOLDER_USABLE_ADDRS": None,
}
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


# -- the echo backend -------------------------------------------------------------------------------


def _duration(text: str) -> float:
    """Go's time.ParseDuration for what the suite sends (``1s``, ``500ms``, ``1m``)."""
    total = 0.0
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "us": 1e-6}
    for number, unit in re.findall(r"([0-9.]+)(ms|us|s|m|h)", text):
        total += float(number) * units[unit]
    return total


def _canonical(name: str) -> str:
    # Go's http.CanonicalHeaderKey: what echo-basic's JSON shows.
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "echo-basic"
    disable_nagle_algorithm = True
    server: _EchoHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        echo = self.server.echo
        body_length = int(self.headers.get("Content-Length") or 0)
        if body_length:
            self.rfile.read(body_length)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        headers: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            if name.lower() != "host":
                headers.setdefault(_canonical(name), []).append(value)
        info = {
            "path": self.path,
            "host": self.headers.get("Host", ""),
            "method": self.command,
            "proto": self.request_version,
            "headers": headers,
            "namespace": echo.namespace,
            "ingress": "",
            "service": "",
            "pod": echo.pod,
            "httpPort": str(ECHO_TARGET_PORT),
        }
        echo.record(info)
        if url.path.startswith("/retry/") and echo.fails(self, query):
            return
        if "delay" in query:
            echo.stopping.wait(_duration(query["delay"][-1]))
        status = 200
        if url.path.startswith("/status/"):
            with contextlib.suppress(ValueError):
                status = int(url.path.rpartition("/")[2])
        payload = json.dumps(info).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Content-Type-Options", "nosniff")
        for item in self.headers.get("X-Echo-Set-Header", "").split(","):
            name, sep, value = item.partition(":")
            if sep and name.strip():
                self.send_header(name.strip(), value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


for _method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE"):
    setattr(_EchoHandler, f"do_{_method}", _EchoHandler._handle)


class _EchoHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # Envoy keeps upstream connections open

    def __init__(self, echo: EchoBackend) -> None:
        self.echo = echo
        super().__init__(("127.0.0.1", 0), _EchoHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # Envoy hangs up on timeouts and at the end: nothing to report


class EchoBackend:
    """An HTTP echo server answering like upstream's ``echo-basic`` image.

    JSON body ``{path (with query), host, method, proto, headers (canonical name -> values),
    namespace, pod, httpPort}``; ``X-Echo-Set-Header: Name:value,...`` becomes response headers;
    ``?delay=1s`` answers late; ``/status/NNN`` answers NNN.  A second port (:attr:`h2c_port`)
    answers HTTP/2 with prior knowledge.  ``requests`` keeps what it saw
    (upstream reads the mirror backend's log for that).
    """

    def __init__(self, namespace: str, pod: str) -> None:
        self.namespace = namespace
        self.pod = pod
        self.stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self._attempts: dict[str, int] = {}  # /retry: requests seen per uuid
        self._lock = threading.Lock()
        self._server = _EchoHTTPServer(self)
        self._h2c = _H2CServer(self)
        for server in (self._server, self._h2c):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"echo-{pod}", daemon=True
            )
            thread.start()

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def h2c_port(self) -> int:
        """Where it answers HTTP/2 with prior knowledge (echo-basic's port 3001)."""
        port: int = self._h2c.server_address[1]
        return port

    def record(self, info: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(info)

    def fails(self, handler: BaseHTTPRequestHandler, query: Mapping[str, list[str]]) -> bool:
        """echo-basic's ``/retry/...?uuid=U&succeedAfter=N[&responseCode=C][&delayRetry=D]``: the
        first N requests of U fail (after D) with status C, or with a TCP reset without C.  Returns
        whether this one failed (its answer is then already given)."""
        uuid_ = query.get("uuid", [""])[-1]
        with self._lock:
            self._attempts[uuid_] = self._attempts.get(uuid_, 0) + 1
            attempt = self._attempts[uuid_]
        if attempt > int(query.get("succeedAfter", ["0"])[-1]):
            return False
        if "delayRetry" in query:
            self.stopping.wait(_duration(query["delayRetry"][-1]))
        if "responseCode" in query:
            handler.send_response(int(query["responseCode"][-1]))
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            handler.close_connection = True
            # SO_LINGER 0: close() sends a reset, the connection error retries are about.
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return True

    def seen_paths(self) -> list[str]:
        with self._lock:
            return [str(info["path"]) for info in self.requests]

    def stop(self) -> None:
        self.stopping.set()
        for server in (self._server, self._h2c):
            server.shutdown()
            server.server_close()


class _H2CHandler(socketserver.BaseRequestHandler):
    """HTTP/2 with prior knowledge (h2c): echo-basic's answer on its h2c port."""

    server: _H2CServer

    def handle(self) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        self.request.sendall(conn.data_to_send())
        requests: dict[int, list[tuple[str, str]]] = {}
        while data := self.request.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    requests[event.stream_id] = [(_text(k), _text(v)) for k, v in event.headers or ()]
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    self._answer(conn, event.stream_id, requests.pop(event.stream_id, []))
            self.request.sendall(conn.data_to_send())

    def _answer(
        self, conn: h2.connection.H2Connection, stream_id: int, headers: list[tuple[str, str]]
    ) -> None:
        pseudo = {name: value for name, value in headers if name.startswith(":")}
        echo = self.server.echo
        info = {
            "path": pseudo.get(":path", ""),
            "host": pseudo.get(":authority", ""),
            "method": pseudo.get(":method", ""),
            "proto": "HTTP/2.0",
            "headers": {_canonical(k): [v] for k, v in headers if not k.startswith(":")},
            "namespace": echo.namespace,
            "pod": echo.pod,
        }
        echo.record(info)
        body = json.dumps(info).encode()
        conn.send_headers(
            stream_id,
            [(":status", "200"), ("content-type", "application/json"), ("content-length", str(len(body)))],
        )
        conn.send_data(stream_id, body, end_stream=True)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _H2CServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, echo: EchoBackend) -> None:
        self.echo = echo
        super().__init__(("127.0.0.1", 0), _H2CHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


# -- expected answers -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Redirect:
    """``roundtripper.RedirectRequest``: the expected ``Location`` (empty fields: upstream's defaults)."""

    scheme: str = ""
    host: str = ""
    port: str = ""
    path: str = ""


@attrs.frozen(kw_only=True)
class Expect:
    """One ``http.ExpectedResponse`` of an upstream test: a request and what must come back.

    ``expected_*`` describe the request the backend must see (unset: as sent); ``backend`` is
    the pod name prefix and ``namespace`` the backend's namespace, checked on 200 answers.
    """

    host: str = ""
    path: str = "/"
    method: str = "GET"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    status: tuple[int, ...] = (200,)
    backend: str = ""
    namespace: str = ""
    expected_host: str = ""
    expected_path: str | None = None
    expected_method: str | None = None
    expected_headers: Mapping[str, str] | None = None
    absent_headers: Sequence[str] = ()
    response_headers: Mapping[str, str] = attrs.field(factory=dict)
    valid_header_values: Mapping[str, Sequence[str]] = attrs.field(factory=dict)  # one of these
    ignore_whitespace: bool = False  # in response header values
    absent_response_headers: Sequence[str] = ()
    backend_set_response_headers: Mapping[str, str] = attrs.field(factory=dict)
    redirect: Redirect | None = None
    h2c: bool = False  # HTTP/2 with prior knowledge (roundtripper.H2CPriorKnowledgeProtocol)
    h2: bool = False  # HTTP/2 over TLS (roundtripper.H2Protocol)
    sni: str = ""  # the TLS server name when it differs from the Host (MakeTLSRequest's serverName)

    def name(self) -> str:
        return f"{self.method} {self.host}{self.path} -> {self.backend or self.status}"


@attrs.frozen
class Answer:
    status: int
    headers: dict[str, list[str]]  # lower-case names
    echo: dict[str, Any] | None  # the backend's JSON, when it is one

    @classmethod
    def of(cls, status: int, header_items: Iterable[tuple[str, str]], body: bytes) -> Answer:
        """An answer as upstream's roundtripper captures it: the echo's JSON when it is JSON."""
        headers: dict[str, list[str]] = {}
        for name, value in header_items:
            headers.setdefault(name.lower(), []).append(value)
        echo = None
        if "application/json" in ",".join(headers.get("content-type", [])):
            with contextlib.suppress(ValueError):
                echo = json.loads(body)
        return cls(status, headers, echo)

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return ",".join(values) if values is not None else None


def _location(answer: Answer) -> tuple[str, str, str, str]:
    location = answer.header("location") or ""
    parts = urlsplit(location)
    port = str(parts.port) if parts.port is not None else ""
    return parts.scheme, parts.hostname or "", port, parts.path


def compare(expect: Expect, answer: Answer, *, scheme: str) -> str | None:
    """``http.CompareRoundTrip``: None when the answer matches, else what differs."""
    if answer.status not in expect.status:
        if answer.status in (408, 504) and any(code in (408, 504) for code in expect.status):
            return None
        return f"status {answer.status}, expected one of {list(expect.status)}"
    if answer.status in (200, 204):
        return _compare_echo(expect, answer)
    if 300 <= answer.status < 400 and expect.redirect is not None:
        return _compare_redirect(expect, answer, scheme)
    return None


def _compare_echo(expect: Expect, answer: Answer) -> str | None:
    # An answer that is not the echo's (a CORS preflight): upstream's roundtripper then assumes the
    # method it sent and leaves every other field empty.
    echo = answer.echo if answer.echo is not None else {"method": expect.method}
    want_path = expect.expected_path if expect.expected_path is not None else expect.path
    # Go's zero values: a field the answer lacks is "".
    checks = [
        ("host", expect.expected_host, echo.get("host", ""), bool(expect.expected_host)),
        ("path", want_path, echo.get("path", ""), True),
        ("method", expect.expected_method or expect.method, echo.get("method", ""), True),
        ("namespace", expect.namespace, echo.get("namespace", ""), True),
    ]
    for what, want, got, check in checks:
        if check and want != got:
            return f"backend saw {what} {got!r}, expected {want!r}"
    problem = _compare_request_headers(expect, echo) or _compare_response_headers(expect, answer)
    if problem is not None:
        return problem
    if not str(echo.get("pod", "")).startswith(expect.backend):
        return f"answered by pod {echo.get('pod')!r}, expected {expect.backend!r}"
    return None


def _compare_request_headers(expect: Expect, echo: Mapping[str, Any]) -> str | None:
    seen = {name.lower(): ",".join(values) for name, values in (echo.get("headers") or {}).items()}
    want_headers = expect.expected_headers if expect.expected_headers is not None else {}
    for name, value in want_headers.items():
        if seen.get(name.lower()) != value:
            return f"backend saw header {name}: {seen.get(name.lower())!r}, expected {value!r}"
    for name in expect.absent_headers:
        if name.lower() in seen:
            return f"backend saw header {name}: {seen[name.lower()]!r}, expected none"
    return None


def _compare_response_headers(expect: Expect, answer: Answer) -> str | None:
    def squeeze(value: str | None) -> str | None:
        return value.replace(" ", "") if expect.ignore_whitespace and value is not None else value

    for name, values in expect.valid_header_values.items():
        if squeeze(answer.header(name)) not in [squeeze(v) for v in values]:
            return f"response header {name}: {answer.header(name)!r}, expected one of {list(values)}"
    for name, value in expect.response_headers.items():
        if squeeze(answer.header(name)) != squeeze(value):
            return f"response header {name}: {answer.header(name)!r}, expected {value!r}"
    for name in expect.absent_response_headers:
        if answer.header(name) is not None:
            return f"response header {name}: {answer.header(name)!r}, expected none"
    return None


def _compare_redirect(expect: Expect, answer: Answer, scheme: str) -> str | None:
    assert expect.redirect is not None
    got_scheme, got_host, got_port, got_path = _location(answer)
    want = expect.redirect
    want_scheme = want.scheme or scheme
    want_host = want.host or got_host
    want_path = want.path or urlsplit(expect.path).path
    if want_host != got_host:
        return f"redirect host {got_host!r}, expected {want_host!r}"
    if want.port:
        if want.port != got_port:
            return f"redirect port {got_port!r}, expected {want.port!r}"
    elif got_port not in ("", {"http": "80", "https": "443"}.get(got_scheme.lower(), got_port)):
        return f"redirect port {got_port!r}, expected none or the scheme's default"
    if want_scheme != got_scheme:
        return f"redirect scheme {got_scheme!r}, expected {want_scheme!r}"
    if want_path != got_path:
        return f"redirect path {got_path!r}, expected {want_path!r}"
    return None


# -- the harness ------------------------------------------------------------------------------------


@attrs.frozen
class Key:
    kind: str
    namespace: str
    name: str


def _key(doc: Mapping[str, Any]) -> Key:
    meta = doc.get("metadata") or {}
    return Key(str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


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


@attrs.define
class Conformance:
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
        docs.append(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": GATEWAY_CLASS_NAME},
                "spec": {"controllerName": CONTROLLER_NAME},
            }
        )
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
        keys = [_key(doc) for doc in prepared]
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
        file_name, index, _ = self._find(_key(doc))
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
                if _key(doc) == key:
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
        key = _key(doc)
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
        written = [d for d in yaml.safe_load_all(text) if d and _key(d) == Key("Gateway", namespace, name)]
        return list(written[0]["spec"].get("addresses") or [])

    def generation(self, kind: str, namespace: str, name: str) -> int:
        return self._generations[Key(kind, namespace, name)][0]

    def backend(self, namespace: str, service: str) -> EchoBackend:
        return self.backends[(namespace, service)]

    # -- status -------------------------------------------------------------------------------------

    def statuses(self) -> dict[Key, dict[str, Any]]:
        try:
            text = self.status_file.read_text()
        except FileNotFoundError:
            return {}
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        return {
            Key(obj["kind"], _namespace(obj), obj["name"]): obj.get("status") or {}
            for obj in loaded.get("objects") or ()
        }

    def status(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The status cpx computed for an object (None: not in the status file)."""
        return self.statuses().get(Key(kind, namespace, name))

    def _current(self, kind: str, namespace: str, name: str) -> tuple[dict[str, Any], int]:
        status = self.status(kind, namespace, name)
        if status is None:
            raise NotYet(f"{kind} {namespace}/{name} has no status")
        return status, self.generation(kind, namespace, name)

    # -- waits (conformance/utils/kubernetes/helpers.go) -------------------------------------------

    def gateway_status(self, namespace: str, name: str) -> dict[str, Any]:
        """The Gateway's status once every condition is at its current generation."""
        status, generation = self._current("Gateway", namespace, name)
        stale_conditions(status.get("conditions") or [], generation, f"Gateway {namespace}/{name}")
        return status

    def wait_gateway_ready(self, namespace: str, name: str) -> None:
        """Accepted and Programmed True at the current generation (upstream's readiness wait)."""

        def check() -> None:
            conditions = self.gateway_status(namespace, name).get("conditions") or []
            require_condition(conditions, "Accepted", "True", "", f"Gateway {namespace}/{name}")
            require_condition(conditions, "Programmed", "True", "", f"Gateway {namespace}/{name}")

        wait_until(check)

    def wait_gateway_condition(
        self, namespace: str, name: str, type_: str, status: str, reason: str = ""
    ) -> None:
        """``GatewayMustHaveCondition``."""
        wait_until(
            lambda: require_condition(
                self.gateway_status(namespace, name).get("conditions") or [],
                type_,
                status,
                reason,
                f"Gateway {namespace}/{name}",
            )
        )

    def wait_latest_conditions(self, kind: str, namespace: str, name: str) -> None:
        """``GatewayMustHaveLatestConditions`` / ``GatewayClassMustHaveLatestConditions``: every
        condition at the object's current generation (and a status at all)."""

        def check() -> None:
            status, generation = self._current(kind, namespace, name)
            stale_conditions(status.get("conditions") or [], generation, f"{kind} {namespace}/{name}")

        wait_until(check)

    def wait_class_accepted_any(self, name: str) -> None:
        """``GWCMustHaveAcceptedConditionAny``: the GatewayClass has an Accepted condition."""
        wait_until(
            lambda: require_condition(
                self._current("GatewayClass", "", name)[0].get("conditions") or [], "Accepted", "", "", name
            )
        )

    def gateway_address(self, namespace: str, name: str) -> str:
        """``WaitForGatewayAddress``: the typed address in status (cpx's, which must be ours)."""

        def check() -> str:
            status, _ = self._current("Gateway", namespace, name)
            typed = [a["value"] for a in status.get("addresses") or () if a.get("type") and a.get("value")]
            if not typed:
                raise NotYet(
                    f"Gateway {namespace}/{name}: no typed address in status: {status.get('addresses')}"
                )
            return str(typed[0])

        address = wait_until(check)
        assert address == self.addresses[(namespace, name)], (
            f"status address {address}, spec asked for another"
        )
        return address

    def wait_listeners(
        self,
        namespace: str,
        name: str,
        conditions: Sequence[tuple[str, str, str]],
        listeners: Sequence[str] = (),
    ) -> None:
        """``GatewayListenersMustHaveConditions``: every listener (or those named) has each condition."""

        def check() -> None:
            status, _ = self._current("Gateway", namespace, name)
            entries = status.get("listeners") or []
            missing = set(listeners)
            for entry in entries:
                if listeners and entry.get("name") not in listeners:
                    continue
                for type_, value, reason in conditions:
                    require_condition(
                        entry.get("conditions") or [], type_, value, reason, f"listener {entry.get('name')}"
                    )
                missing.discard(entry.get("name"))
            if missing:
                raise NotYet(f"Gateway {namespace}/{name}: no status for listeners {sorted(missing)}")

        wait_until(check)

    def wait_listener_statuses(
        self, namespace: str, name: str, expected: Sequence[Mapping[str, Any]]
    ) -> None:
        """``GatewayStatusMustHaveListeners``: one entry per expected listener (name, supportedKinds
        as a subset, attachedRoutes, conditions as (type, status, reason))."""

        def check() -> None:
            entries = self.gateway_status(namespace, name).get("listeners") or []
            listeners_match(expected, entries)

        wait_until(check)

    def wait_zero_routes(self, namespace: str, name: str) -> None:
        """``GatewayMustHaveZeroRoutes``: no listener status, or one listener with 0 attached routes."""

        def check() -> None:
            entries = self.gateway_status(namespace, name).get("listeners") or []
            if entries and not (len(entries) == 1 and entries[0].get("attachedRoutes") == 0):
                raise NotYet(f"Gateway {namespace}/{name} listeners: {entries}")

        wait_until(check)

    def route_parents(self, namespace: str, name: str, kind: str = "HTTPRoute") -> list[dict[str, Any]]:
        status, generation = self._current(kind, namespace, name)
        parents: list[dict[str, Any]] = status.get("parents") or []
        for parent in parents:
            stale_conditions(parent.get("conditions") or [], generation, f"{kind} {namespace}/{name} parent")
        return parents

    def wait_route_parents(
        self,
        namespace: str,
        name: str,
        expected: Sequence[Mapping[str, Any]],
        *,
        namespace_required: bool,
    ) -> None:
        """``HTTPRouteMustHaveParents``: each expected parent (``{"name", "namespace", "sectionName",
        "conditions": [(type, status, reason)]}``) has a matching entry of our controller."""
        wait_until(lambda: parents_match(expected, self.route_parents(namespace, name), namespace_required))

    def wait_route_condition(
        self, namespace: str, name: str, gateway: tuple[str, str], type_: str, status: str, reason: str = ""
    ) -> None:
        """``HTTPRouteMustHaveCondition``: the parent entry for ``gateway`` has the condition."""

        def check() -> None:
            found = False
            for parent in self.route_parents(namespace, name):
                ref = parent.get("parentRef") or {}
                if ref.get("name") == gateway[1] and ref.get("namespace", gateway[0]) == gateway[0]:
                    with contextlib.suppress(AssertionError):
                        require_condition(parent.get("conditions") or [], type_, status, reason, "")
                        found = True
            if not found:
                raise NotYet(
                    f"HTTPRoute {namespace}/{name}: no parent {gateway} with {type_}={status} {reason}"
                )

        wait_until(check)

    def wait_no_accepted_parents(self, namespace: str, name: str) -> None:
        """``HTTPRouteMustHaveNoAcceptedParents``: no parents (seen twice), or one not Accepted."""
        empty_seen = [False]

        def check() -> None:
            parents = self.route_parents(namespace, name)
            if not parents:
                if not empty_seen[0]:
                    empty_seen[0] = True
                    raise NotYet("no parents yet: look again")
                return
            if len(parents) > 1:
                raise NotYet(f"HTTPRoute {namespace}/{name}: {len(parents)} parents, expected at most one")
            require_condition(
                parents[0].get("conditions") or [], "Accepted", "False", "", f"HTTPRoute {name}"
            )

        wait_until(check, interval=0.5)

    def wait_gateway_and_routes(
        self,
        gateway: tuple[str, str],
        routes: Sequence[tuple[str, str]],
        section_names: Sequence[str | None] = (None,),
    ) -> str:
        """``GatewayAndHTTPRoutesMustBeAccepted``: the Gateway's address, after each route has an
        Accepted parent entry for it and every listener is ResolvedRefs, Accepted and Programmed."""
        address = self.gateway_address(*gateway)
        for route_ns, route_name in routes:
            parents = [
                {
                    "name": gateway[1],
                    "namespace": gateway[0],
                    "sectionName": section,
                    "conditions": [("Accepted", "True", "Accepted")],
                }
                for section in section_names
            ]
            self.wait_route_parents(route_ns, route_name, parents, namespace_required=route_ns != gateway[0])
        self.wait_listeners(
            *gateway, [("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")]
        )
        return address

    def wait_routes_accepted(self, gateway: tuple[str, str], *routes: tuple[str, str]) -> str:
        """The common opening: ``GatewayAndHTTPRoutesMustBeAccepted`` then, for each route,
        ``HTTPRouteMustHaveResolvedRefsConditionsTrue``."""
        address = self.wait_gateway_and_routes(gateway, routes)
        for route_ns, route_name in routes:
            self.wait_route_condition(route_ns, route_name, gateway, "ResolvedRefs", "True", "ResolvedRefs")
        return address

    # -- traffic (conformance/utils/http/http.go) ---------------------------------------------------

    def request(
        self,
        gateway: tuple[str, str],
        expect: Expect,
        *,
        port: int = 80,
        scheme: str = "http",
        timeout: float = 10.0,
    ) -> Answer:
        """One request as upstream's roundtripper sends it, to the Gateway listener on ``port``."""
        address = self.addresses[gateway]
        default_port = {"http": 80, "https": 443}[scheme]
        host = expect.host or (address if port == default_port else f"{address}:{port}")
        if expect.h2c:
            return h2c_request(f"http://{address}:{envoy_port(port)}{expect.path}", host, expect, timeout)
        sni = expect.sni or (expect.host.rpartition(":")[0] if ":" in expect.host else expect.host)
        if expect.h2:
            ctx = client_tls_context(self.ca_pem, check_hostname=False)
            ctx.set_alpn_protocols(["h2"])
            url = f"https://{address}:{envoy_port(port)}{expect.path}"
            return http2_request(url, host, expect, timeout, tls=ctx, sni=sni)
        conn: http.client.HTTPConnection
        if scheme == "https":
            ctx = client_tls_context(self.ca_pem, check_hostname=False)
            conn = http.client.HTTPSConnection(address, envoy_port(port), timeout=timeout, context=ctx)
            conn.connect = _connect_with_sni(conn, ctx, sni or None)  # type: ignore[method-assign]
        else:
            conn = http.client.HTTPConnection(address, envoy_port(port), timeout=timeout)
        try:
            conn.putrequest(expect.method, expect.path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host)
            for name, value in expect.headers.items():
                conn.putheader(name, value)
            set_headers = ",".join(f"{k}:{v}" for k, v in expect.backend_set_response_headers.items())
            conn.putheader("X-Echo-Set-Header", set_headers)
            conn.endheaders()
            response = conn.getresponse()
            body = response.read()
        except TimeoutError:
            return Answer(408, {}, None)
        finally:
            conn.close()
        return Answer.of(response.status, response.getheaders(), body)

    def expect(
        self,
        gateway: tuple[str, str],
        expect: Expect,
        *,
        port: int = 80,
        scheme: str = "http",
        timeout: float | None = None,
    ) -> None:
        """``MakeRequestAndExpectEventuallyConsistentResponse``: 3 matching answers in a row."""
        await_convergence(
            lambda: self._one(gateway, expect, port, scheme), f"{expect.name()} via {gateway}", timeout
        )

    def _one(self, gateway: tuple[str, str], expect: Expect, port: int, scheme: str) -> str | None:
        try:
            answer = self.request(gateway, expect, port=port, scheme=scheme)
        except (OSError, http.client.HTTPException, httpx.HTTPError) as err:
            return f"request failed: {err!r}"
        return compare(expect, answer, scheme=scheme)

    def expect_mirrored(
        self, gateway: tuple[str, str], expect: Expect, mirrors: Sequence[tuple[str, str]]
    ) -> None:
        """:meth:`expect` with a unique request id in the query (``AddRequestIDQueryParam``), then
        every mirror backend (namespace, Service) must have seen that request (``ExpectMirroredRequest``
        reads the mirror pods' logs)."""
        separator = "&" if "?" in expect.path else "?"
        tagged = f"{expect.path}{separator}gateway-api-conformance-request-id={uuid.uuid4()}"
        self.expect(gateway, attrs.evolve(expect, path=tagged))
        for namespace, service in mirrors:
            backend = self.backend(namespace, service)

            def seen(backend: EchoBackend = backend) -> None:
                assert tagged in backend.seen_paths(), f"mirror {backend.pod} never saw {tagged}"

            wait_until(seen)

    def expect_retries(
        self, gateway: tuple[str, str], path: str, simulation: Mapping[str, str], status: tuple[int, ...]
    ) -> None:
        """``assertConsistentRetryBehaviour``: 3 probes in a row, each with a fresh ``uuid`` (the
        echo counts failures per uuid), answer one of ``status`` (200: from infra-backend-v3)."""

        def probe() -> str | None:
            query = urlencode({**simulation, "uuid": str(uuid.uuid4())})
            expect = Expect(path=f"{path}?{query}", status=status, backend=INFRA_V3, namespace=INFRA_NS)
            return self._one(gateway, expect, 80, "http")

        await_convergence(probe, f"retries of {path} {dict(simulation)} -> {status}", None)

    def expect_all(self, gateway: tuple[str, str], cases: Iterable[Expect], **kwargs: Any) -> None:
        """Every case in turn (upstream runs them as subtests); all failures reported together."""
        failures = []
        for case in cases:
            try:
                self.expect(gateway, case, **kwargs)
            except AssertionError as err:
                failures.append(str(err))
        assert not failures, "\n".join(failures)

    def send_many(
        self, gateway: tuple[str, str], expect: Expect, *, requests: int = 500, concurrency: int = 10
    ) -> list[Answer]:
        """``requests`` copies of one request, ``concurrency`` in flight (the suite's senders)."""
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(lambda _: self.request(gateway, expect), range(requests)))

    def weights(
        self, gateway: tuple[str, str], expect: Expect, *, requests: int = 500, concurrency: int = 10
    ) -> dict[str, int]:
        """How many of ``requests`` each backend answered (pod name minus its last two parts)."""
        counts: dict[str, int] = {}
        for answer in self.send_many(gateway, expect, requests=requests, concurrency=concurrency):
            if answer.status != 200 or answer.echo is None:
                backend = f"status {answer.status}"
            else:
                backend = str(answer.echo.get("pod", "")).rsplit("-", 2)[0]
            counts[backend] = counts.get(backend, 0) + 1
        return counts

    def mirrored(self, namespace: str, service: str, path: str, settle: float = 0.3) -> int:
        """How many requests for ``path`` the mirror backend saw, once no more arrive for ``settle``
        seconds (mirrored copies are sent on the side and may trail the answers)."""
        backend = self.backend(namespace, service)
        deadline = time.monotonic() + timeout_default()
        count, since = -1, time.monotonic()
        while True:
            now_count = backend.seen_paths().count(path)
            if now_count != count:
                count, since = now_count, time.monotonic()
            elif time.monotonic() - since >= settle or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


def h2c_request(url: str, host: str, expect: Expect, timeout: float) -> Answer:
    """One HTTP/2 request with prior knowledge (no upgrade), as upstream's H2C round tripper."""
    return http2_request(url, host, expect, timeout)


def http2_request(
    url: str, host: str, expect: Expect, timeout: float, *, tls: ssl.SSLContext | None = None, sni: str = ""
) -> Answer:
    """One HTTP/2 request: h2c with prior knowledge for http URLs, over TLS (SNI ``sni``) for https."""
    extensions = {"sni_hostname": sni} if sni else {}
    with httpx.Client(http1=False, http2=True, timeout=timeout, verify=tls or True) as client:
        try:
            response = client.request(
                expect.method, url, headers={"Host": host, **expect.headers}, extensions=extensions
            )
        except httpx.TimeoutException:
            return Answer(408, {}, None)
    return Answer.of(response.status_code, response.headers.multi_items(), response.content)


def _connect_with_sni(
    conn: http.client.HTTPSConnection, ctx: ssl.SSLContext, sni: str | None
) -> Callable[[], None]:
    """http.client takes SNI from the address it dials; the suite dials the IP and sends the Host."""

    def connect() -> None:
        sock = socket.create_connection((conn.host, conn.port), conn.timeout)
        conn.sock = ctx.wrap_socket(sock, server_hostname=sni)

    return connect


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


# -- status checks ----------------------------------------------------------------------------------


def stale_conditions(conditions: Sequence[Mapping[str, Any]], generation: int, what: str) -> None:
    """``ConditionsHaveLatestObservedGeneration``."""
    stale = [
        f"{c.get('type')} (generation {c.get('observedGeneration')})"
        for c in conditions
        if c.get("observedGeneration") != generation
    ]
    if stale:
        raise NotYet(f"{what}: conditions not at generation {generation}: {', '.join(stale)}")


def require_condition(
    conditions: Sequence[Mapping[str, Any]], type_: str, status: str, reason: str, what: str
) -> None:
    """``findConditionInList``: an empty status or reason matches any."""
    for condition in conditions:
        if condition.get("type") != type_:
            continue
        if (not status or condition.get("status") == status) and (
            not reason or condition.get("reason") == reason
        ):
            return
    raise NotYet(f"{what}: no condition {type_}={status or '*'} ({reason or '*'}) in {list(conditions)}")


def listeners_match(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> None:
    """``gatewayListenersMatch``."""
    if len(expected) != len(actual):
        raise NotYet(f"{len(actual)} listener statuses, expected {len(expected)}: {actual}")
    for want in expected:
        got = next((entry for entry in actual if entry.get("name") == want["name"]), None)
        if got is None:
            raise NotYet(f"no status for listener {want['name']}: {actual}")
        kinds = [(k.get("group") or GROUP, k.get("kind")) for k in got.get("supportedKinds") or ()]
        want_kinds = [(GROUP, kind) for kind in want.get("supportedKinds", ())]
        if "supportedKinds" in want and not want_kinds and kinds:
            raise NotYet(f"listener {want['name']}: supportedKinds {kinds}, expected none")
        if any(kind not in kinds for kind in want_kinds):
            raise NotYet(f"listener {want['name']}: supportedKinds {kinds}, expected {want_kinds} among them")
        if got.get("attachedRoutes") != want["attachedRoutes"]:
            attached = got.get("attachedRoutes")
            raise NotYet(
                f"listener {want['name']}: attachedRoutes {attached}, expected {want['attachedRoutes']}"
            )
        for type_, status, reason in want.get("conditions", ()):
            require_condition(got.get("conditions") or [], type_, status, reason, f"listener {want['name']}")


def parents_match(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], namespace_required: bool
) -> None:
    """``parentsForRouteMatch``: each expected parent has an entry of our controller."""
    for want in expected:
        problems = []
        for parent in actual:
            ref = parent.get("parentRef") or {}
            if parent.get("controllerName") != CONTROLLER_NAME:
                problems.append(f"controllerName {parent.get('controllerName')}")
                continue
            if ref.get("group") != GROUP or ref.get("kind") != "Gateway":
                problems.append(f"parentRef group/kind {ref.get('group')}/{ref.get('kind')}")
                continue
            if ref.get("name") != want["name"]:
                continue
            if ref.get("namespace") != want.get("namespace") and (namespace_required or "namespace" in ref):
                problems.append(f"parentRef namespace {ref.get('namespace')}")
                continue
            try:
                for type_, status, reason in want.get("conditions", ()):
                    require_condition(parent.get("conditions") or [], type_, status, reason, "")
            except AssertionError as err:
                problems.append(str(err))
                continue
            break
        else:
            raise NotYet(f"no parent entry like {dict(want)}: {problems or actual}")


def _namespace(entry: Mapping[str, Any]) -> str:
    # The status file shows cluster-scoped objects in namespace "default": they have none.
    return "" if entry["kind"] in CLUSTER_SCOPED else str(entry.get("namespace") or "")


def _ns_name(doc: Mapping[str, Any]) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))
