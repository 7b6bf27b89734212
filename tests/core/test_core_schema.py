from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cpx.builtin.schema import validate_endpoint_slice, validate_secret, validate_service
from cpx.builtin.typecheck import too_deep
from cpx.config import Config
from cpx.objects import ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler


def _service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": spec}


def test_service_schema() -> None:
    assert validate_service(_service(ports=[{"name": "http", "port": 80}])) == []
    assert validate_service(_service(ports=[{"port": 0}, {"port": 80, "name": "Bad_Name"}])) == [
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535",
        "spec.ports[0].name: Required value: when more than one port is defined",
        'spec.ports[1].name: Invalid value: "Bad_Name": must be a DNS-1123 label',
    ]
    assert validate_service(_service(type="ExternalName")) == ["spec.externalName: Required value"]
    assert validate_service(_service(type="Nope", ports=[])) == [
        'spec.type: Unsupported value: "Nope": '
        "supported values: ClusterIP, NodePort, LoadBalancer, ExternalName"
    ]
    assert validate_service({"kind": "Service"}) == ["spec: Required value"]


def test_endpoint_slice_schema() -> None:
    good = {
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    }
    assert validate_endpoint_slice(good) == []
    bad = {"addressType": "IP", "ports": [{"port": 70000}], "endpoints": [{"addresses": []}]}
    assert validate_endpoint_slice(bad) == [
        'addressType: Unsupported value: "IP": supported values: IPv4, IPv6, FQDN',
        "ports[0].port: Invalid value: 70000: must be between 1 and 65535",
        "endpoints[0].addresses: Required value: must contain at least 1 address",
    ]


def test_secret_schema() -> None:
    assert validate_secret({"data": {"tls.crt": "aGVsbG8="}}) == []
    assert validate_secret({"data": {"tls.crt": "not base64!"}}) == [
        "data[tls.crt]: Invalid value: illegal base64 data"
    ]


def test_refused_core_objects_are_reported_and_not_served() -> None:
    pipeline = SnapshotHandler.create(PluginHost.load([]), Config())
    bad = _service(ports=[{"port": 0}])
    # A new refusal asks for a rebuild, after which its status is reported; the same one again does not.
    assert pipeline.upsert(bad, validate=True) is True
    assert pipeline.upsert(bad, validate=True) is False
    assert pipeline.source.get(ObjectKey.of(bad)) is None
    pipeline.rebuild()
    status = pipeline.statuses()[ObjectKey.of(bad)]
    assert [n.message for n in status.notes] == [
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535"
    ]
    # Fixing it replaces the refusal (and asks for a rebuild even though no route uses the Service).
    assert pipeline.upsert(_service(ports=[{"port": 80}]), validate=True) is True
    pipeline.rebuild()
    assert ObjectKey.of(bad) not in pipeline.statuses()
    # So does deleting a refused object: its status entry must go.
    pipeline.upsert(bad, validate=True)
    assert pipeline.delete(bad) is True


def _slice(**fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "s-1"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        **fields,
    }


def test_type_confusion_is_answered_not_raised() -> None:
    assert validate_endpoint_slice(_slice(endpoints=7)) == ["endpoints: Invalid value: 7: must be a list"]
    assert validate_endpoint_slice(_slice(endpoints=[{"addresses": ["10.0.0.1"], "conditions": "7"}])) == [
        'endpoints[0].conditions: Invalid value: "7": must be an object'
    ]
    assert validate_service(_service(ports=[{"name": {"a": 1}, "port": 80}])) == [
        'spec.ports[0].name: Invalid value: "object": must be a string'
    ]
    labelled = {**_service(ports=[{"port": 80}]), "metadata": {"name": "s", "labels": "x"}}
    assert validate_service(labelled) == ['metadata.labels: Invalid value: "x": must be an object']
    assert validate_secret({"metadata": {"name": "s"}, "data": {"a": 10**5000}}) == [
        'data[a]: Invalid value: "huge integer": must be a string'
    ]
    assert validate_secret({"metadata": {"annotations": {1: "x"}}}) == [
        "metadata.annotations: Invalid value: 1: keys must be strings"
    ]
    odd: Any
    for odd in (None, 7, "x", [], {"spec": []}, {"metadata": "x"}):
        assert validate_service(odd)


def test_values_in_messages_are_escaped_and_bounded() -> None:
    (problem,) = validate_service(_service(type="a\r\nb" + "x" * 1000, ports=[]))
    assert "\n" not in problem and len(problem) < 200


def test_deep_nesting_and_problem_floods_are_bounded() -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    (problem,) = validate_service(_service(ports=[{"port": 80}], unknown=deep))
    assert problem.startswith("spec.unknown.a.a.") and problem.endswith("nested more than 64 levels deep")
    problems = validate_endpoint_slice(_slice(endpoints=list(range(100_000))))
    assert len(problems) == 20 and problems[-1] == "... and 99981 more problems"


def test_endpoint_addresses_match_the_address_type() -> None:
    bad = _slice(endpoints=[{"addresses": ["999.1.1.1", "", "::1", "10.0.0.1"]}])
    assert validate_endpoint_slice(bad) == [
        'endpoints[0].addresses[0]: Invalid value: "999.1.1.1": must be a valid IPv4 address',
        'endpoints[0].addresses[1]: Invalid value: "": must be a valid IPv4 address',
        'endpoints[0].addresses[2]: Invalid value: "::1": must be a valid IPv4 address',
    ]
    assert validate_endpoint_slice(_slice(addressType="IPv6", endpoints=[{"addresses": ["::1"]}])) == []
    assert validate_endpoint_slice(_slice(addressType="FQDN", endpoints=[{"addresses": ["a.example"]}])) == []


def test_too_deep_names_the_first_element_past_the_limit() -> None:
    """Lists and maps count as levels, scalars as the level below their container; the path is that of
    the first element found past the limit (the walk takes the last element of a container first)."""
    value = {"a": [1, {"b": {}}], "c": {"d": "x", "e.f": [True, ["y"]]}}
    assert too_deep(value, 3) == "c.e.f[1][0]"
    assert too_deep(value, 2) == "c.e.f[1]"
    assert too_deep(value, 4) is None
    assert too_deep({"a": [1, {"b": {}}]}, 2) == "a[1].b"
    assert too_deep({"a": [1, {"b": {}}]}, 3) is None
    assert too_deep("scalar", 0) is None


def _depth(value: Any) -> int:
    """Levels of non-empty lists and maps, the outermost counting one."""
    if isinstance(value, dict | list) and value:
        return 1 + max(_depth(v) for v in (value.values() if isinstance(value, dict) else value))
    return 0


class _Map(dict[str, Any]):
    """A Mapping of another type than dict: the exact walk answers for it."""


json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=2).map(_Map)
    ),
    max_leaves=25,
)


@given(json_trees, st.integers(min_value=0, max_value=6))
def test_too_deep_exactly_when_nested_past_the_limit(value: Any, limit: int) -> None:
    found = too_deep(value, limit)
    assert (found is not None) == (_depth(value) > limit)
