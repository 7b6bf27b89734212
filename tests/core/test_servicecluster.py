"""Service + backend port reference -> ServicePort, the way Contour's EnsureService does it."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from cpx.dag.nodes import CircuitBreakers, ServicePort, UpstreamProtocol
from cpx.dag.services import ServicePortError, lookup_service_port, service_port
from cpx.objects import ObjectKey
from cpx.sources.cache import SourceCache
from cpx.sources.externalname import ExternalNamePolicy, points_to_localhost
from cpx.sources.resolver import Resolver


def service(
    ports: list[dict[str, Any]],
    *,
    name: str = "foo",
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": ports, **spec}}


HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
HTTPS = {"name": "https", "port": 443, "targetPort": "web-tls", "protocol": "TCP"}


# -- port resolution ---------------------------------------------------------------------------


def test_port_by_number() -> None:
    got = service_port(service([HTTP, HTTPS]), 443)
    assert got == ServicePort(
        namespace="default", name="foo", port=443, port_name="https", target_port="web-tls"
    )
    assert got.eds_name == "default/foo/https"


def test_port_by_name_carries_target_port_and_name() -> None:
    got = service_port(service([HTTP, HTTPS]), "http")
    assert (got.port, got.port_name, got.target_port) == (80, "http", 8080)
    assert got.external_name is None
    assert got.protocol is UpstreamProtocol.HTTP1
    assert got.circuit_breakers == CircuitBreakers()


def test_unnamed_port_eds_name_has_no_port_segment() -> None:
    got = service_port(service([{"port": 8080}]), 8080)
    assert got.port_name == ""
    # The API server defaults targetPort to port.
    assert got.target_port == 8080
    assert got.eds_name == "default/foo"


def test_numeric_string_reference_matches_by_number() -> None:
    # Contour's intstr.IntValue() turns "80" into 80.
    assert service_port(service([HTTP]), "80").port == 80


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("grpc", 'port "grpc" on service "default/foo" not matched'),
        (8443, 'port "8443" on service "default/foo" not matched'),
        ("", 'port "" on service "default/foo" not matched'),
    ],
)
def test_port_not_matched(ref: int | str, message: str) -> None:
    with pytest.raises(ServicePortError) as err:
        service_port(service([HTTP, {"port": 9000}]), ref)
    assert str(err.value) == message


def test_non_tcp_port_refused() -> None:
    svc = service([{"name": "dns", "port": 53, "protocol": "UDP"}])
    with pytest.raises(ServicePortError, match=r'^unsupported service protocol "UDP"$'):
        service_port(svc, "dns")


def test_service_port_error_is_a_value_error() -> None:
    assert issubclass(ServicePortError, ValueError)


def test_lookup_service_port_through_source_records_reference() -> None:
    source = SourceCache()
    source.insert(service([HTTP]))
    with source.recording() as rec:
        got = lookup_service_port(source, "default", "foo", "http")
    assert got.port == 80
    assert ObjectKey("", "Service", "default", "foo") in rec


def test_lookup_missing_service() -> None:
    source = SourceCache()
    with (
        source.build_recording(),
        pytest.raises(ServicePortError, match=r'^service "default/missing" not found$'),
    ):
        lookup_service_port(source, "default", "missing", 80)
    # A later Service "default/missing" must trigger a rebuild.
    assert source.insert(service([HTTP], name="missing")) is True


# -- ExternalName ------------------------------------------------------------------------------


def external(target: str) -> dict[str, Any]:
    return service([HTTP], name="ext", type="ExternalName", externalName=target)


def fake_dns(table: dict[str, list[str]]) -> Resolver:
    """A resolver answering from ``table`` (a missing name does not resolve)."""

    def lookup(name: str) -> list[str]:
        if name not in table:
            raise OSError(f"[Errno -2] Name or service not known: {name}")
        return table[name]

    return Resolver(lookup)


# Enabled, with a resolver that knows nothing: only the static checks can refuse.
ENABLED = ExternalNamePolicy(enabled=True, resolver=fake_dns({}))
LOCALHOST = "default/ext is an ExternalName service that points to localhost, this is not allowed"
DISABLED = (
    "default/ext is an ExternalName service, these are not currently enabled. "
    "See the config.enableExternalNameService config file setting"
)


def test_external_name() -> None:
    got = service_port(external("api.example.com"), 80, external_names=ENABLED)
    assert got.external_name == "api.example.com"
    assert got.port == 80


@pytest.mark.parametrize(
    "target",
    [
        "localhost",
        "LOCALHOST.",
        "localhost.localdomain",
        "local.projectcontour.io",
        "ip6-localhost",
        "foo.localhost",
        "127.0.0.1",
        "127.1.2.3",
        "127.1",  # legacy IPv4 spelling resolvers accept
        "2130706433",  # 127.0.0.1 as one number
        "::1",
        "[::1]",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "::",
        "169.254.169.254",  # link-local: cloud metadata
        "fe80::1",
        "fe80::1%eth0",
    ],
)
def test_external_name_to_localhost_refused(target: str) -> None:
    with pytest.raises(ServicePortError) as err:
        service_port(external(target), 80, external_names=ENABLED)
    assert str(err.value) == LOCALHOST


@pytest.mark.parametrize(
    "target", ["example.com", "10.0.0.1", "2001:db8::1", "localhost.example.com", "1.2.3.4"]
)
def test_not_localhost(target: str) -> None:
    assert not points_to_localhost(target)


@pytest.mark.parametrize(
    ("addresses", "shown"),
    [
        (["127.0.0.1"], "127.0.0.1"),
        (["10.0.0.7", "127.0.1.1"], "127.0.1.1"),  # any address counts: Envoy may pick any
        (["::1"], "::1"),
        (["0.0.0.0"], "0.0.0.0"),
        (["169.254.169.254"], "169.254.169.254"),
        (["::ffff:127.0.0.1"], "::ffff:127.0.0.1"),
    ],
)
def test_a_name_that_resolves_to_localhost_is_refused(addresses: list[str], shown: str) -> None:
    policy = ExternalNamePolicy(enabled=True, resolver=fake_dns({"admin.evil.test": addresses}))
    with pytest.raises(ServicePortError) as err:
        service_port(external("admin.evil.test"), 80, external_names=policy)
    assert str(err.value) == f'{LOCALHOST} ("admin.evil.test" resolves to {shown})'


def test_a_name_that_resolves_elsewhere_or_not_at_all_is_used() -> None:
    policy = ExternalNamePolicy(enabled=True, resolver=fake_dns({"api.example.com": ["192.0.2.10"]}))
    assert service_port(external("api.example.com"), 80, external_names=policy).external_name
    # Not resolvable now: Envoy cannot connect anywhere either; checked again at the next build.
    assert service_port(external("nowhere.example.com"), 80, external_names=policy).external_name


def test_the_system_resolver_is_used_by_default() -> None:
    # "localhost" is refused by name; the machine's own host name resolves (here) to an address
    # of this host, which is the case name checks miss.
    hostname = socket.gethostname()
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(hostname, None)}
    except OSError:
        pytest.skip(f"{hostname} does not resolve here")
    if not any(a.startswith("127.") or a == "::1" for a in addresses):
        pytest.skip(f"{hostname} does not resolve to loopback here ({addresses})")
    with pytest.raises(ServicePortError, match="points to localhost"):
        service_port(external(hostname), 80, external_names=ExternalNamePolicy(enabled=True))


def test_external_name_disabled_by_default() -> None:
    for target in ("api.example.com", "localhost"):
        with pytest.raises(ServicePortError) as err:
            service_port(external(target), 80)
        assert str(err.value) == DISABLED


def test_lookup_uses_the_source_cache_policy_and_records_a_volatile_lookup() -> None:
    source = SourceCache()
    source.insert(external("api.example.com"))
    with pytest.raises(ServicePortError, match="not currently enabled"):
        lookup_service_port(source, "default", "ext", 80)
    source = SourceCache(external_names=ENABLED)
    source.insert(external("api.example.com"))
    with source.recording() as rec:
        assert lookup_service_port(source, "default", "ext", 80).external_name == "api.example.com"
    # DNS answers change without any object changing: memoised results must be recomputed.
    assert rec.volatile


def test_external_name_only_for_that_type() -> None:
    svc = service([HTTP], type="ClusterIP", externalName="localhost")
    assert service_port(svc, 80).external_name is None


def test_a_slow_lookup_is_refused_meanwhile() -> None:
    release = threading.Event()

    def lookup(name: str) -> list[str]:
        release.wait(10)
        return ["127.0.0.1"]

    policy = ExternalNamePolicy(enabled=True, resolver=Resolver(lookup, timeout=0.05))
    with pytest.raises(ServicePortError) as err:
        service_port(external("slow.test"), 80, external_names=policy)
    assert str(err.value) == (
        'default/ext is an ExternalName service whose name "slow.test" has not resolved yet; '
        "it is refused until cpx can check that it does not point to localhost"
    )
    release.set()
    deadline = time.monotonic() + 5
    while "not resolved yet" in _refusal(policy) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _refusal(policy) == f'{LOCALHOST} ("slow.test" resolves to 127.0.0.1)'


def _refusal(policy: ExternalNamePolicy) -> str:
    try:
        service_port(external("slow.test"), 80, external_names=policy)
    except ServicePortError as err:
        return str(err)
    return ""


# -- circuit breakers --------------------------------------------------------------------------


def test_circuit_breaker_annotations() -> None:
    svc = service(
        [HTTP],
        annotations={
            "projectcontour.io/max-connections": "9000",
            "projectcontour.io/max-pending-requests": "4096",
            "projectcontour.io/max-requests": "404",
            "projectcontour.io/max-retries": "7",
            "projectcontour.io/per-host-max-connections": "45",
        },
    )
    assert service_port(svc, 80).circuit_breakers == CircuitBreakers(
        max_connections=9000,
        max_pending_requests=4096,
        max_requests=404,
        max_retries=7,
        per_host_max_connections=45,
    )


def test_invalid_circuit_breaker_values_ignored_with_warning() -> None:
    svc = service(
        [HTTP],
        annotations={
            "projectcontour.io/max-connections": "many",
            "projectcontour.io/max-requests": "-1",
            "projectcontour.io/max-retries": "4294967296",  # > uint32
            "projectcontour.io/max-pending-requests": "0",  # 0 means unset, silently
            "projectcontour.io/per-host-max-connections": "12",
        },
    )
    warnings: list[str] = []
    got = service_port(svc, 80, warn=warnings.append)
    assert got.circuit_breakers == CircuitBreakers(per_host_max_connections=12)
    assert len(warnings) == 3
    assert warnings[0] == (
        'ignoring annotation projectcontour.io/max-connections: "many" on service "default/foo" '
        "is not an unsigned 32-bit integer"
    )
    assert any("max-requests" in w and '"-1"' in w for w in warnings)
    assert any("max-retries" in w for w in warnings)


def test_invalid_values_without_warn_callback() -> None:
    svc = service([HTTP], annotations={"projectcontour.io/max-connections": "x"})
    assert service_port(svc, 80).circuit_breakers == CircuitBreakers()


# -- upstream protocol -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        ("projectcontour.io/upstream-protocol.h2", "http", UpstreamProtocol.H2),
        ("projectcontour.io/upstream-protocol.h2c", "80", UpstreamProtocol.H2C),
        ("projectcontour.io/upstream-protocol.tls", " 443 , http ", UpstreamProtocol.TLS),
        ("projectcontour.io/upstream-protocol.tls", "https", UpstreamProtocol.HTTP1),
        ("projectcontour.io/upstream-protocol.h3", "http", UpstreamProtocol.HTTP1),
    ],
)
def test_upstream_protocol_annotation(annotation: str, value: str, expected: UpstreamProtocol) -> None:
    svc = service([HTTP], annotations={annotation: value})
    assert service_port(svc, "http").protocol is expected


def test_upstream_protocol_last_annotation_wins() -> None:
    # Contour reads h2, h2c, tls in that order into one map.
    svc = service(
        [HTTP],
        annotations={
            "projectcontour.io/upstream-protocol.h2": "http",
            "projectcontour.io/upstream-protocol.tls": "http",
        },
    )
    assert service_port(svc, 80).protocol is UpstreamProtocol.TLS


@pytest.mark.parametrize(
    ("app_protocol", "expected"),
    [
        ("kubernetes.io/h2c", UpstreamProtocol.H2C),
        ("https", UpstreamProtocol.TLS),
        ("http", UpstreamProtocol.HTTP1),
        ("kubernetes.io/ws", UpstreamProtocol.HTTP1),
        ("kubernetes.io/wss", UpstreamProtocol.HTTP1),  # unsupported in Contour: plain
        ("grpc", UpstreamProtocol.HTTP1),
    ],
)
def test_app_protocol(app_protocol: str, expected: UpstreamProtocol) -> None:
    svc = service([{**HTTP, "appProtocol": app_protocol}])
    assert service_port(svc, 80).protocol is expected


def test_app_protocol_wins_over_annotation() -> None:
    svc = service(
        [{**HTTP, "appProtocol": "http"}],
        annotations={"projectcontour.io/upstream-protocol.tls": "http"},
    )
    assert service_port(svc, 80).protocol is UpstreamProtocol.HTTP1
