"""End-to-end test harness (no pytest dependency; fixtures live in the test suite's conftest).

* :class:`EnvoyProcess` runs the real Envoy with a bootstrap from :mod:`cpx.xds.envoy.bootstrap`;
  :meth:`EnvoyProcess.with_xds` points it at a cpx xDS server. It never outlives the test
  process (atexit and a parent-death signal).
* :class:`EchoServer` / :class:`TCPEchoServer` are loopback backends (see
  :mod:`cpx.testing.backends` for the echo endpoints: ``/slow``, ``/status/<code>``, ``/flaky``,
  WebSocket upgrade).
* :func:`make_tls_secret` issues Kubernetes TLS Secrets from a per-process CA;
  :func:`https_get` dials an address while presenting any SNI and ``Host``.
"""

from __future__ import annotations

from cpx.testing.backends import EchoServer, TCPEchoServer, server_tls_context
from cpx.testing.envoy import EnvoyError, EnvoyProcess, envoy_binary, free_port, wait_for_port
from cpx.testing.tls import (
    Response,
    client_tls_context,
    default_ca,
    http_get,
    https_get,
    issue_cert,
    make_ca_secret,
    make_tls_secret,
    request,
)

__all__ = [
    "EchoServer",
    "EnvoyError",
    "EnvoyProcess",
    "Response",
    "TCPEchoServer",
    "client_tls_context",
    "default_ca",
    "envoy_binary",
    "free_port",
    "http_get",
    "https_get",
    "issue_cert",
    "make_ca_secret",
    "make_tls_secret",
    "request",
    "server_tls_context",
    "wait_for_port",
]
