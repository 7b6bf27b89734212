"""Contour's default HTTP filters: the compressor (``--compression``), gRPC-Web and gRPC stats on
every connection manager, in Contour's order, as ``cpx translate`` emits them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cpx.builtin import filters
from cpx.cli import cli
from cpx.records import FilterSite
from cpx.testing.cpxproc import backend, write_manifest
from cpx.xds.envoy import filters as envoy
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.usefixtures("keep_logging")

COMPRESSOR = "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor"
SITE = FilterSite(listener="ingress_http", virtual_host=None, secure=False)


def _http_filters(tmp_path: Path, *flags: str) -> list[dict[str, Any]]:
    """The plain-HTTP connection manager's filters that ``cpx translate`` emits with ``flags``."""
    write_manifest(tmp_path, "all.yaml", [*backend("web", 8080), ingress("web", [("a.test", "/", "web")])])
    result = CliRunner().invoke(
        cli,
        ["translate", "--plugins", "ingress", "--route-shape", "single", *flags, "-o", "json", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    listeners = json.loads(result.stdout)["xds"]["listeners"]
    (http,) = [item for item in listeners if item["name"] == "ingress_http"]
    manager = http["filterChains"][0]["filters"][0]["typedConfig"]
    found: list[dict[str, Any]] = manager["httpFilters"]
    return found


@pytest.mark.parametrize("algorithm", ["gzip", "brotli", "zstd"])
def test_each_algorithm_names_its_library(algorithm: str) -> None:
    message = envoy.compressor_filter(algorithm)
    assert message is not None and message.compressor_library.name == algorithm
    assert algorithm in message.compressor_library.typed_config.type_url.lower()
    assert "application/grpc-web+proto" in message.response_direction_config.common_config.content_type
    # One message per algorithm: every connection manager shares its serialisation.
    assert envoy.compressor_filter(algorithm) is message


def test_disabled_leaves_the_compressor_off_every_chain_but_keeps_it_contributed() -> None:
    specs = {spec.name: spec for spec in filters.http_filters("disabled")}
    assert specs[envoy.COMPRESSOR_FILTER].config(SITE) is None
    assert specs[envoy.GRPC_WEB_FILTER].config(SITE) is not None


def test_translate_emits_contours_default_filters_in_order_gzip_by_default(tmp_path: Path) -> None:
    found = _http_filters(tmp_path)
    assert [f["name"] for f in found][:4] == [
        envoy.COMPRESSOR_FILTER,
        envoy.GRPC_WEB_FILTER,
        envoy.GRPC_STATS_FILTER,
        envoy.CORS_FILTER,
    ]
    assert found[0]["typedConfig"]["@type"] == COMPRESSOR
    assert found[0]["typedConfig"]["compressorLibrary"]["name"] == "gzip"
    assert found[2]["typedConfig"] == {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig",
        "emitFilterState": True,
        "enableUpstreamStats": True,
    }


def test_compression_flag_chooses_the_library_or_removes_the_filter(tmp_path: Path) -> None:
    brotli = _http_filters(tmp_path, "--compression", "brotli")
    assert brotli[0]["typedConfig"]["compressorLibrary"]["name"] == "brotli"
    disabled = _http_filters(tmp_path, "--compression", "disabled")
    assert envoy.COMPRESSOR_FILTER not in [f["name"] for f in disabled]
    assert disabled[0]["name"] == envoy.GRPC_WEB_FILTER


def test_an_unknown_algorithm_refuses_to_start(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["translate", "--plugins", "ingress", "--compression", "lzma", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert "--compression: 'lzma' is not one of gzip, brotli, zstd, disabled" in result.output
