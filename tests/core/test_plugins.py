from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2

from cpx import (
    ClusterKindSpec,
    HttpFilterSpec,
    ListenerKindSpec,
    OptionSpec,
    Phase,
    ProcessorSpec,
    ResourceCacheSpec,
    hookimpl,
)
from cpx.builtin import plugin as core
from cpx.cli import cli
from cpx.cli.plugins import describe_contributions
from cpx.dag.builder import order_processors
from cpx.errors import PluginError
from cpx.plugins import PluginHost, available_plugins

ROOT = Path(__file__).resolve().parents[2]


def _spec(
    name: str, phase: Phase = Phase.ROUTES, after: tuple[str, ...] = (), before: tuple[str, ...] = ()
) -> ProcessorSpec:
    return ProcessorSpec(name=name, factory=lambda config: None, phase=phase, after=after, before=before)  # type: ignore[arg-type,return-value]


def test_processors_sort_by_phase_then_constraints_then_name() -> None:
    specs = [
        _spec("zeta"),
        _spec("finalize", Phase.FINALIZE),
        _spec("alpha", after=("zeta",)),
        _spec("listeners", Phase.LISTENERS),
        _spec("beta", before=("zeta",)),
    ]
    assert [s.name for s in order_processors(specs)] == ["listeners", "beta", "zeta", "alpha", "finalize"]
    # Registration order never matters.
    assert [s.name for s in order_processors(list(reversed(specs)))] == [
        "listeners",
        "beta",
        "zeta",
        "alpha",
        "finalize",
    ]


def test_processor_cycle_is_an_error_and_absent_names_are_ignored() -> None:
    with pytest.raises(PluginError, match="cycle"):
        order_processors([_spec("a", after=("b",)), _spec("b", after=("a",))])
    # Ordering against a processor that is not loaded (an optional plugin) is no constraint.
    assert [
        s.name for s in order_processors([_spec("b", before=("httpproxy",)), _spec("a", after=("nope",))])
    ] == ["a", "b"]
    with pytest.raises(PluginError, match="two DAG processors are named 'a'"):
        order_processors([_spec("a"), _spec("a")])


def test_unknown_plugin_names_the_installed_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown plugin\(s\): htpproxy \(installed: .*ingress"):
        PluginHost.load(["htpproxy"])


def test_two_caches_for_one_type_url_is_an_error() -> None:
    other = types.ModuleType("dup")

    @hookimpl
    def cpx_resource_caches():  # type: ignore[no-untyped-def]
        yield ResourceCacheSpec(
            name="mine",
            type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster",
            factory=lambda c: None,  # type: ignore[arg-type,return-value]
        )

    other.cpx_resource_caches = cpx_resource_caches  # type: ignore[attr-defined]
    from cpx.builtin import plugin as core

    host = PluginHost.from_modules([("core", core), ("dup", other)])
    with pytest.raises(PluginError, match="registered by both 'core' and 'dup'"):
        host.resource_caches()


def test_hookimpl_of_unknown_hook_is_rejected() -> None:
    bad = types.ModuleType("bad")

    @hookimpl
    def cpx_not_a_hook():  # type: ignore[no-untyped-def]
        return None

    bad.cpx_not_a_hook = cpx_not_a_hook  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match="'bad'"):
        PluginHost.from_modules([("bad", bad)])


def test_wrong_record_type_names_the_plugin() -> None:
    odd = types.ModuleType("odd")

    @hookimpl
    def cpx_options():  # type: ignore[no-untyped-def]
        yield "not a record"

    odd.cpx_options = cpx_options  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match="plugin 'odd' returned str from cpx_options; expected OptionSpec"):
        PluginHost.from_modules([("odd", odd)]).options()


def test_plugins_list_json_reports_contributions() -> None:
    result = CliRunner().invoke(cli, ["plugins", "list", "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    core = rows["core"]
    assert core["enabled"] is True and core["distribution"] == "cpx"
    assert "v1/Service" in core["watches"] and "discovery.k8s.io/v1/EndpointSlice" in core["watches"]
    assert core["processors"][0].startswith("1. listeners")
    assert {c.split()[0] for c in core["resource_caches"]} == {
        "listeners",
        "routes",
        "scoped-routes",
        "clusters",
        "endpoints",
        "secrets",
    }
    assert core["http_filters"][-1].endswith(". router")
    ingress = rows["ingress"]
    assert ingress["distribution"] == "cpx-ingress"
    assert "networking.k8s.io/v1/Ingress" in ingress["watches"]


@attrs.frozen
class _EchoListener:
    name: str
    origin: None = None


@attrs.frozen
class _AuthCluster:
    name: str
    origin: None = None


class _Contributor:
    """A plugin with one contribution of each xDS kind; its filter sits right after CORS."""

    @hookimpl
    def cpx_http_filters(self) -> list[HttpFilterSpec]:
        return [
            HttpFilterSpec(
                name="envoy.filters.http.header_mutation",
                config=lambda site: header_mutation_pb2.HeaderMutation(),
                after=("envoy.filters.http.cors",),
                before=("envoy.filters.http.local_ratelimit",),
                per_route=lambda route: None,
            )
        ]

    @hookimpl
    def cpx_listener_kinds(self) -> list[ListenerKindSpec]:
        return [
            ListenerKindSpec(name="echo", node_type=_EchoListener, build=lambda n: listener_pb2.Listener())
        ]

    @hookimpl
    def cpx_cluster_kinds(self) -> list[ClusterKindSpec]:
        return [ClusterKindSpec(name="auth", node_type=_AuthCluster, build=lambda n: cluster_pb2.Cluster())]


def test_contributions_show_http_filters_in_order_and_xds_kinds() -> None:
    shown = describe_contributions(PluginHost.from_modules([("core", core), ("extra", _Contributor())]))
    assert shown["core"]["http_filters"] == [
        "1. envoy.filters.http.lua",
        "2. envoy.filters.http.compressor",
        "3. envoy.filters.http.grpc_web",
        "4. envoy.filters.http.grpc_stats",
        "5. envoy.filters.http.cors (per virtual host, route)",
        "7. envoy.filters.http.local_ratelimit (per virtual host, route)",
        "8. envoy.filters.http.lua.cookie_rewrite (per route, weighted cluster)",
        "9. envoy.filters.http.rbac (per virtual host, route)",
        "10. router",
    ]
    extra = shown["extra"]
    assert extra["http_filters"] == ["6. envoy.filters.http.header_mutation (per route)"]
    assert extra["listener_kinds"] == [f"echo ({__name__}._EchoListener)"]
    assert extra["cluster_kinds"] == [f"auth ({__name__}._AuthCluster)"]
    assert "listener_kinds" not in shown["core"] and "watches" not in extra


def test_plugins_list_text_shows_http_filters() -> None:
    result = CliRunner().invoke(cli, ["plugins", "list", "--plugins", "ingress"])
    assert result.exit_code == 0, result.output
    core_part = result.output.split("\ningress ")[0]
    assert "  http filters:\n    1. envoy.filters.http.lua\n" in core_part
    assert core_part.index("http filters:") < core_part.index("resource caches:")


def test_plugins_list_does_not_import_disabled_plugins() -> None:
    code = (
        "import sys, json; from cpx.cli.plugins import describe_plugins;"
        "rows = describe_plugins([]);"
        "print(json.dumps({'loaded': 'cpx_ingress' in sys.modules, 'rows': rows}))"
    )
    out = json.loads(
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    )
    assert out["loaded"] is False
    ingress = next(r for r in out["rows"] if r["name"] == "ingress")
    assert ingress["enabled"] is False and "watches" not in ingress


def test_installed_example_plugin_is_discovered_and_runs(tmp_path: Path) -> None:
    """Install the example third-party plugin for real, then list and use it."""
    # Built from a copy: an in-tree build would leave egg-info where the test path finds it.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT / "examples" / "plugins" / "response-header", source, ignore=shutil.ignore_patterns("tests")
    )
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
    )
    env_code = f"import sys; sys.path.insert(0, {str(target)!r});from cpx.cli import main; main(sys.argv[1:])"
    listed = subprocess.run(
        [sys.executable, "-c", env_code, "plugins", "list", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["response-headers"]["distribution"] == "cpx-example-response-header"
    assert any("response-headers (phase policies)" in p for p in rows["response-headers"]["processors"])
    quickstart = ROOT / "examples" / "quickstart"
    host = "*"  # the quickstart's catch-all Ingress
    (tmp_path / "headers.yaml").write_text(
        "apiVersion: examples.cpx.dev/v1alpha1\nkind: ResponseHeaders\n"
        "metadata: {namespace: default, name: tag}\n"
        f"spec: {{host: '{host}', set: {{x-served-by: edge-7}}}}\n"
    )
    translated = subprocess.run(
        [sys.executable, "-c", env_code, "translate", "--plugins", "ingress,response-headers", "-o", "json",
         str(quickstart), str(tmp_path / "headers.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )  # fmt: skip
    doc = json.loads(translated.stdout)
    configs = [
        r.get("typedPerFilterConfig", {}).get("envoy.filters.http.header_mutation")
        for rc in doc["xds"]["routes"]
        for vh in rc.get("virtualHosts", [])
        if vh["name"] == host
        for r in vh.get("routes", [])
    ]
    assert configs and all(
        c["mutations"]["responseMutations"][0]["append"]["header"]
        == {"key": "x-served-by", "value": "edge-7"}
        for c in configs
    )


def test_option_spec_flag() -> None:
    assert OptionSpec(name="ingress_class_name", help="x").flag == "--ingress-class-name"


def test_available_plugins_reads_metadata() -> None:
    names = [p.name for p in available_plugins()]
    assert "core" in names and "ingress" in names
