"""What an upstream test expects of an answer (``http.ExpectedResponse``), and the comparison."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx


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


def connect_with_sni(
    conn: http.client.HTTPSConnection, ctx: ssl.SSLContext, sni: str | None
) -> Callable[[], None]:
    """http.client takes SNI from the address it dials; the suite dials the IP and sends the Host."""

    def connect() -> None:
        sock = socket.create_connection((conn.host, conn.port), conn.timeout)
        conn.sock = ctx.wrap_socket(sock, server_hostname=sni)

    return connect
