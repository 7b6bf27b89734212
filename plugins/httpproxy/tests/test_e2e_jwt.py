"""JWT verification end to end: `cpx serve` + a real Envoy + a JWKS served over HTTPS on 127.0.0.1.

The tokens are signed here (RS256 and ES256, with ``cryptography``); the JWKS server has its own
certificate from the test CA, reached by a hostname (``localhost``, checked against a CA Secret)
and by an IP literal (not checked), each through its own ``dnsname`` cluster.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import pytest
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    cpx_with_envoy,
    envoy_binary,
    eventually,
    issue_cert,
    make_ca_secret,
    make_tls_secret,
    request,
    write_manifest,
)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from cpx_httpproxy.testing import prefix, root, route, service, tls

pytestmark = pytest.mark.e2e

HOST = "jwt.test"
ISSUER = "https://issuer.test"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int, size: int) -> str:
    return b64url(value.to_bytes(size, "big"))


@attrs.frozen
class Keys:
    rsa: rsa.RSAPrivateKey
    ec: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls) -> Keys:
        return cls(
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            ec.generate_private_key(ec.SECP256R1()),
        )

    def jwks(self) -> bytes:
        rsa_numbers = self.rsa.public_key().public_numbers()
        ec_numbers = self.ec.public_key().public_numbers()
        keys = [
            {
                "kty": "RSA",
                "kid": "rs",
                "alg": "RS256",
                "use": "sig",
                "n": _int(rsa_numbers.n, 256),
                "e": _int(rsa_numbers.e, 3),
            },
            {
                "kty": "EC",
                "kid": "es",
                "alg": "ES256",
                "use": "sig",
                "crv": "P-256",
                "x": _int(ec_numbers.x, 32),
                "y": _int(ec_numbers.y, 32),
            },
        ]
        return json.dumps({"keys": keys}).encode()

    def token(self, alg: str, **claims: Any) -> str:
        """A compact JWS of ``claims`` (an hour's validity unless ``exp`` is given)."""
        now = int(time.time())
        payload = {"iat": now, "exp": now + 3600, **claims}
        header = {"alg": alg, "typ": "JWT", "kid": "rs" if alg == "RS256" else "es"}
        signing_input = (
            f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}".encode()
        )
        if alg == "RS256":
            signature = self.rsa.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = decode_dss_signature(self.ec.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS wants r || s
        return f"{signing_input.decode()}.{b64url(signature)}"


class JWKSServer:
    """Serves ``/jwks.json`` over HTTPS on 127.0.0.1."""

    def __init__(self, jwks: bytes, workdir: Path) -> None:
        pair = issue_cert(["localhost", "127.0.0.1"])
        (workdir / "jwks.crt").write_bytes(pair.cert_pem)
        (workdir / "jwks.key").write_bytes(pair.key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(workdir / "jwks.crt", workdir / "jwks.key")

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = jwks if self.path == "/jwks.json" else b"{}"
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@attrs.define
class Stack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    ca_pem: str
    keys: Keys

    def get(self, path: str, token: str | None = None, host: str = HOST) -> Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        url = f"https://127.0.0.1:{self.cpx.https_port}{path}"
        return request(url, sni=host, ca_pem=self.ca_pem, headers=headers)

    def seen(self, path: str, token: str | None = None) -> Mapping[str, Any]:
        """The request headers the echo backend saw (lower-cased names)."""
        response = self.get(path, token)
        assert response.status == 200, (response.status, response.text)
        return {k.lower(): v for k, v in response.json()["headers"].items()}


def objects(jwks_port: int, echo_port: int) -> list[dict[str, Any]]:
    secret, _ca = make_tls_secret("default", "jwt-tls", [HOST, "bad.jwt.test"])
    by_name = {
        "name": "by-name",
        "issuer": ISSUER,
        "audiences": ["aud-1", "aud-2"],
        "default": True,
        "forwardJWT": True,
        "remoteJWKS": {
            "uri": f"https://localhost:{jwks_port}/jwks.json",
            "dnsLookupFamily": "v4",
            "validation": {"caSecret": "jwks-ca", "subjectName": "localhost"},
            "cacheDuration": "1m",
        },
    }
    by_ip = {
        "name": "by-ip",
        "issuer": "es-issuer",
        "remoteJWKS": {"uri": f"https://127.0.0.1:{jwks_port}/jwks.json"},
    }
    proxy = root(
        "jwt",
        HOST,
        route(prefix("/"), services=[service("echo")]),
        route(prefix("/es"), services=[service("echo")], jwt_verification_policy={"require": "by-ip"}),
        route(prefix("/public"), services=[service("echo")], jwt_verification_policy={"disabled": True}),
        tls=tls("jwt-tls"),
        jwt_providers=[by_name, by_ip],
    )
    # A JWKS URL without a scheme: refused (RemoteJWKSSchemeInvalid); nothing else disturbed.
    bad = root(
        "bad",
        "bad.jwt.test",
        route(services=[service("echo")]),
        tls=tls("jwt-tls"),
        jwt_providers=[{"name": "p", "remoteJWKS": {"uri": "localhost/jwks.json"}}],
    )
    return [*backend("echo", echo_port), secret, make_ca_secret("default", "jwks-ca"), proxy, bad]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("httpproxy-jwt-e2e")
    keys = Keys.new()
    jwks = JWKSServer(keys.jwks(), workdir)
    echo = EchoServer("echo").start()
    manifests = workdir / "manifests"
    write_manifest(manifests, "all.yaml", objects(jwks.port, echo.port))
    _secret, ca_pem = make_tls_secret("default", "unused", [HOST])
    try:
        with cpx_with_envoy(manifests, workdir, plugins=["httpproxy"]) as (cpx, envoy):
            envoy.wait_ready()
            served = Stack(cpx, envoy, ca_pem, keys)
            eventually(lambda: _assert_status(served.get("/public"), 200), timeout=20)
            yield served
            print(f"--- cpx log (tail) ---\n{cpx.log_text()[-3000:]}")
            print(f"--- envoy log (tail) ---\n{envoy.log_text()[-3000:]}")
    finally:
        echo.stop()
        jwks.stop()


def _assert_status(response: Response, status: int) -> None:
    assert response.status == status, (response.status, response.text)


def test_valid_rs256_token_is_forwarded(stack: Stack) -> None:
    token = stack.keys.token("RS256", iss=ISSUER, aud="aud-2", sub="alice")
    seen = eventually(lambda: stack.seen("/", token), timeout=10)
    assert seen["authorization"] == f"Bearer {token}"  # forwardJWT: true


@pytest.mark.parametrize(
    ("claims", "status", "body"),
    [
        ({"iss": ISSUER, "aud": "aud-1", "exp": int(time.time()) - 600}, 401, "Jwt is expired"),
        ({"iss": "https://someone-else.test", "aud": "aud-1"}, 401, "Jwt issuer is not configured"),
        # Envoy answers a token it verified but whose audience is not allowed with 403, not 401.
        ({"iss": ISSUER, "aud": "aud-3"}, 403, "Audiences in Jwt are not allowed"),
    ],
)
def test_bad_tokens_are_refused(stack: Stack, claims: dict[str, Any], status: int, body: str) -> None:
    response = stack.get("/", stack.keys.token("RS256", **claims))
    assert (response.status, response.text) == (status, body)


def test_missing_token_is_refused_where_required(stack: Stack) -> None:
    assert stack.get("/").status == 401
    assert stack.get("/es").status == 401


def test_disabled_route_needs_no_token(stack: Stack) -> None:
    assert "authorization" not in stack.seen("/public")


def test_es256_token_through_the_ip_literal_jwks_is_not_forwarded(stack: Stack) -> None:
    token = stack.keys.token("ES256", iss="es-issuer", aud="anyone")
    seen = eventually(lambda: stack.seen("/es", token), timeout=10)
    assert "authorization" not in seen  # forwardJWT: false
    # The RS256 provider's token is not this route's: wrong issuer for by-ip.
    assert stack.get("/es", stack.keys.token("RS256", iss=ISSUER, aud="aud-1")).status == 401


def test_invalid_provider_leaves_only_its_own_host_out(stack: Stack) -> None:
    with pytest.raises(OSError):  # no SNI chain for it: the TLS handshake fails
        stack.get("/", host="bad.jwt.test")
    rejected = stack.envoy.stats(r"update_rejected$")
    assert sum(v for k, v in rejected.items() if k.endswith(".update_rejected")) == 0
