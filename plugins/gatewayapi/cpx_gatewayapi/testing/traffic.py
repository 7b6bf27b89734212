"""The harness's requests and answer checks (``conformance/utils/http/http.go``)."""

from __future__ import annotations

import concurrent.futures
import http.client
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import attrs
import httpx
from cpx.testing import (
    client_tls_context,
)

from cpx_gatewayapi.testing.answers import (
    Answer,
    Expect,
    compare,
    connect_with_sni,
    h2c_request,
    http2_request,
)
from cpx_gatewayapi.testing.base import (
    INFRA_NS,
    INFRA_V3,
    await_convergence,
    envoy_port,
    timeout_default,
    wait_until,
)
from cpx_gatewayapi.testing.echo import EchoBackend


class Traffic:
    """Requests to the Gateways as upstream's roundtripper sends them."""

    addresses: dict[tuple[str, str], str]
    ca_pem: str

    def backend(self, namespace: str, service: str) -> EchoBackend:
        raise NotImplementedError

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
            conn.connect = connect_with_sni(conn, ctx, sni or None)  # type: ignore[method-assign]
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
