"""Loopback backends for end-to-end tests: the runtime's echo servers (:mod:`cpx.ops.echoserver`)."""

from __future__ import annotations

from cpx.ops.echoserver import EchoServer, TCPEchoServer, load_pem_chain, server_tls_context

__all__ = ["EchoServer", "TCPEchoServer", "load_pem_chain", "server_tls_context"]
