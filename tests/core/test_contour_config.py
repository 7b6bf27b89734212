"""Contour's configuration file (``-c``): Contour's keys, types and ranges, the options that take
them (the core's and the plugins' ``OptionSpec.config_key``), flags over the file, and what
happens to the keys cpx does not support."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from cpx.cli import cli
from cpx.cli.configfile import claims
from cpx.cli.contourdoc import document
from cpx.cli.serve import serve_command
from cpx.cli.translate import translate_command
from cpx.contourfile import load, review
from cpx.errors import ConfigError
from cpx.plugins import PluginHost

ROOT = Path(__file__).resolve().parents[2]


def _problems(text: str, claimed: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text, "contour.yaml", claimed)
    return str(caught.value)


def _params(tmp_path: Path, text: str, *flags: str, plugins: str = "httpproxy") -> dict[str, Any]:
    """The parsed parameters of ``cpx translate -c FILE FLAGS``."""
    config = tmp_path / "contour.yaml"
    config.write_text(text)
    args = ["--plugins", plugins, "-c", str(config), *flags, str(tmp_path)]
    ctx = translate_command.make_context("translate", args)
    return dict(ctx.params)


def test_the_values_of_contours_keys_come_back_by_dotted_path() -> None:
    text = """
timeouts:
  request-timeout: 30s
  connection-idle-timeout: infinity
tls:
  minimum-protocol-version: 1.3
  fallback-certificate: {namespace: projectcontour, name: fallback}
network: {num-trusted-hops: 2}
default-http-versions: [HTTP/2]
server: {}
"""
    assert load(text, "contour.yaml") == {
        "timeouts.request-timeout": "30s",
        "timeouts.connection-idle-timeout": "infinity",
        "tls.minimum-protocol-version": "1.3",  # YAML's float, read as Go reads it into a string
        "tls.fallback-certificate": "projectcontour/fallback",
        "network.num-trusted-hops": 2,
        "default-http-versions": ["http/2"],
        "server": {},
    }
    assert load("", "contour.yaml") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timeouts: {request-timeut: 1s}", "timeouts.request-timeut: unknown key"),
        ("tracing: {customTags: []}\nfoo: 1", "foo: unknown key"),
        ("server: {xds-server-type: envoy}", "server: unknown key(s) xds-server-type"),
        ("timeouts: 5s", "timeouts: expected a mapping, got '5s'"),
        ("network: {num-trusted-hops: two}", "network.num-trusted-hops: expected an integer, got 'two'"),
        ("network: {num-trusted-hops: -1}", "network.num-trusted-hops: -1 is out of range 0..4294967295"),
        ("listener: {socket-options: {tos: 256}}", "listener.socket-options.tos: 256 is out of range 0..255"),
        (
            "listener: {http2-max-concurrent-streams: 0}",
            "listener.http2-max-concurrent-streams: 0 is out of range",
        ),
        ("disableMergeSlashes: yes please", "disableMergeSlashes: expected true or false, got 'yes please'"),
        ("compression: {algorithm: lzma}", "compression.algorithm: 'lzma' is not one of 'gzip', 'brotli'"),
        (
            "timeouts: {stream-idle-timeout: 5 minutes}",
            "timeouts.stream-idle-timeout: '5 minutes' is not a duration",
        ),
        ("tls: {fallback-certificate: {name: fb}}", "tls.fallback-certificate: namespace must be defined"),
        ("tls: {fallback-certificate: {ns: a, name: fb}}", "tls.fallback-certificate: unknown key(s) ns"),
        (
            "tls: {minimum-protocol-version: '1.3', maximum-protocol-version: '1.2'}",
            "tls.maximum-protocol-version: the minimum TLS protocol version is greater than the maximum",
        ),
        ("cluster: {dns-lookup-family: v5}", "cluster.dns-lookup-family: 'v5' is not one of"),
        ("default-http-versions: [http/3]", "default-http-versions: 'http/3' is not one of"),
    ],
)
def test_unknown_keys_wrong_types_and_ranges_are_refused_naming_the_key(text: str, message: str) -> None:
    assert message in _problems(text)


def test_every_problem_is_listed_and_files_that_are_not_a_mapping_are_refused() -> None:
    problems = _problems("a: 1\nnetwork: {admin-port: 70000}")
    assert "a: unknown key" in problems and "network.admin-port: 70000 is out of range 0..65535" in problems
    assert "expected a mapping of Contour's configuration keys" in _problems("- a\n- b")
    assert "not YAML" in _problems("a: [")


def test_a_key_an_option_claims_is_known_and_takes_a_reference_as_namespace_slash_name() -> None:
    text = "gateway: {controllerName: example.com/gw}\nmy: {ref: {namespace: a, name: b}}"
    assert "gateway.controllerName: unknown key" in _problems(text)
    found = load(text, "contour.yaml", claimed=("gateway.controllerName", "my.ref"))
    assert found == {"gateway.controllerName": "example.com/gw", "my.ref": "a/b"}


def test_unsupported_keys_pass_at_defaults_warn_otherwise_and_refuse_where_security_is_at_stake() -> None:
    found = load(
        """
accesslog-level: info
disableAllowChunkedLength: true
cluster: {dns-lookup-family: v4}
rateLimitService: {extensionService: projectcontour/ratelimit}
globalExtAuth: {extensionService: projectcontour/auth, failOpen: false}
compression: {algorithm: brotli}
""",
        "contour.yaml",
    )
    findings = review(found, claimed={"compression.algorithm"})
    assert findings.warnings == (
        "cluster.dns-lookup-family: not supported, ignored (Envoy's auto is used)",
        "rateLimitService.extensionService: not supported, ignored "
        "(needs the HTTPProxy plugin (--rate-limit-*, global rate limiting))",
    )
    assert findings.refusals == (
        "globalExtAuth.extensionService: not supported (needs the HTTPProxy plugin (--global-ext-auth-*); "
        "ignoring it would serve without authorization); remove the key to start",
    )


def test_the_file_sets_the_options_that_claim_its_keys(tmp_path: Path) -> None:
    params = _params(
        tmp_path,
        """
compression: {algorithm: brotli}
timeouts: {request-timeout: 30s}
serverHeaderTransformation: pass_through
enableExternalNameService: true
disablePermitInsecure: true
tls: {fallback-certificate: {namespace: projectcontour, name: fallback}, minimum-protocol-version: ""}
network: {num-trusted-hops: 1}
ingress-status-address: lb.example.com
""",
    )
    assert params["compression"] == "brotli"
    assert params["request_timeout"] == "30s"
    assert params["server_header_transformation"] == "pass_through"
    assert params["enable_external_name_service"] is True
    assert params["disable_permit_insecure"] is True  # the httpproxy plugin's option
    assert params["fallback_certificate"] == "projectcontour/fallback"
    assert params["tls_minimum_protocol_version"] == "1.2"  # empty is unset: the flag's default
    assert params["num_trusted_hops"] == 1
    assert params["ingress_status_address"] == "lb.example.com"


def test_flags_on_the_command_line_win_over_the_file(tmp_path: Path) -> None:
    text = "compression: {algorithm: brotli}\ndisablePermitInsecure: true\nnetwork: {num-trusted-hops: 3}"
    params = _params(
        tmp_path, text, "--compression", "zstd", "--disable-permit-insecure=false", "--num-trusted-hops", "0"
    )
    assert params["compression"] == "zstd"
    assert params["disable_permit_insecure"] is False
    assert params["num_trusted_hops"] == 0


def test_start_refusals_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(click.UsageError, match=r"gateway\.controllerName: unknown key"):
        _params(tmp_path, "gateway: {controllerName: x/y}", plugins="httpproxy")
    with pytest.raises(click.UsageError, match=r"globalExtAuth\.failOpen: not supported.*remove the key"):
        _params(tmp_path, "globalExtAuth: {failOpen: true}", plugins="ingress")
    with pytest.raises(click.UsageError, match=r"tls\.cipher-suites: invalid cipher suite 'x'"):
        _params(tmp_path, "tls: {cipher-suites: [x]}")
    with pytest.raises(click.UsageError, match=r"timeouts\.request-timeout: .3x. is not a duration"):
        _params(tmp_path, "timeouts: {request-timeout: 3x}")


def test_unsupported_values_are_logged_as_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cpx.config"):
        _params(tmp_path, "tracing: {serviceName: contour}")
    assert "tracing.serviceName: not supported, ignored (tracing is not implemented)" in caplog.text


def test_serve_takes_its_own_keys_through_the_flags_type_checks(tmp_path: Path) -> None:
    config = tmp_path / "contour.yaml"
    config.write_text("metrics: {contour: {address: 127.0.0.2, port: 8123}}\nenvoy-service-name: edge\n")
    ctx = serve_command.make_context("serve", ["--plugins", "ingress", "-c", str(config)])
    assert (ctx.params["health_address"], ctx.params["health_port"]) == ("127.0.0.2", 8123)
    assert ctx.params["envoy_service_name"] == "edge"
    config.write_text(f"kubeconfig: {tmp_path / 'missing'}\n")
    with pytest.raises(click.UsageError, match=r"kubeconfig: File .* does not exist"):
        serve_command.make_context("serve", ["--plugins", "ingress", "-c", str(config)])


def test_translate_output_follows_the_file(tmp_path: Path) -> None:
    config = tmp_path / "contour.yaml"
    config.write_text("timeouts: {request-timeout: 1m30s}\nserverHeaderTransformation: append_if_absent\n")
    args = ["translate", "--plugins", "ingress", "--route-shape", "single", "-c", str(config), "-o", "json"]
    result = CliRunner().invoke(cli, [*args, str(ROOT / "examples" / "quickstart")])
    assert result.exit_code == 0, result.output
    (http,) = [
        item for item in json.loads(result.stdout)["xds"]["listeners"] if item["name"] == "ingress_http"
    ]
    manager = http["filterChains"][0]["filters"][0]["typedConfig"]
    assert manager["requestTimeout"] == "90s"
    assert manager["serverHeaderTransformation"] == "APPEND_IF_ABSENT"


def test_the_key_table_in_the_docs_is_current() -> None:
    assert (ROOT / "docs" / "contour-config.md").read_text() == document(PluginHost.load())


# Contour's documented configuration example (site/content/docs/main/configuration.md), every
# commented-out key switched on with the value the documentation shows.
DOCUMENTED = """
gateway:
  gatewayRef: {namespace: projectcontour, name: contour}
incluster: true
disableAllowChunkedLength: false
disableMergeSlashes: false
disablePermitInsecure: false
tls:
  minimum-protocol-version: "1.2"
  cipher-suites:
  - '[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]'
  - 'ECDHE-RSA-AES256-GCM-SHA384'
  ecdh-curves: [X25519, P-256]
  fallback-certificate: {name: fallback-secret-name, namespace: projectcontour}
  envoy-client-certificate: {name: envoy-client-cert-secret-name, namespace: projectcontour}
accesslog-format: json
accesslog-format-string: "...\\n"
accesslog-level: info
json-fields: ["@timestamp", "authority", "x_forwarded_for"]
default-http-versions: ["HTTP/2", "HTTP/1.1"]
timeouts:
  request-timeout: infinity
  connection-idle-timeout: 60s
  stream-idle-timeout: 5m
  max-connection-duration: infinity
  connection-shutdown-grace-period: 5s
cluster:
  dns-lookup-family: auto
  max-requests-per-connection: 1
  per-connection-buffer-limit-bytes: 32768
network:
  num-trusted-hops: 0
  admin-port: 9001
rateLimitService:
  extensionService: projectcontour/ratelimit
  domain: contour
  failOpen: false
  enableXRateLimitHeaders: false
  enableResourceExhaustedCode: false
policy:
  request-headers:
    set: {X-Envoy-Hostname: "%HOSTNAME%"}
  response-headers:
    set: {X-Envoy-Response-Flags: "%RESPONSE_FLAGS%"}
  applyToIngress: true
metrics:
  contour: {address: 0.0.0.0, port: 8000}
  envoy: {address: 0.0.0.0, port: 8002}
listener:
  connection-balancer: exact
  socket-options: {tos: 64, traffic-class: 64}
omEnforcedHealthListener: {address: 0.0.0.0, port: 8003}
tracing: {serviceName: contour, extensionService: projectcontour/otel}
"""


def test_every_key_of_contours_documented_example_is_known_and_sorted() -> None:
    found = load(DOCUMENTED, "contour.yaml")
    findings = review(found, claims(PluginHost.load()))
    assert not findings.refusals
    warned = {w.split(":")[0] for w in findings.warnings}
    # Keys at Contour's defaults or at what cpx does anyway pass silently.
    assert not warned & {
        "accesslog-level",
        "default-http-versions",
        "cluster.dns-lookup-family",
        "network.admin-port",
        "accesslog-format",  # --accesslog-format
        "rateLimitService.domain",  # the HTTPProxy plugin takes rateLimitService.*
    }
    assert {"policy.applyToIngress", "tracing.serviceName"} <= (warned)


def test_a_set_block_is_on_and_its_keys_are_keys_of_their_own() -> None:
    assert load("globalExtAuth: {withRequestBody: {}}", "contour.yaml") == {
        "globalExtAuth.withRequestBody": True
    }
    assert load("globalExtAuth: {withRequestBody: {packAsBytes: true}}", "contour.yaml") == {
        "globalExtAuth.withRequestBody": True,
        "globalExtAuth.withRequestBody.packAsBytes": True,
    }
    assert load("globalExtAuth: {withRequestBody: null}", "contour.yaml") == {
        "globalExtAuth.withRequestBody": None
    }
    problems = _problems("globalExtAuth: {withRequestBody: {maxRequestBytes: x, bogus: 1}}")
    assert "globalExtAuth.withRequestBody.maxRequestBytes: expected an integer, got 'x'" in problems
    assert "globalExtAuth.withRequestBody.bogus: unknown key" in problems
