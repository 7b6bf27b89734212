"""Contour's documentation examples, through cpx's translation: valid and served as documented.

``examples/`` holds every whole-object YAML example of Contour's configuration docs (vendored by
``vendor.py``).  The docs leave out what the examples refer to (Services, TLS Secrets, CA Secrets):
the test adds those, so that what is judged is the example itself.  Each HTTPProxy and Ingress must
be valid and reach Envoy, except:

* ``REFUSED``: examples that are themselves invalid (a typo, a field in the wrong place): cpx refuses
  them as Contour's API server or Contour does, and the test checks that it says why;
* ``NOT_YET``: examples of features cpx does not serve yet (strict xfail: one that starts passing
  must leave the list).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpx.testing import translate_yaml
from cpx.testing.tls import default_ca, make_ca_secret, make_crl, make_crl_secret, make_tls_secret
from cpx.xds.constraints.envoycheck import EnvoyValidator

EXAMPLES = Path(__file__).resolve().parent / "examples"

# example -> what cpx's refusal says (the docs' mistake in brackets).
REFUSED: dict[str, str] = {
    # [pathType Prefix without a path]
    "fundamentals-1": "spec.rules[0].http.paths[0].path",
    "virtual-hosts-1": "spec.rules[0].http.paths[0].path",
    # [a TCP proxy without TLS]
    "health-checks-3": "Spec.TCPProxy requires that either Spec.TLS.Passthrough or Spec.TLS.SecretName",
    # [fqdn outside virtualhost; requestHeaderPolicy outside a route / service]
    "request-rewriting-6": "spec.fqdn: unknown field",
    "request-rewriting-7": "spec.fqdn: unknown field",
    "request-rewriting-8": "spec.fqdn: unknown field",
    # [prameterName]
    "request-routing-13": "prameterName: unknown field",
    # [routes inside virtualhost]
    "request-routing-15": "spec.virtualhost.routes: unknown field",
}

# example -> cpx options it needs (what the docs configure in Contour's configuration file).
OPTIONS: dict[str, dict[str, Any]] = {
    "tls-termination-3": {"fallback_certificate": "www-admin/fallback-secret-name"},
}

# example -> the examples it needs (the docs show them one after the other).
COMPANIONS: dict[str, tuple[str, ...]] = {
    "tls-delegation-2": ("tls-delegation-1",),
    "tls-delegation-3": ("tls-delegation-1",),
}

# example -> the feature cpx does not serve yet.
NOT_YET: dict[str, str] = {}


def _services(obj: dict[str, Any]) -> Iterator[tuple[str, int | str]]:
    spec = obj.get("spec") or {}
    if obj["kind"] == "ExtensionService":
        for service in spec.get("services") or []:
            yield service["name"], service["port"]
        return
    if obj["kind"] == "Ingress":
        yield from _ingress_services(spec)
        return
    for route in spec.get("routes") or []:
        for service in route.get("services") or []:
            if "name" not in service:
                continue  # a misplaced field (the object is refused; the test checks the refusal)
            yield service["name"], service["port"]
            if "healthPort" in service:
                yield service["name"], service["healthPort"]
        for mirror in route.get("requestMirrorPolicy") or []:
            yield mirror["name"], mirror["port"]
    for service in (spec.get("tcpproxy") or {}).get("services") or []:
        yield service["name"], service["port"]


def _ingress_services(spec: dict[str, Any]) -> Iterator[tuple[str, int | str]]:
    backends = [spec.get("defaultBackend") or {}]
    for rule in spec.get("rules") or []:
        backends += [path["backend"] for path in (rule.get("http") or {}).get("paths") or []]
    for backend in backends:
        if "service" in backend:
            port = backend["service"]["port"]
            yield backend["service"]["name"], port.get("number", port.get("name"))


def _secret_refs(obj: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(namespace/name, kind "tls"|"ca"|"crl"|"jwks:<key>", host) of each Secret the object names."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "Ingress":
        annotations = obj["metadata"].get("annotations") or {}
        namespace = annotations.get("projectcontour.io/tls-cert-namespace")
        for tls in spec.get("tls") or []:
            name = f"{namespace}/{tls['secretName']}" if namespace else tls["secretName"]
            yield name, "tls", (tls.get("hosts") or ["example.com"])[0]
        return
    vhost = spec.get("virtualhost") or {}
    tls = vhost.get("tls") or {}
    fqdn = vhost.get("fqdn", "example.com")
    if "secretName" in tls:
        yield tls["secretName"], "tls", fqdn
    client = tls.get("clientValidation") or {}
    if "caSecret" in client:
        yield client["caSecret"], "ca", fqdn
    if "crlSecret" in client:
        yield client["crlSecret"], "crl", fqdn
    for provider in vhost.get("jwtProviders") or []:
        local = provider.get("localJWKS") or {}
        if "secretName" in local:
            yield local["secretName"], "jwks:" + local.get("key", "jwks.json"), fqdn
        if "caSecret" in ((provider.get("remoteJWKS") or {}).get("validation") or {}):
            yield provider["remoteJWKS"]["validation"]["caSecret"], "ca", fqdn
    for route in spec.get("routes") or []:
        for service in route.get("services") or []:
            if "caSecret" in (service.get("validation") or {}):
                yield service["validation"]["caSecret"], "ca", fqdn


def _support(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Services and Secrets the example refers to but does not define."""
    defined = {(o["kind"], o["metadata"].get("namespace", "default"), o["metadata"]["name"]) for o in objects}
    added: dict[tuple[str, str, str], dict[str, Any]] = {}
    for obj in objects:
        namespace = obj["metadata"].get("namespace", "default")
        if obj["kind"] in ("HTTPProxy", "Ingress", "ExtensionService"):
            for name, port in _services(obj):
                service = added.setdefault(("Service", namespace, name), _service(namespace, name))
                _add_port(service["spec"]["ports"], port)
            for ref, kind, host in _secret_refs(obj):
                secret_ns, _, secret_name = ref.rpartition("/")
                key = ("Secret", secret_ns or namespace, secret_name)
                if key not in defined and key not in added:
                    added[key] = _secret(kind, key[1], key[2], host)
    return [o for k, o in added.items() if k not in defined]


def _secret(kind: str, namespace: str, name: str, host: str) -> dict[str, Any]:
    if kind == "tls":
        return make_tls_secret(namespace, name, [host])[0]
    if kind == "crl":
        return make_crl_secret(namespace, name, make_crl(default_ca()))
    if kind.startswith("jwks:"):  # a key set with one symmetric key
        jwks = b'{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}'
        data = {kind.removeprefix("jwks:"): base64.b64encode(jwks).decode()}
        meta = {"namespace": namespace, "name": name}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data}
    return make_ca_secret(namespace, name)


def _add_port(ports: list[dict[str, Any]], port: int | str) -> None:
    if isinstance(port, str):  # a named port
        if all(p["name"] != port for p in ports):
            ports.append({"name": port, "port": 8000 + len(ports), "protocol": "TCP"})
    elif all(p["port"] != port for p in ports):
        ports.append({"name": f"p{port}", "port": port, "protocol": "TCP"})


def _service(namespace: str, name: str) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": name}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": []}}


def _objects(path: Path) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(path.read_text()) if o]


def _with_support(objects: list[dict[str, Any]], extra: Sequence[dict[str, Any]] = ()) -> str:
    return yaml.safe_dump_all([*objects, *_support(objects), *extra])


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", "default")


def _is_root(obj: dict[str, Any]) -> bool:
    return obj["kind"] == "Ingress" or bool((obj.get("spec") or {}).get("virtualhost"))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_contour_docs_example(path: Path, cpx_translate: Any, request: pytest.FixtureRequest) -> None:
    if path.stem in NOT_YET:
        request.applymarker(pytest.mark.xfail(reason=NOT_YET[path.stem], strict=True))
    objects = _objects(path)
    companions = [o for name in COMPANIONS.get(path.stem, ()) for o in _objects(EXAMPLES / f"{name}.yaml")]
    options = OPTIONS.get(path.stem, {})
    fallback = options.get("fallback_certificate")
    extra = []
    if fallback:  # the fallback certificate's Secret, which the docs create beforehand
        namespace, name = fallback.split("/")
        extra.append(make_tls_secret(namespace, name, ["fallback.example.com"])[0])
    result = cpx_translate(_with_support([*objects, *companions], extra), options=options)
    assert not result.unknown, f"kinds no enabled plugin serves: {result.unknown}"
    routing = [o for o in objects if o["kind"] in ("HTTPProxy", "Ingress")]
    if path.stem in REFUSED:
        said = json.dumps([result.status(*_key(o)) for o in routing])
        assert REFUSED[path.stem] in said, said
        return
    for obj in routing:
        status = result.status(*_key(obj))
        if obj["kind"] == "HTTPProxy":
            # A child without its root (in another example) is an orphan: valid otherwise.
            expected = "valid" if any(_is_root(o) for o in routing) else "orphaned"
            assert status["currentStatus"] == expected, (obj["metadata"]["name"], status)
        else:
            assert "cpx" not in status, (obj["metadata"]["name"], status)  # no problem noted
    for obj in objects:
        if obj["kind"] not in ("HTTPProxy", "Ingress", "Service", "Secret"):  # e.g. a delegation
            assert "cpx" not in result.status(*_key(obj)), obj["metadata"]["name"]
    if any(_is_root(o) for o in routing):
        assert result.envoy_json()["listeners"], "nothing reached Envoy"


@pytest.mark.e2e
def test_envoy_accepts_what_the_served_examples_become() -> None:
    served = [p for p in sorted(EXAMPLES.glob("*.yaml")) if p.stem not in REFUSED and p.stem not in NOT_YET]
    texts = [_with_support([o for o in yaml.safe_load_all(p.read_text()) if o]) for p in served]
    snapshots = [translate_yaml(text).snapshot for text in texts]
    verdicts = EnvoyValidator().check_batch(snapshots)  # `envoy --mode validate`, batched
    assert {p.stem: v for p, v in zip(served, verdicts, strict=True) if v is not None} == {}
