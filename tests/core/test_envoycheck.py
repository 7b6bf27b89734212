"""``envoy --mode validate`` on a snapshot: the rendering, and Envoy's verdicts on what it NACKs over xDS."""

from __future__ import annotations

import base64
import concurrent.futures
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner
from cpx_httpproxy import testing as hp
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2, tls_pb2
from google.protobuf.message import Message

from cpx.cli import cli
from cpx.config import Config
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources.manifests import expand, parse_file
from cpx.testing.cpxproc import backend
from cpx.testing.tls import make_ca_secret, make_tls_secret, weak_tls_secret
from cpx.xds.constraints.envoycheck import (
    MAX_MESSAGE,
    EnvoyCheckError,
    EnvoyValidator,
    _verdict,
    render_batch,
    render_bootstrap,
)
from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from cpx_ingress.testing import simple_ingress as ingress

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HCM = http_connection_manager_pb2.HttpConnectionManager


def build(objects: Iterable[Mapping[str, Any]], shape: Literal["scoped", "single"] = "single") -> Snapshot:
    """The snapshot the real pipeline (every installed plugin) makes of ``objects``; Contour's
    route shape unless told (the tests of the renderer's mechanics count its resources)."""
    pipeline = SnapshotHandler.create(PluginHost.load(None), Config(route_shape=shape))
    for obj in objects:
        if pipeline.accepts(obj):
            pipeline.upsert(dict(obj))
    return pipeline.rebuild()


def example(name: str) -> Snapshot:
    return build(obj for path in expand([EXAMPLES / name]) for obj in parse_file(path)[0])


def site() -> Snapshot:
    """HTTP and HTTPS routes, an EDS cluster and an SDS secret: every indirection the renderer resolves."""
    secret, _ = make_tls_secret("default", "site", ["site.test"])
    page = ingress("site", [("site.test", "/", "web")], tls={"site": ["site.test"]})
    return build([*backend("web", 18080), secret, page])


def replaced(snapshot: Snapshot, type_url: str, edit: Any) -> Snapshot:
    """``snapshot`` with every resource of ``type_url`` passed through ``edit(message)`` (in place)."""
    resources = {}
    for name, resource in snapshot.get(type_url).resources.items():
        msg = resource.message()
        edit(msg)
        resources[name] = Resource.from_message(name, type_url, msg)
    return Snapshot({**snapshot.types, type_url: TypeSnapshot.of(type_url, resources)})


def without(snapshot: Snapshot, type_url: str) -> Snapshot:
    return Snapshot({**snapshot.types, type_url: TypeSnapshot.of(type_url, {})})


def weak_key_secret(msg: Message) -> None:
    """Envoy refuses RSA keys under 2048 bits (cpx's own checks may not; the dynamic path NACKs)."""
    assert isinstance(msg, secret_pb2.Secret)
    data = weak_tls_secret("default", "site", "site.test")["data"]
    msg.tls_certificate.certificate_chain.inline_bytes = base64.b64decode(data["tls.crt"])
    msg.tls_certificate.private_key.inline_bytes = base64.b64decode(data["tls.key"])


def first_route(msg: Message) -> route_pb2.Route | None:
    """The first route of a RouteConfiguration (the scoped shape's ``ingress_http`` may have none)."""
    assert isinstance(msg, route_pb2.RouteConfiguration)
    for host in msg.virtual_hosts:
        for route in host.routes:
            return route
    return None


def crlf_header(msg: Message) -> None:
    route = first_route(msg)
    if route is not None:
        header = route.request_headers_to_add.add().header
        header.key, header.value = "x-tenant", "a\r\nx-injected: 1"


def long_direct_response(msg: Message) -> None:
    route = first_route(msg)
    if route is None:
        return
    route.ClearField("route")
    route.direct_response.status = 200
    route.direct_response.body.inline_string = "x" * 4097


def duration_out_of_range(msg: Message) -> None:
    assert isinstance(msg, cluster_pb2.Cluster)
    check = msg.health_checks.add()
    check.timeout.seconds = 9223372036854775807  # what clamping a huge timeoutSeconds can produce
    check.interval.seconds = 5
    check.healthy_threshold.value = check.unhealthy_threshold.value = 1
    check.http_health_check.path = "/"


def bad_address(msg: Message) -> None:
    assert isinstance(msg, endpoint_pb2.ClusterLoadAssignment)
    msg.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address = "999.1.1.1"


# The inputs tests/e2e's NACK test and issue #8's table make Envoy NACK, and a word of Envoy's reason.
NACKED = {
    "weak RSA key": (SECRET, weak_key_secret, "2048"),
    "header value with CR/LF": (ROUTE, crlf_header, "value"),
    "direct response body > 4096 bytes": (ROUTE, long_direct_response, "4096"),
    "Duration out of range": (CLUSTER, duration_out_of_range, "uration"),
    "EDS address 999.1.1.1": (ENDPOINT, bad_address, "999.1.1.1"),
}


@pytest.fixture(scope="module")
def validator() -> EnvoyValidator:
    return EnvoyValidator()


@pytest.fixture(scope="module")
def good() -> Snapshot:
    return site()


@pytest.mark.parametrize("name", ["quickstart", "ingress", "httpproxy"])
def test_examples_are_accepted(validator: EnvoyValidator, name: str) -> None:
    snapshot = example(name)
    assert snapshot.get(LISTENER).resources and snapshot.get(CLUSTER).resources
    assert validator.check(snapshot) is None


def test_a_feature_rich_httpproxy_is_accepted(validator: EnvoyValidator) -> None:
    # Weighted and mirrored services, upstream TLS with a CA, health checks, policies, a TLS TCP proxy.
    secret, _ = make_tls_secret("default", "site", ["rich.test", "tcp.test"])
    web = [
        hp.service("web", weight=80),
        hp.service("api", weight=20),
        hp.service("web", mirror=True),
    ]
    main = hp.route(
        hp.prefix("/"),
        services=web,
        timeout_policy={"response": "10s", "idle": "1m"},
        retry_policy={"count": 3, "perTryTimeout": "1s"},
        health_check_policy={"path": "/healthz", "intervalSeconds": 5, "timeoutSeconds": 2},
        load_balancer_policy={"strategy": "Cookie"},
        request_headers_policy=hp.headers_policy({"x-a": "b"}, ["x-c"]),
    )
    upstream_tls = hp.service("api", protocol="tls", validation={"caSecret": "ca", "subjectName": "api.test"})
    rich = hp.root(
        "rich",
        "rich.test",
        main,
        hp.route(hp.prefix("/tls"), services=[upstream_tls]),
        hp.route(hp.prefix("/direct"), direct_response_policy={"statusCode": 200, "body": "hi"}),
        tls=hp.tls("site"),
        cors_policy={"allowOrigin": ["*"], "allowMethods": ["GET"]},
        rate_limit_policy={"local": {"requests": 10, "unit": "second"}},
        ip_deny_policy=[hp.ip_rule("10.0.0.0/8")],
    )
    tcp = hp.root("tcp", "tcp.test", tls=hp.tls("site"), tcpproxy=hp.tcpproxy(hp.service("web")))
    snapshot = build(
        [*backend("web", 18080), *backend("api", 18081), secret, make_ca_secret("default", "ca"), rich, tcp]
    )
    assert len(snapshot.get(CLUSTER).resources) >= 4 and len(snapshot.get(ROUTE).resources) == 2
    assert any(c.HasField("transport_socket") for c in render_bootstrap(snapshot).static_resources.clusters)
    assert validator.check(snapshot) is None
    assert validator.check(snapshot, previous=snapshot) is None
    assert validator.check_batch([snapshot, snapshot]) == [None, None]


def test_rendering_resolves_every_ads_reference(good: Snapshot) -> None:
    static = render_bootstrap(good).static_resources
    clusters = {c.name: c for c in static.clusters}
    web = next(c for name, c in clusters.items() if name.startswith("default/web/"))
    assert web.type == cluster_pb2.Cluster.STATIC and not web.HasField("eds_cluster_config")
    address = web.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address
    assert (address.address, address.port_value) == ("127.0.0.1", 18080)
    assert [s.name for s in static.secrets] == list(good.get(SECRET).resources)
    managers = _managers(static.listeners)
    for listener in static.listeners:
        for chain in listener.filter_chains:
            if chain.HasField("transport_socket"):
                tls = tls_pb2.DownstreamTlsContext()
                chain.transport_socket.typed_config.Unpack(tls)
                refs = tls.common_tls_context.tls_certificate_sds_secret_configs
                assert [r.name for r in refs] == list(good.get(SECRET).resources)
                assert not any(r.HasField("sds_config") for r in refs)  # the static secret of that name
    assert managers and all(m.HasField("route_config") and not m.HasField("rds") for m in managers)
    served = {r.name: r.message() for r in good.get(ROUTE).resources.values()}
    for hcm in managers:
        assert hcm.route_config.validate_clusters.value is False  # as for RDS routes
        hcm.route_config.ClearField("validate_clusters")
        assert hcm.route_config == served[hcm.route_config.name]


def test_unchanged_resources_keep_their_bytes(good: Snapshot) -> None:
    static = render_bootstrap(good).static_resources
    assert {s.SerializeToString(deterministic=True) for s in static.secrets} == {
        r.body for r in good.get(SECRET).resources.values()
    }


@pytest.mark.parametrize("case", sorted(NACKED))
def test_what_envoy_nacks_is_refused(validator: EnvoyValidator, good: Snapshot, case: str) -> None:
    type_url, edit, word = NACKED[case]
    reason = validator.check(replaced(good, type_url, edit))
    assert reason is not None, case
    assert word in reason, reason
    assert "\n" not in reason and "[critical]" not in reason and "bootstrap.pb" not in reason


def test_the_scoped_shape_is_checked_with_its_scopes_inline(validator: EnvoyValidator) -> None:
    secret, _ = make_tls_secret("default", "site", ["site.test"])
    pages = [
        ingress("site", [("site.test", "/", "web")], tls={"site": ["site.test"]}),
        ingress("any", [("*.wild.test", "/", "web")]),
    ]
    scoped = build([*backend("web", 18080), secret, *pages], shape="scoped")
    assert len(scoped.get(SCOPED_ROUTE).resources) == 2  # site.test, and the wildcard and default hosts
    static = render_bootstrap(scoped).static_resources
    (manager,) = (m for m in _managers(static.listeners) if m.HasField("scoped_routes"))
    listed = manager.scoped_routes.scoped_route_configurations_list.scoped_route_configurations
    assert sorted(s.route_configuration.name for s in listed) == ["ingress_http", "ingress_http/site.test"]
    assert validator.check(scoped) is None
    for case in ("header value with CR/LF", "direct response body > 4096 bytes"):
        type_url, edit, word = NACKED[case]
        reason = validator.check(replaced(scoped, type_url, edit))
        assert reason is not None and word in reason, (case, reason)


def _managers(listeners: Iterable[listener_pb2.Listener]) -> list[Any]:
    found: list[Any] = []
    for listener in listeners:
        for chain in listener.filter_chains:
            for network_filter in chain.filters:
                if network_filter.typed_config.Is(HCM.DESCRIPTOR):
                    manager = HCM()
                    network_filter.typed_config.Unpack(manager)
                    found.append(manager)
    return found


def test_envoys_message_is_sanitised() -> None:
    path = "/tmp/cpx-validate-x/bootstrap.pb"
    prefix = "[2026-11-29 12:00:00.000][7][critical][main] [source/server/config_validation/server.cc:76] "
    dump = f"{prefix}error initializing configuration '{path}': goo.gle/debugstr \nname: \"site\"\n"
    dump += 'private_key {\n  inline_bytes: "-----BEGIN PRIVATE KEY-----SECRET"\n}\n'
    dump += ": Proto constraint validation failed (SecretValidationError.Name: too long)\n"
    early = "[2026][7][error][config] a warning first\n"
    assert (
        _verdict(early + dump, path)
        == "Proto constraint validation failed (SecretValidationError.Name: too long)"
    )
    long = f"{prefix}error initializing configuration '{path}': {'x' * 5000}\x1b[31m"
    assert _verdict(long, path) == "x" * (MAX_MESSAGE - 3) + "..."
    assert _verdict(f"{prefix}cannot read {path}\r\n", path) == "cannot read <bootstrap>"


def test_what_envoy_would_wait_for_is_not_an_error(validator: EnvoyValidator, good: Snapshot) -> None:
    # Over xDS, a missing route configuration, endpoint assignment or secret only keeps the listener
    # or cluster warming; it is not a rejection.
    for type_url in (ROUTE, ENDPOINT, SECRET):
        assert validator.check(without(good, type_url)) is None, type_url


def test_listeners_on_one_address_clash(validator: EnvoyValidator, good: Snapshot) -> None:
    listener = next(iter(good.get(LISTENER).resources.values())).message()
    assert isinstance(listener, listener_pb2.Listener)
    listener.name = "copy"
    copy = Resource.from_message("copy", LISTENER, listener)
    listeners = {**good.get(LISTENER).resources, "copy": copy}
    clash = Snapshot({**good.types, LISTENER: TypeSnapshot.of(LISTENER, listeners)})
    reason = validator.check(clash)
    assert reason is not None and "duplicate address" in reason
    # ... also inside a batch, where every snapshot's ports are renumbered.
    assert validator.check_batch([good, clash, good]) == [None, reason, None]


class CountingValidator(EnvoyValidator):
    runs: int = 0
    clusters: int = 0  # in the last bootstrap

    def _run(self, bootstrap: Any) -> str | None:
        self.runs += 1
        self.clusters = len(bootstrap.static_resources.clusters)
        return super()._run(bootstrap)


def test_a_batch_runs_envoy_once_and_bisects_to_the_refused(good: Snapshot) -> None:
    validator = CountingValidator()
    quickstart = example("quickstart")
    batch = [good, quickstart, good, example("httpproxy")]
    assert validator.check_batch(batch) == [None] * 4
    assert validator.runs == 1
    # Same names, different contents in one bootstrap: prefixes keep them apart.
    names = render_batch(batch).static_resources
    assert len({c.name for c in names.clusters}) == len(names.clusters)

    bad = [replaced(good, type_url, edit) for type_url, edit, _ in NACKED.values()]
    validator.runs = 0
    verdicts = validator.check_batch([quickstart, bad[0], good, bad[1], *bad[2:]])
    assert verdicts[0] is None and verdicts[2] is None
    for verdict, word in zip(
        [verdicts[1], verdicts[3], *verdicts[4:]], [w for _, _, w in NACKED.values()], strict=True
    ):
        assert verdict is not None and word in verdict, verdict
    assert validator.runs < 2 * len(verdicts)


def tcp_proxies(static: Any) -> list[tuple[str, str]]:
    """(listener name, cluster name) of every TCP proxy in rendered static resources."""
    found = []
    for listener in static.listeners:
        for chain in listener.filter_chains:
            for network_filter in chain.filters:
                if network_filter.typed_config.Is(tcp_proxy_pb2.TcpProxy.DESCRIPTOR):
                    proxy = tcp_proxy_pb2.TcpProxy()
                    network_filter.typed_config.Unpack(proxy)
                    found.append((listener.name, proxy.cluster))
    return found


def test_cluster_references_follow_the_prefix() -> None:
    # In a batch every cluster is renamed, and so is every reference to it (here a TCP proxy's).
    tcp = example("httpproxy")
    rendered = render_batch([tcp, tcp]).static_resources
    assert all(c.name.startswith(("s0~", "s1~")) for c in rendered.clusters)
    proxied = sorted((listener[:3], cluster[:3]) for listener, cluster in tcp_proxies(rendered))
    assert proxied == [("s0~", "s0~"), ("s1~", "s1~")]


def test_an_update_validates_only_the_clusters_that_changed(
    validator: EnvoyValidator, good: Snapshot
) -> None:
    tcp = example("httpproxy")
    assert len(render_bootstrap(tcp).static_resources.clusters) == len(tcp.get(CLUSTER).resources) > 1
    # Unchanged: only the clusters a listener names (Envoy may check those when it loads the listener).
    update = render_bootstrap(tcp, previous=tcp).static_resources
    assert [c.name for c in update.clusters] == [cluster for _, cluster in tcp_proxies(update)]
    # A changed cluster, or its changed endpoints, are validated; routes and listeners always are.
    for type_url, edit, word in NACKED.values():
        reason = validator.check(replaced(good, type_url, edit), previous=good)
        assert reason is not None and word in reason, reason
    # What Envoy already accepted is not looked at again (it would skip it in an update too).
    bad_endpoints = replaced(good, ENDPOINT, bad_address)
    assert validator.check(bad_endpoints, previous=bad_endpoints) is None


def test_checks_run_in_parallel_threads(validator: EnvoyValidator, good: Snapshot) -> None:
    bad = replaced(good, ENDPOINT, bad_address)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(validator.check, [good, bad] * 4))
    assert verdicts[0::2] == [None] * 4
    assert all(v is not None and "999.1.1.1" in v for v in verdicts[1::2])


def test_as_a_checker_it_validates_updates_of_what_it_accepted(good: Snapshot) -> None:
    validator = CountingValidator()
    tcp = example("httpproxy")
    assert validator(tcp) is None and validator.clusters == len(tcp.get(CLUSTER).resources)
    assert validator(tcp) is None and validator.clusters == 1  # the TCP proxy's: a listener names it
    bad = replaced(tcp, ENDPOINT, bad_address)
    reason = validator(bad)
    assert reason is not None and "999.1.1.1" in reason
    assert validator(bad) == reason  # a refused snapshot never becomes the base
    assert validator(good) is None


def test_missing_binary_is_not_a_verdict() -> None:
    with pytest.raises(EnvoyCheckError, match="not found"):
        EnvoyValidator(binary="/nonexistent/envoy")


def test_a_crashing_binary_is_not_a_verdict(tmp_path: Path, good: Snapshot) -> None:
    fake = tmp_path / "envoy"
    fake.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(EnvoyCheckError, match="exited 3: boom"):
        EnvoyValidator(binary=str(fake)).check(good)


# --- the command line ---------------------------------------------------------------------------


def fake_envoy(tmp_path: Path, refuse_if: str) -> Path:
    """An "envoy" that refuses, as Envoy logs it, any bootstrap containing ``refuse_if``."""
    fake = tmp_path / "envoy"
    fake.write_text(
        "#!/bin/sh\n"
        f'if grep -q "{refuse_if}" "$4"; then\n'
        "  echo \"[2026][1][critical][main] [server.cc:76] error initializing configuration '$4': "
        'no thanks" >&2\n'
        "  exit 1\n"
        "fi\n"
    )
    fake.chmod(0o755)
    return fake


@pytest.mark.usefixtures("keep_logging")
def test_translate_reports_envoys_verdict(tmp_path: Path) -> None:
    quickstart = str(EXAMPLES / "quickstart")
    result = CliRunner().invoke(cli, ["translate", "--envoy-validate", "-o", "json", quickstart])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["envoy"] == {"accepted": True}

    # Envoy refuses whatever serves HTTP: the objects that do are found and left out, their
    # status says why, and what remains is accepted.
    refusing = str(fake_envoy(tmp_path, "ingress_http"))
    args = ["translate", "--envoy-validate", "--envoy-binary", refusing, "-o", "json", quickstart]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["envoy"] == {"accepted": True}
    problems = [p for o in doc["objects"] for p in o.get("status", {}).get("cpx", {}).get("problems", [])]
    assert {(p["reason"], p["message"]) for p in problems} == {("EnvoyRejected", "no thanks")}

    # A verdict against everything (EnvoyValidator.tested refuses such an Envoy at start, so
    # through the function): no object is to blame, nothing is published.
    from cpx.offline import translate

    doc = translate([EXAMPLES / "quickstart"], PluginHost.load(), Config(), validator=lambda snapshot: "no")
    assert doc["envoy"] == {"accepted": False, "message": "EnvoyValidation (EnvoyRejected): no"}
    assert doc["xds"] == {}

    result = CliRunner().invoke(cli, ["translate", "-o", "json", quickstart])
    assert "envoy" not in json.loads(result.stdout)


@pytest.mark.usefixtures("keep_logging")
def test_serve_refuses_to_start_without_a_working_envoy(tmp_path: Path) -> None:
    quickstart = str(EXAMPLES / "quickstart")
    for binary, error in [
        (str(tmp_path / "missing"), "not found"),
        (str(fake_envoy(tmp_path, "")), "refuses an empty configuration: no thanks"),
    ]:
        args = ["serve", "--manifests", quickstart, "--envoy-validate", "--envoy-binary", binary]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1
        assert error in result.output
