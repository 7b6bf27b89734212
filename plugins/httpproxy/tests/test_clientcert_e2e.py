"""HTTPProxy ``tls.clientValidation`` end to end: `cpx serve` + a real Envoy + an echo backend.

Certificates are made here: a client CA, a good client, a client of that CA revoked in its CRL, and
a client of another CA.  Each host shows one mode of Contour's documentation
(config/tls-termination.md, "Client Certificate Validation"): required with a CRL and the
forwarded details, optional, skipped; and a CA Secret of the wrong type, which takes only its own
host offline, with Contour's reason.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import attrs
import pytest
import yaml
from cpx.ops import certgen
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    client_tls_context,
    envoy_binary,
    eventually,
    make_ca_secret,
    make_crl,
    make_crl_secret,
    make_tls_secret,
    request,
    write_manifest,
)

from cpx_httpproxy.testing import root, route, service, tls

pytestmark = pytest.mark.e2e

HOSTS = ("required.test", "optional.test", "skip.test", "skipca.test", "bad.test", "plain.test")
XFCC = "x-forwarded-client-cert"


@attrs.frozen
class Clients:
    good: certgen.KeyPair
    revoked: certgen.KeyPair
    stranger: certgen.KeyPair  # signed by another CA


@attrs.frozen
class Stack:
    cpx: CpxProcess
    server_ca: str
    clients: Clients
    status_file: Path

    def get(self, host: str, client: certgen.KeyPair | None, **kwargs: Any) -> Response:
        url = f"https://127.0.0.1:{self.cpx.https_port}/"
        return request(url, sni=host, ca_pem=self.server_ca, client_cert=client, **kwargs)

    def refusal(self, host: str, client: certgen.KeyPair | None) -> str:
        """The TLS alert Envoy refuses the connection with; fails if it is accepted.

        Nothing is written: with TLS 1.3 the client's handshake ends before the server checks its
        certificate, and a request written meanwhile may turn the alert into a reset."""
        context = client_tls_context(self.server_ca, check_hostname=True, client_cert=client)
        address = ("127.0.0.1", self.cpx.https_port)
        try:
            with (
                socket.create_connection(address, timeout=2) as raw,
                context.wrap_socket(raw, server_hostname=host) as conn,
            ):
                conn.recv(1)
        except (ssl.SSLError, ConnectionResetError) as err:  # an alert, or closed during the handshake
            return f"{type(err).__name__}: {err}".lower()
        except TimeoutError:
            pass
        raise AssertionError(f"{host} accepted client {client and client.cert.subject}")

    def status(self, name: str) -> dict[str, Any]:
        loaded = yaml.safe_load(self.status_file.read_text()) or {}
        for obj in loaded.get("objects") or ():
            if (obj["kind"], obj["name"]) == ("HTTPProxy", name):
                return dict(obj.get("status") or {})
        return {}


def _manifests(echo: EchoServer, ca: certgen.KeyPair, revoked: certgen.KeyPair) -> tuple[list[Any], str]:
    objects: list[Any] = list(backend("echo", echo.port))
    server_ca = ""
    for host in HOSTS:
        secret, server_ca = make_tls_secret("default", host.split(".")[0], [host])
        objects.append(secret)
    wrong_type = {**make_ca_secret("default", "wrong-type", ca.cert_pem), "type": "kubernetes.io/basic-auth"}
    objects += [
        make_ca_secret("default", "client-ca", ca.cert_pem),
        make_crl_secret("default", "client-crl", make_crl(ca, [revoked])),
        wrong_type,
    ]
    forward = {"subject": True, "cert": True, "dns": True, "uri": True}
    modes = {
        "required": tls("required", client_validation={"caSecret": "client-ca", "crlSecret": "client-crl"}),
        "optional": tls(
            "optional", client_validation={"caSecret": "client-ca", "optionalClientCertificate": True}
        ),
        "skip": tls("skip", client_validation={"skipClientCertValidation": True}),
        "skipca": tls(
            "skipca", client_validation={"caSecret": "client-ca", "skipClientCertValidation": True}
        ),
        "bad": tls("bad", client_validation={"caSecret": "wrong-type"}),
        "plain": tls("plain"),
    }
    modes["required"]["clientValidation"]["forwardClientCertificate"] = forward
    modes["skip"]["clientValidation"]["forwardClientCertificate"] = {"subject": True}
    objects += [
        root(name, f"{name}.test", route(services=[service("echo")]), tls=t) for name, t in modes.items()
    ]
    return objects, server_ca


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("clientcert-e2e")
    ca, other_ca = certgen.new_ca("client CA", lifetime_days=2), certgen.new_ca("other CA", lifetime_days=2)

    def client(issuer: certgen.KeyPair, name: str) -> certgen.KeyPair:
        dns, uri = [f"{name}.clients.test"], [f"spiffe://clients.test/{name}"]
        return certgen.issue(
            issuer, name, dns_names=dns, uris=uri, server=False, client=True, lifetime_days=2
        )

    clients = Clients(client(ca, "good"), client(ca, "revoked"), client(other_ca, "stranger"))
    with EchoServer("echo") as echo:
        objects, server_ca = _manifests(echo, ca, clients.revoked)
        write_manifest(workdir / "manifests", "all.yaml", objects)
        status_file = workdir / "status.yaml"
        cpx = CpxProcess(workdir / "manifests", workdir, plugins=["httpproxy"], status_file=status_file)
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
        with cpx, envoy:
            stack = Stack(cpx, server_ca, clients, status_file)
            eventually(lambda: _assert_ok(stack.get("required.test", clients.good)), timeout=20)
            yield stack


def _assert_ok(response: Response) -> dict[str, Any]:
    assert response.status == 200 and response.headers.get("x-backend") == "echo", response
    seen: dict[str, Any] = response.json()
    return seen


def test_required_validation_accepts_only_good_clients(stack: Stack) -> None:
    assert _assert_ok(stack.get("required.test", stack.clients.good))
    assert "certificate required" in stack.refusal("required.test", None)
    assert "unknown ca" in stack.refusal("required.test", stack.clients.stranger)
    assert "revoked" in stack.refusal("required.test", stack.clients.revoked)


def test_forwarded_details_replace_what_the_client_sent(stack: Stack) -> None:
    seen = _assert_ok(stack.get("required.test", stack.clients.good, headers={XFCC: "By=forged"}))
    fields = dict(part.split("=", 1) for part in seen["headers"][XFCC].split(";"))
    assert set(fields) == {"Hash", "Cert", "Subject", "URI", "DNS"}, fields
    assert fields["Subject"] == '"CN=good"'
    assert (fields["DNS"], fields["URI"]) == ("good.clients.test", "spiffe://clients.test/good")
    assert unquote(fields["Cert"].strip('"')).encode() == stack.clients.good.cert_pem
    assert "forged" not in seen["headers"][XFCC]


def test_optional_validation_accepts_no_certificate_but_checks_one_sent(stack: Stack) -> None:
    seen = _assert_ok(stack.get("optional.test", None, headers={XFCC: "By=forged"}))
    assert XFCC not in seen["headers"]  # sanitized even without forwarding
    assert _assert_ok(stack.get("optional.test", stack.clients.good))
    assert "unknown ca" in stack.refusal("optional.test", stack.clients.stranger)


def test_skipped_validation_asks_for_a_certificate_and_accepts_any(stack: Stack) -> None:
    # Without a CA Secret a certificate is asked for (its subject is forwarded) but not required.
    seen = _assert_ok(stack.get("skip.test", stack.clients.stranger))
    assert 'Subject="CN=stranger"' in seen["headers"][XFCC]
    assert _assert_ok(stack.get("skip.test", stack.clients.revoked))
    assert XFCC not in _assert_ok(stack.get("skip.test", None))["headers"]
    # With one, a certificate is required, still unverified (Contour's documented behaviour).
    assert _assert_ok(stack.get("skipca.test", stack.clients.stranger))
    assert "certificate required" in stack.refusal("skipca.test", None)


def test_a_ca_secret_of_the_wrong_type_takes_only_its_host_offline(stack: Stack) -> None:
    (condition,) = stack.status("bad")["conditions"]
    assert [(e["type"], e["reason"]) for e in condition["errors"]] == [
        ("TLSError", "ClientValidationInvalid")
    ]
    assert condition["errors"][0]["message"].startswith(
        'Spec.VirtualHost.TLS client validation is invalid: invalid CA Secret "default/wrong-type": '
    )
    # No filter chain for its SNI: Envoy closes the connection during the handshake.
    assert "alert" not in stack.refusal("bad.test", stack.clients.good)
    assert XFCC not in _assert_ok(stack.get("plain.test", None))["headers"]
    assert stack.status("plain")["currentStatus"] == "valid"
