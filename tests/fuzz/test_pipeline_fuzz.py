"""CI-sized fuzzing: generated objects never make the pipeline or ``cpx translate`` raise.

The strategies are :mod:`cpx.testing.strategies` (every enabled plugin's kinds); the long run is
``tests/fuzz/run.py``.  Each property is bounded in examples and time so that the file stays
well under a minute on a small machine.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings

from cpx.cli import cli
from cpx.plugins import PluginHost
from cpx.testing import strategies
from cpx.testing.fuzz import run_case
from cpx.xds import resource

# Hypothesis warns when a generated example (a 20,000-item list, say) makes a long repr: that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
HOST = PluginHost.load(["ingress", "httpproxy", "gatewayapi", "extsvc", "tlsdelegation"])
ALL_KINDS = strategies.kind_strategies(HOST)
# The kinds that publish something themselves: a policy kind (delegations) would only dilute the
# draws test_generated_objects_really_translate counts.
KINDS = [k for k in ALL_KINDS if k.gvk.kind != "TLSCertificateDelegation"]
FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True
)


def test_every_kind_has_a_strategy() -> None:
    assert {k.gvk.kind for k in ALL_KINDS} == {
        "Service",
        "EndpointSlice",
        "Secret",
        "Namespace",
        "Ingress",
        "HTTPProxy",
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "ReferenceGrant",
        "BackendTLSPolicy",
        "ExtensionService",
        "ConfigMap",
        "TLSCertificateDelegation",
    }


@FUZZ
@given(strategies.object_sets(ALL_KINDS))
def test_the_pipeline_never_raises(objects: list[dict[str, Any]]) -> None:
    snapshots = run_case(HOST, objects)
    assert len(snapshots) == 2
    assert all(resource.LISTENER in s.types for s in snapshots)


@FUZZ
@given(strategies.object_sets(ALL_KINDS, confused=1.0, max_size=4))
def test_type_confused_objects_never_raise(objects: list[dict[str, Any]]) -> None:
    run_case(HOST, objects)


@settings(FUZZ, max_examples=40)
@given(strategies.any_object(ALL_KINDS, confused=1.0))
def test_schema_checks_answer_every_value_with_a_list_of_strings(obj: dict[str, Any]) -> None:
    for watch in HOST.watches():
        if watch.validate is not None:
            problems = watch.validate(obj)
            assert all(isinstance(p, str) and "\n" not in p and len(p) < 1000 for p in problems)
            assert len(problems) <= 20


def test_generated_objects_really_translate() -> None:
    """The strategies are productive: most cases publish routes and clusters, some secrets."""
    seen = {"routes": 0, "clusters": 0, "secrets": 0}

    @settings(FUZZ, max_examples=60)
    @given(strategies.object_sets(KINDS, confused=0.0))
    def count(objects: list[dict[str, Any]]) -> None:
        published = run_case(HOST, objects)[0].to_json()
        for kind in seen:
            seen[kind] += bool(published.get(kind))

    count()
    assert seen["routes"] >= 20 and seen["clusters"] >= 15 and seen["secrets"] >= 1, seen


@pytest.fixture
def _keep_logging() -> Iterator[None]:
    # The cli group configures the root logger for the CliRunner's (soon closed) stderr.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _as_json(obj: Any) -> str | None:
    """The object as a manifest file holds it (None: not writable as JSON, e.g. a 5000-digit int)."""
    try:
        return json.dumps(obj, default=str, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


@pytest.mark.usefixtures("_keep_logging")
@settings(FUZZ, max_examples=4, phases=[Phase.explicit, Phase.generate])
@given(objects=strategies.object_sets(ALL_KINDS, confused=0.5))
def test_translate_prints_no_traceback(tmp_path_factory: pytest.TempPathFactory, objects: list[Any]) -> None:
    folder: Path = tmp_path_factory.mktemp("manifests")
    for i, obj in enumerate(objects):
        text = _as_json(obj)
        if text is not None:
            # A lone surrogate is JSON but not UTF-8 (nor YAML): written as "?".
            (folder / f"{i}.json").write_bytes(text.encode(errors="replace"))
    result = CliRunner().invoke(
        cli, ["translate", "--plugins", "ingress,httpproxy", str(folder), "-o", "json"]
    )
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 0:
        assert json.loads(result.stdout)["objects"]
    else:  # e.g. a control character YAML refuses: the file is refused, with its name
        assert result.exit_code == 1 and "malformed YAML" in result.output, result.output


@pytest.mark.usefixtures("_keep_logging")
@pytest.mark.parametrize("scalar", ["1" + "0" * 5000, "2024-02-30"])
def test_a_scalar_yaml_cannot_construct_is_a_malformed_file(tmp_path: Path, scalar: str) -> None:
    manifest = f"apiVersion: v1\nkind: Service\nmetadata: {{name: x}}\nspec: {{a: {scalar}}}\n"
    (tmp_path / "bad.yaml").write_text(manifest)
    result = CliRunner().invoke(cli, ["translate", "--plugins", "ingress", str(tmp_path)])
    assert result.exit_code == 1
    assert "malformed YAML" in result.output and "Traceback" not in result.output
