"""A real Envoy for tests: the runtime's runner (:mod:`cpx.ops.envoyproc`), under its test-side name."""

from __future__ import annotations

from cpx.ops.envoybinary import envoy_binary
from cpx.ops.envoyproc import EnvoyError, EnvoyProcess, free_port, listening_tcp_ports, wait_for_port

__all__ = ["EnvoyError", "EnvoyProcess", "envoy_binary", "free_port", "listening_tcp_ports", "wait_for_port"]
