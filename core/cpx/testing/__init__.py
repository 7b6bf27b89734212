"""Test tooling for cpx and its plugins (the public testing API; the modules behind it are private).

The pytest fixtures (``cpx_translate``, ``cpx_envoy``) come with :mod:`cpx.testing.pytest_plugin`,
which pytest loads through the ``pytest11`` entry point; they do nothing unless a test asks for them.
Fuzzing strategies are in :mod:`cpx.testing.strategies`.

===========================================  ===========================================================
Names                                        What for
===========================================  ===========================================================
``Translation`` ``translate_yaml``           objects (YAML) + chosen plugins -> DAG, xDS, statuses
``CpxProcess`` ``cpx_with_envoy``            the real ``cpx serve`` (and a real Envoy in front of it)
``EnvoyProcess`` ``EnvoyError``              a real Envoy; ``envoy_binary`` finds the executable
``envoy_binary``
``EchoServer`` ``TCPEchoServer``             loopback backends (see :mod:`cpx.ops.echoserver`)
``server_tls_context``
``write_manifest`` ``backend`` ``service``   manifests for ``cpx serve``: Services and EndpointSlices
``endpoint_slice``
``private_imports`` ``PUBLIC_MODULES``       the contract check: imports of private cpx modules
``uninstalled_plugins_env``                  run ``cpx`` with plugins not installed yet
``eventually`` ``free_port``                 polling and ports
``wait_for_port``
``make_tls_secret`` ``make_ca_secret``       TLS material from a per-process CA, and clients that
``self_signed`` ``default_ca``               present any SNI; CRLs and their Secrets
``make_crl`` ``make_crl_secret``
``issue_cert`` ``client_tls_context``
``http_get`` ``https_get`` ``request``
``Response``
``Builder`` ``ListenerProcessor``            the engine, for plugin unit tests that build a DAG by hand
``CORE_HTTP_LISTENER``                       (a plugin's own code never uses these)
``CORE_HTTPS_LISTENER`` ``SecretPolicy``
``same_namespace_only`` ``Resolver`` ``SourceCache``
``ExternalNamePolicy`` ``ObjectFault``
``PluginHost`` ``PLUGIN_GROUP``
``SnapshotHandler`` ``builtin_plugin``
``cli`` ``translate``
===========================================  ===========================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpx._lazy import exporter

if TYPE_CHECKING:
    from cpx.builtin import plugin as builtin_plugin
    from cpx.builtin.plugin import HTTP_LISTENER as CORE_HTTP_LISTENER
    from cpx.builtin.plugin import HTTPS_LISTENER as CORE_HTTPS_LISTENER
    from cpx.builtin.plugin import ListenerProcessor
    from cpx.cli import cli
    from cpx.dag.builder import Builder
    from cpx.isolation import ObjectFault
    from cpx.offline import translate
    from cpx.plugins import GROUP as PLUGIN_GROUP
    from cpx.plugins import PluginHost
    from cpx.snapshot import SnapshotHandler
    from cpx.sources.cache import SecretPolicy, SourceCache, same_namespace_only
    from cpx.sources.externalname import ExternalNamePolicy
    from cpx.sources.resolver import Resolver
    from cpx.testing.backends import EchoServer, TCPEchoServer, server_tls_context
    from cpx.testing.contract import PUBLIC_MODULES, private_imports
    from cpx.testing.cpxproc import (
        CpxProcess,
        backend,
        cpx_with_envoy,
        endpoint_slice,
        eventually,
        service,
        write_manifest,
    )
    from cpx.testing.envoy import EnvoyError, EnvoyProcess, envoy_binary, free_port, wait_for_port
    from cpx.testing.served import uninstalled_plugins_env
    from cpx.testing.tls import (
        Response,
        client_tls_context,
        default_ca,
        http_get,
        https_get,
        issue_cert,
        make_ca_secret,
        make_crl,
        make_crl_secret,
        make_tls_secret,
        request,
        self_signed,
    )
    from cpx.testing.translation import Translation, translate_yaml

_LAZY = {
    "uninstalled_plugins_env": "cpx.testing.served",
    "Builder": "cpx.dag.builder",
    "CORE_HTTPS_LISTENER": "cpx.builtin.plugin:HTTPS_LISTENER",
    "CORE_HTTP_LISTENER": "cpx.builtin.plugin:HTTP_LISTENER",
    "CpxProcess": "cpx.testing.cpxproc",
    "EchoServer": "cpx.testing.backends",
    "EnvoyError": "cpx.testing.envoy",
    "EnvoyProcess": "cpx.testing.envoy",
    "ExternalNamePolicy": "cpx.sources.externalname",
    "ListenerProcessor": "cpx.builtin.plugin",
    "ObjectFault": "cpx.isolation",
    "PLUGIN_GROUP": "cpx.plugins:GROUP",
    "PUBLIC_MODULES": "cpx.testing.contract",
    "PluginHost": "cpx.plugins",
    "Resolver": "cpx.sources.resolver",
    "Response": "cpx.testing.tls",
    "SecretPolicy": "cpx.sources.cache",
    "SnapshotHandler": "cpx.snapshot",
    "TCPEchoServer": "cpx.testing.backends",
    "Translation": "cpx.testing.translation",
    "backend": "cpx.testing.cpxproc",
    "builtin_plugin": "cpx.builtin.plugin:",
    "cli": "cpx.cli",
    "client_tls_context": "cpx.testing.tls",
    "cpx_with_envoy": "cpx.testing.cpxproc",
    "default_ca": "cpx.testing.tls",
    "endpoint_slice": "cpx.testing.cpxproc",
    "envoy_binary": "cpx.testing.envoy",
    "eventually": "cpx.testing.cpxproc",
    "free_port": "cpx.testing.envoy",
    "http_get": "cpx.testing.tls",
    "https_get": "cpx.testing.tls",
    "issue_cert": "cpx.testing.tls",
    "make_ca_secret": "cpx.testing.tls",
    "make_crl": "cpx.testing.tls",
    "make_crl_secret": "cpx.testing.tls",
    "make_tls_secret": "cpx.testing.tls",
    "private_imports": "cpx.testing.contract",
    "request": "cpx.testing.tls",
    "same_namespace_only": "cpx.sources.cache",
    "SourceCache": "cpx.sources.cache",
    "self_signed": "cpx.testing.tls",
    "server_tls_context": "cpx.testing.backends",
    "service": "cpx.testing.cpxproc",
    "translate": "cpx.offline",
    "translate_yaml": "cpx.testing.translation",
    "wait_for_port": "cpx.testing.envoy",
    "write_manifest": "cpx.testing.cpxproc",
}
__getattr__ = exporter(__name__, _LAZY)

__all__ = [
    "CORE_HTTPS_LISTENER",
    "CORE_HTTP_LISTENER",
    "PLUGIN_GROUP",
    "PUBLIC_MODULES",
    "Builder",
    "CpxProcess",
    "EchoServer",
    "EnvoyError",
    "EnvoyProcess",
    "ExternalNamePolicy",
    "ListenerProcessor",
    "ObjectFault",
    "PluginHost",
    "Resolver",
    "Response",
    "SecretPolicy",
    "SnapshotHandler",
    "SourceCache",
    "TCPEchoServer",
    "Translation",
    "backend",
    "builtin_plugin",
    "cli",
    "client_tls_context",
    "cpx_with_envoy",
    "default_ca",
    "endpoint_slice",
    "envoy_binary",
    "eventually",
    "free_port",
    "http_get",
    "https_get",
    "issue_cert",
    "make_ca_secret",
    "make_crl",
    "make_crl_secret",
    "make_tls_secret",
    "private_imports",
    "request",
    "same_namespace_only",
    "self_signed",
    "server_tls_context",
    "service",
    "translate",
    "translate_yaml",
    "uninstalled_plugins_env",
    "wait_for_port",
    "write_manifest",
]
