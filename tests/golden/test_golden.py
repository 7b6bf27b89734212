"""Golden ``cpx translate`` outputs: the examples, the object sets the unit tests build from
(``corpus/fixture-*.yaml``, captured once from the processors' and caches' tests), the manifests
the end-to-end tests serve (``corpus/e2e-*.yaml``) and a fixed
corpus of generated objects (``corpus/fuzz-*.yaml``).

The outputs pin translation byte for byte (status timestamps aside), so that a refactoring that
claims to change no behaviour can prove it.  They are Contour's route shape (``--route-shape
single``); the default scoped shape is checked against them: the same virtual hosts, each exact
host moved into a RouteConfiguration of its own behind a scope, everything else identical.
Regenerate them only for an intended change::

    python tests/golden/test_golden.py --update          # rewrite expected/ from the current code
    python tests/golden/test_golden.py --new-corpus      # draw a new corpus (then --update)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cpx.cli import cli

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"
EXPECTED = HERE / "expected"
PLUGINS = "ingress,httpproxy"
EXAMPLES = ("examples/httpproxy", "examples/ingress", "examples/quickstart")
MAX_CASE_BYTES = 40_000
_TIMESTAMP = re.compile(r'"lastTransitionTime": "[^"]*"')


def cases() -> dict[str, list[Path]]:
    """Case name -> the manifest paths translated together."""
    out = {Path(e).name: [ROOT / e] for e in EXAMPLES}
    for path in sorted(CORPUS.glob("*.yaml")):
        out[path.stem] = [path]
    return out


def translate(paths: list[Path], shape: str = "single") -> str:
    # The cli group configures logging for the runner's stderr; keep it out of the output.
    args = ["translate", "--plugins", PLUGINS, "--route-shape", shape, "-o", "json", *map(str, paths)]
    result = CliRunner().invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    # Error messages name the manifest files: show them relative to the repository.
    text = result.stdout.replace(str(ROOT) + "/", "")
    return _TIMESTAMP.sub('"lastTransitionTime": "-"', text)


def new_corpus(count: int = 60) -> None:
    import yaml
    from hypothesis import HealthCheck, given, settings

    from cpx.plugins import PluginHost
    from cpx.testing import strategies

    kinds = strategies.kind_strategies(PluginHost.load(PLUGINS.split(",")))
    drawn: list[list[object]] = []

    @settings(max_examples=count, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(strategies.object_sets(kinds, max_size=12, confused=0.1))
    def collect(objects: list[object]) -> None:
        drawn.append(objects)

    collect()
    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.glob("fuzz-*.yaml"):
        old.unlink()
    number = 0
    for objects in drawn:
        try:  # some generated objects nest deeper than PyYAML can write
            text = yaml.safe_dump_all(json.loads(json.dumps(objects, default=str)), sort_keys=True)
        except (RecursionError, ValueError):
            continue
        if len(text) > MAX_CASE_BYTES:  # keep the corpus small enough to read
            continue
        (CORPUS / f"fuzz-{number:02d}.yaml").write_text(text)
        number += 1


def update() -> None:
    EXPECTED.mkdir(exist_ok=True)
    for old in EXPECTED.glob("*.json"):
        old.unlink()
    for name, paths in cases().items():
        (EXPECTED / f"{name}.json").write_text(translate(paths))


# -- the tests ----------------------------------------------------------------------------------

CASES = cases()


def test_every_case_has_an_expected_output() -> None:
    assert sorted(p.stem for p in EXPECTED.glob("*.json")) == sorted(CASES)
    assert len(CASES) > 20


@pytest.mark.usefixtures("keep_logging")
@pytest.mark.parametrize("name", sorted(CASES))
def test_translate_output_unchanged(name: str) -> None:
    expected = (EXPECTED / f"{name}.json").read_text()
    assert translate(CASES[name]) == expected


@pytest.mark.usefixtures("keep_logging")
@pytest.mark.parametrize("name", sorted(CASES))
def test_scoped_shape_holds_the_same_virtual_hosts(name: str) -> None:
    single = json.loads((EXPECTED / f"{name}.json").read_text())
    scoped = json.loads(translate(CASES[name], "scoped"))
    assert scoped["objects"] == single["objects"]
    assert scoped["errors"] == single["errors"]
    for kind in ("clusters", "endpoints", "secrets"):
        assert scoped["xds"][kind] == single["xds"][kind], kind
    assert _split(single["xds"]["routes"], scoped=False) == _split(scoped["xds"]["routes"], scoped=True)
    # One scope per exact host of each scoped listener, and one for its wildcard and default hosts.
    routes = {r["name"] for r in scoped["xds"]["routes"]}
    scopes = scoped["xds"]["scoped-routes"]
    keys = sorted(s["key"]["fragments"][0]["stringKey"] for s in scopes)
    assert len(keys) == len(set(keys))
    assert {s["routeConfigurationName"] for s in scopes} <= routes
    plain = sorted(
        r["name"] for r in scoped["xds"]["routes"] if not r["name"].startswith(("https/", "ingress_fallback"))
    )
    assert sorted(s["routeConfigurationName"] for s in scopes) == plain
    for listener in scoped["xds"]["listeners"]:
        for chain in listener.get("filterChains", ()):
            manager = chain["filters"][0].get("typedConfig", {})
            if "scopedRoutes" in manager:
                assert [f["name"] for f in manager["httpFilters"][:2]] == [
                    "cpx.route_scope",
                    "cpx.upgrade_guard",
                ]


def _split(configs: list[dict[str, Any]], *, scoped: bool) -> dict[str, Any]:
    """Per listener: its plain virtual hosts (without the scope selector's markers), and every
    other RouteConfiguration as it is."""
    plain: dict[str, list[Any]] = {}
    other: dict[str, Any] = {}
    for config in configs:
        name = config["name"]
        if name.startswith(("https/", "ingress_fallbackcert")):
            other[name] = config
            continue
        for found in config.get("virtualHosts", ()):
            vhost = dict(found)
            if scoped:
                vhost.pop("metadata", None)
                vhost["routes"] = [_unmarked(r) for r in vhost.get("routes", ())]
            plain.setdefault(name.split("/")[0], []).append(vhost)
    return {"plain": {k: sorted(v, key=lambda vh: vh["name"]) for k, v in plain.items()}, "other": other}


def _unmarked(route: dict[str, Any]) -> dict[str, Any]:
    route = dict(route)
    metadata = route.pop("metadata", {})
    assert set(metadata.get("filterMetadata", {})) <= {"cpx.upgrade_guard"}, metadata
    return route


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--new-corpus", action="store_true")
    args = parser.parse_args()
    if args.new_corpus:
        new_corpus()
    if args.update:
        update()
