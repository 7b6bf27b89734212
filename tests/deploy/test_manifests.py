"""The Kubernetes install (``kubectl apply -f deploy/``), checked without a cluster.

* every document is a known Kubernetes kind whose fields exist in the API (the ``kubernetes``
  client's OpenAPI models: unknown fields, wrong types, missing required fields);
* every ``cpx`` command line in a container parses with cpx's real CLI (plugin options included),
  every file it names is in a volume mounted into that container, and Envoy's bootstrap is written
  where Envoy reads it;
* RBAC grants exactly what the installed plugins need: read on every watched kind, write on the
  status of every kind whose status cpx writes, and the leader-election Lease;
* ``01-crds.yaml`` is what ``deploy/generate.py`` makes of the plugins' CRDs, and covers every
  custom kind watched;
* the certgen Job's script creates the Secrets the workloads mount, and keeps existing ones.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import kubernetes
import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509

from cpx.cli import cli
from cpx.ops import certgen
from cpx.plugins import PluginHost
from cpx.status.leader import LEASE
from cpx.xds.envoy.bootstrap import XDS_SERVER_SAN

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "projectcontour"
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
WORKLOADS = {"Deployment", "DaemonSet", "Job"}
READ = {"get", "list", "watch"}
# cpx.status.updater GETs the object (a read above) and merge-PATCHes its status subresource.
STATUS_WRITE = {"patch", "update"}
# cpx.status.leader GETs, creates (POST) and renews (merge PATCH) its Lease.
LEASE_VERBS = {"create", "get", "patch", "update"}


# -- loading ---------------------------------------------------------------------------------------


def manifest_files() -> list[Path]:
    return sorted(DEPLOY.glob("*.yaml"))


def _load() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in manifest_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


DOCS = _load()


def _id(item: tuple[str, dict[str, Any]]) -> str:
    name, doc = item
    return f"{name}:{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def objects(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCS if doc.get("kind") == kind]


def the(kind: str, name: str) -> dict[str, Any]:
    found = [doc for doc in objects(kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def container(workload: Mapping[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in containers(workload) if c["name"] == name]
    return found


def cpx_image() -> str:
    image: str = container(the("Deployment", "cpx"), "cpx")["image"]
    return image


def generate_module() -> Any:
    spec = importlib.util.spec_from_file_location("cpx_deploy_generate", DEPLOY / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- files -----------------------------------------------------------------------------------------


def test_files_are_numbered_and_apply_in_order() -> None:
    names = [p.name for p in manifest_files()]
    assert names, "no manifests in deploy/"
    assert all(re.fullmatch(r"\d\d-[a-z0-9-]+\.yaml", n) for n in names), names
    assert names[0] == "00-namespace.yaml"
    first: dict[str, int] = {}
    for index, (_, doc) in enumerate(DOCS):
        first.setdefault(doc["kind"], index)
    # Namespace, then CRDs, then RBAC, then what uses them.
    assert first["Namespace"] == 0
    assert first["CustomResourceDefinition"] < first["ServiceAccount"]
    assert max(first["ServiceAccount"], first["ClusterRole"]) < min(first[k] for k in WORKLOADS)


def test_no_file_names_a_path_of_the_build_machine() -> None:
    for path in [*manifest_files(), DEPLOY / "Dockerfile", DEPLOY / "generate.py"]:
        text = path.read_text()
        # The folder this checkout lives in, and the usual home folders, must never be named.
        assert str(ROOT.parent) + "/" not in text, path.name
        assert "/home/" not in text and "/Users/" not in text, path.name


# -- Kubernetes schema -----------------------------------------------------------------------------


def _model(api_version: str, kind: str) -> str:
    version = api_version.rsplit("/", 1)[-1]
    return version[0].upper() + version[1:] + kind


def _unwrap(type_name: str) -> str:
    m = re.fullmatch(r"Optional\[(.*)\]", type_name)
    return m.group(1) if m else type_name


def _schema_errors(value: Any, type_name: str, where: str) -> Iterator[str]:  # noqa: C901  (why: one branch per OpenAPI schema keyword)
    """Walk ``value`` against the client's OpenAPI model ``type_name``: unknown fields, wrong types."""
    type_name = _unwrap(type_name)
    if m := re.fullmatch(r"(?:List\[|list\[)(.*)\]", type_name):
        if not isinstance(value, list):
            yield f"{where}: expected a list, got {value!r}"
            return
        for i, item in enumerate(value):
            yield from _schema_errors(item, m.group(1), f"{where}[{i}]")
        return
    if m := re.fullmatch(r"(?:Dict\[|dict\()str, (.*)[\])]", type_name):
        if not isinstance(value, dict):
            yield f"{where}: expected a map, got {value!r}"
            return
        for key, item in value.items():
            yield from _schema_errors(item, m.group(1), f"{where}.{key}")
        return
    leaves: dict[str, tuple[type, ...]] = {
        "str": (str,),
        "int": (int,),
        "bool": (bool,),
        "float": (int, float),
        "datetime": (str,),
        "date": (str,),
    }
    if type_name == "object":
        return
    if type_name in leaves:
        ok = isinstance(value, leaves[type_name]) and not (type_name == "int" and isinstance(value, bool))
        if not ok:
            yield f"{where}: expected {type_name}, got {value!r}"
        return
    model = getattr(kubernetes.client, type_name)
    if not isinstance(value, dict):
        yield f"{where}: expected a {type_name} object, got {value!r}"
        return
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json:
            yield f"{where}: unknown field {key!r} in {type_name}"
            continue
        yield from _schema_errors(item, model.openapi_types[by_json[key]], f"{where}.{key}")


def _deserialize(doc: Mapping[str, Any], model: str) -> Any:
    """The client's own deserialisation: raises ValueError when a required field is missing."""
    # kubernetes>=37 (pyproject.toml): deserialize takes the response text and content type.
    return kubernetes.client.ApiClient().deserialize(json.dumps(doc), model, "application/json")


@pytest.mark.parametrize("item", DOCS, ids=_id)
def test_document_matches_the_kubernetes_api(item: tuple[str, dict[str, Any]]) -> None:
    _, doc = item
    model = _model(doc["apiVersion"], doc["kind"])
    assert hasattr(kubernetes.client, model), f"unknown kind {doc['apiVersion']} {doc['kind']}"
    errors = list(_schema_errors(doc, model, doc["kind"]))
    assert not errors, "\n".join(errors)
    _deserialize(doc, model)  # required fields
    meta = doc["metadata"]
    assert meta.get("name")
    if doc["kind"] in CLUSTER_SCOPED:
        assert "namespace" not in meta
    else:
        assert meta.get("namespace") == NAMESPACE


def test_the_schema_check_catches_mistakes() -> None:
    deployment = the("Deployment", "cpx")
    broken = json.loads(json.dumps(deployment))
    pod_spec(broken)["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    pod_spec(broken)["containers"][0]["readinesProbe"] = {}
    pod_spec(broken)["containers"][0]["ports"][0]["containerPort"] = "8001"
    errors = list(_schema_errors(broken, "V1Deployment", "Deployment"))
    assert any("unknown field 'readinesProbe'" in e for e in errors), errors
    assert any("containerPort: expected int" in e for e in errors), errors
    del pod_spec(broken)["containers"][0]["name"]
    with pytest.raises(ValueError):
        _deserialize(broken, "V1Deployment")


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_workloads_select_their_own_pods(kind: str) -> None:
    for workload in objects(kind):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        selector = workload["spec"].get("selector", {}).get("matchLabels", {})
        assert selector.items() <= labels.items()
        spec = pod_spec(workload)
        service_accounts = {sa["metadata"]["name"] for sa in objects("ServiceAccount")}
        assert spec["serviceAccountName"] in service_accounts
        mounts = {m["name"] for c in containers(workload) for m in c.get("volumeMounts", [])}
        assert mounts == {v["name"] for v in spec.get("volumes", [])}


def test_services_reach_container_ports() -> None:
    workloads = [w for k in WORKLOADS for w in objects(k)]
    for service in objects("Service"):
        selector = service["spec"]["selector"]
        matched = [
            w for w in workloads if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matched) == 1, service["metadata"]["name"]
        ports = {p["containerPort"] for c in containers(matched[0]) for p in c.get("ports", [])}
        names = {p["name"] for c in containers(matched[0]) for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports | names, (service["metadata"]["name"], port)


def test_pods_run_unprivileged() -> None:
    for kind in sorted(WORKLOADS):
        for workload in objects(kind):
            assert pod_spec(workload)["securityContext"]["runAsNonRoot"] is True
            for c in containers(workload):
                context = c["securityContext"]
                assert context["allowPrivilegeEscalation"] is False
                assert context["capabilities"]["drop"] == ["ALL"]
                assert c["resources"]["requests"]
                if c["image"] == cpx_image():
                    assert context["readOnlyRootFilesystem"] is True
                    assert c["imagePullPolicy"] == "IfNotPresent"


# -- cpx command lines -----------------------------------------------------------------------------


def _secret_files(secret_name: str) -> dict[str, bytes]:
    """The files a certgen Secret holds (its keys), with real certificates in them."""
    (secret,) = [
        s
        for s in certgen.kubernetes_secrets(_bundle(), namespace=NAMESPACE)
        if s["metadata"]["name"] == secret_name
    ]
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


_BUNDLE: list[certgen.Bundle] = []


def _bundle() -> certgen.Bundle:
    if not _BUNDLE:
        _BUNDLE.append(certgen.generate_bundle(namespace=NAMESPACE))
    return _BUNDLE[0]


class Filesystem:
    """A container's volume mounts laid out under ``root``: Secret keys become files."""

    def __init__(self, root: Path, workload: Mapping[str, Any], ctr: Mapping[str, Any]) -> None:
        self.root = root
        volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
        self.mounts: dict[str, dict[str, Any]] = {}
        for mount in ctr.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            self.mounts[mount["mountPath"]] = volume
            target = self.path(mount["mountPath"])
            target.mkdir(parents=True, exist_ok=True)
            if "secret" in volume:
                for key, data in _secret_files(volume["secret"]["secretName"]).items():
                    (target / key).write_bytes(data)

    def path(self, container_path: str) -> Path:
        return self.root / container_path.lstrip("/")

    def volume_of(self, container_path: str) -> dict[str, Any]:
        for mount_path, volume in self.mounts.items():
            if container_path.startswith(mount_path.rstrip("/") + "/"):
                return volume
        raise AssertionError(f"{container_path} is in no volume mounted into the container")

    def rewrite(self, arg: str) -> str:
        """Container paths → paths under ``root`` (so that click's exists-checks see the volumes)."""
        if arg.startswith("/") and any(arg.startswith(m.rstrip("/") + "/") for m in self.mounts):
            return str(self.path(arg))
        return arg


def _expand_env(ctr: Mapping[str, Any], args: list[str]) -> list[str]:
    """Kubernetes' ``$(VAR)`` expansion: every variable must be defined in the container."""
    env = {e["name"] for e in ctr.get("env", [])}
    for arg in args:
        for name in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            assert name in env, f"{ctr['name']}: $({name}) is not defined"
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", r"value-of-\1", a) for a in args]


def cpx_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container running the ``cpx`` entrypoint."""
    out = []
    for kind in sorted(WORKLOADS):
        for workload in objects(kind):
            for c in containers(workload):
                if c["image"] == cpx_image() and "command" not in c:
                    out.append((workload, c))
    return out


def parse(
    tmp_path: Path, workload: Mapping[str, Any], ctr: Mapping[str, Any]
) -> tuple[click.Context, Filesystem]:
    """Parse a container's arguments with cpx's real CLI, its volumes laid out under tmp_path."""
    fs = Filesystem(tmp_path / ctr["name"], workload, ctr)
    args = _expand_env(ctr, list(ctr["args"]))
    assert all(isinstance(a, str) for a in args)
    assert args[0] in cli.commands, f"cpx has no command {args[0]!r}"
    command = cli.commands[args[0]]
    for arg in args:
        if arg.startswith("/"):
            fs.volume_of(arg)
    try:
        ctx = command.make_context(f"cpx {args[0]}", [fs.rewrite(a) for a in args[1:]])
    except click.ClickException as err:
        pytest.fail(f"{ctr['name']}: cpx {' '.join(args)}: {err.format_message()}")
    return ctx, fs


def option(ctx: click.Context, flag: str) -> Any:
    """The value of the option spelled ``flag`` (looked up by flag: names may change)."""
    command = ctx.command
    found = [p for p in command.params if flag in getattr(p, "opts", ())]
    assert found, f"cpx {command.name} has no option {flag}"
    return ctx.params[found[0].name]


def default(command_name: str, flag: str) -> Any:
    command = cli.commands[command_name]
    command.make_context(command_name, [], resilient_parsing=True)  # adds plugin options
    found = [p for p in command.params if flag in getattr(p, "opts", ())]
    assert found, f"cpx {command_name} has no option {flag}"
    return found[0].default


def test_there_are_cpx_command_lines() -> None:
    names = {(w["kind"], w["metadata"]["name"], c["name"]) for w, c in cpx_containers()}
    assert names == {("Deployment", "cpx", "cpx"), ("DaemonSet", "envoy", "bootstrap")}


@pytest.mark.parametrize(
    "item", cpx_containers(), ids=lambda wc: f"{wc[0]['metadata']['name']}/{wc[1]['name']}"
)
def test_cpx_arguments_parse(item: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    workload, ctr = item
    parse(tmp_path, workload, ctr)


def test_cpx_serves_in_cluster_over_mtls(tmp_path: Path) -> None:
    deployment = the("Deployment", "cpx")
    assert deployment["spec"]["replicas"] == 2
    ctr = container(deployment, "cpx")
    ctx, fs = parse(tmp_path, deployment, ctr)
    assert option(ctx, "--incluster") is True
    assert option(ctx, "--xds-address") == "0.0.0.0"
    assert option(ctx, "--http-address") == "0.0.0.0"
    args = ctr["args"]
    for flag in ("--xds-cafile", "--xds-cert-file", "--xds-key-file"):
        path = args[args.index(flag) + 1]
        assert option(ctx, flag) == str(fs.path(path))
        assert fs.volume_of(path)["secret"]["secretName"] == certgen.CPX_SECRET
    xds_port, http_port = option(ctx, "--xds-port"), option(ctx, "--http-port")
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert ports == {"xds": xds_port, "metrics": http_port}
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": http_port}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": http_port}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(http_port)
    assert annotations["prometheus.io/path"] == "/metrics"
    service = the("Service", "cpx")
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(xds_port, xds_port)]


def _written_bootstrap(tmp_path: Path) -> tuple[dict[str, Any], Filesystem, Filesystem]:
    """Run the init container's command, and find what it wrote where Envoy reads it: the
    bootstrap, and the init and envoy containers' filesystems."""
    daemonset = the("DaemonSet", "envoy")
    init = container(daemonset, "bootstrap")
    _, fs = parse(tmp_path, daemonset, init)
    # (The command itself, not the group: the group's callback would reconfigure logging.)
    args = [fs.rewrite(a) for a in _expand_env(init, init["args"])]
    result = CliRunner().invoke(cli.commands[args[0]], args[1:])
    assert result.exit_code == 0, result.output
    output = init["args"][1]
    assert "emptyDir" in fs.volume_of(output)
    envoy = container(daemonset, "envoy")
    assert envoy["args"][envoy["args"].index("-c") + 1] == output
    envoy_fs = Filesystem(tmp_path / "envoy", daemonset, envoy)
    assert envoy_fs.volume_of(output) is fs.volume_of(output)
    return json.loads(fs.path(output).read_text()), fs, envoy_fs


def test_envoy_bootstrap_points_at_the_cpx_service(tmp_path: Path) -> None:
    daemonset = the("DaemonSet", "envoy")
    ctx, _ = parse(tmp_path / "parsed", daemonset, container(daemonset, "bootstrap"))
    service = the("Service", "cpx")
    assert option(ctx, "--xds-address") == service["metadata"]["name"] == XDS_SERVER_SAN
    assert option(ctx, "--xds-port") == service["spec"]["ports"][0]["port"]
    config, fs, envoy_fs = _written_bootstrap(tmp_path)
    # Every file the bootstrap names (the xDS client certificate) is mounted into Envoy too.
    files = list(_filenames(config))
    assert len(files) == 3
    root = str(fs.root)
    for name in files:
        assert name.startswith(root)
        path = name[len(root) :]
        secret = envoy_fs.volume_of(path)["secret"]["secretName"]
        assert secret == certgen.ENVOY_SECRET
        assert envoy_fs.path(path).read_bytes() == fs.path(path).read_bytes()


def _filenames(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "filename":
                yield item
            else:
                yield from _filenames(item)
    elif isinstance(value, list):
        for item in value:
            yield from _filenames(item)


def _stats_listener(config: Mapping[str, Any]) -> tuple[str, int]:
    (listener,) = [x for x in config["static_resources"]["listeners"] if x["name"] == "stats-health"]
    address = listener["address"]["socket_address"]
    return address["address"], address["port_value"]


def test_envoy_admin_is_on_a_socket_in_its_own_volume(tmp_path: Path) -> None:
    config, _, envoy_fs = _written_bootstrap(tmp_path)
    socket_path = config["admin"]["address"]["pipe"]["path"]
    assert "socket_address" not in json.dumps(config["admin"])
    volume = envoy_fs.volume_of(socket_path)
    assert "emptyDir" in volume
    # A volume of its own, which Envoy can write (the socket is created there).
    envoy = container(the("DaemonSet", "envoy"), "envoy")
    (mount,) = [m for m in envoy["volumeMounts"] if socket_path.startswith(m["mountPath"] + "/")]
    assert not mount.get("readOnly")
    assert mount["name"] == "envoy-admin"
    # Every TCP listener in the bootstrap forwards GET of read-only paths only.
    for listener in config["static_resources"]["listeners"]:
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        for route in hcm["route_config"]["virtual_hosts"][0]["routes"]:
            assert route["match"]["headers"][0]["string_match"]["exact"] == "GET"


def test_envoy_readiness_and_metrics_use_the_stats_listener(tmp_path: Path) -> None:
    config, _, _ = _written_bootstrap(tmp_path)
    address, port = _stats_listener(config)
    assert address == "0.0.0.0"  # the kubelet probes the pod's address
    daemonset = the("DaemonSet", "envoy")
    envoy = container(daemonset, "envoy")
    assert envoy["readinessProbe"]["httpGet"] == {"path": "/ready", "port": port}
    assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in envoy["ports"]
    annotations = daemonset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/stats/prometheus"


def test_envoy_listens_where_cpx_puts_its_listeners(tmp_path: Path) -> None:
    deployment = the("Deployment", "cpx")
    ctx, _ = parse(tmp_path, deployment, container(deployment, "cpx"))
    http, https = option(ctx, "--envoy-service-http-port"), option(ctx, "--envoy-service-https-port")
    envoy = container(the("DaemonSet", "envoy"), "envoy")
    ports = {p["name"]: p["containerPort"] for p in envoy["ports"]}
    assert ports == {"http": http, "https": https, "metrics": ports["metrics"]}
    # The Envoy Service is the one cpx reads its load-balancer address from.
    service = the("Service", option(ctx, "--envoy-service-name"))
    assert service["metadata"]["namespace"] == option(ctx, "--envoy-service-namespace")
    assert service["spec"]["type"] == "LoadBalancer"
    assert {(p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {(80, http), (443, https)}


def test_every_secret_mounted_is_one_certgen_makes() -> None:
    mounted = {
        (w["metadata"]["name"], v["secret"]["secretName"])
        for k in WORKLOADS
        for w in objects(k)
        for v in pod_spec(w).get("volumes", [])
        if "secret" in v
    }
    assert mounted == {("cpx", certgen.CPX_SECRET), ("envoy", certgen.ENVOY_SECRET)}


# -- RBAC ------------------------------------------------------------------------------------------


def _grants(
    kind: str, binding_kind: str, service_account: str, namespace: str | None = None
) -> dict[tuple[str, str], set[str]]:
    """{(apiGroup, resource): verbs} of the roles of ``kind`` bound to a service account."""
    roles = set()
    for binding in objects(binding_kind):
        if namespace is not None and binding["metadata"]["namespace"] != namespace:
            continue
        subjects = binding.get("subjects", [])
        if any(s["kind"] == "ServiceAccount" and s["name"] == service_account for s in subjects):
            assert all(s.get("namespace") == NAMESPACE for s in subjects)
            assert binding["roleRef"]["kind"] == kind
            roles.add(binding["roleRef"]["name"])
    grants: dict[tuple[str, str], set[str]] = {}
    for role in objects(kind):
        if role["metadata"]["name"] not in roles:
            continue
        if namespace is not None:
            assert role["metadata"]["namespace"] == namespace
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule
            assert "*" not in rule["verbs"] + rule["apiGroups"] + rule["resources"], rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    name = resource if "resourceNames" not in rule else f"{resource}:{rule['resourceNames']}"
                    grants.setdefault((group, name), set()).update(rule["verbs"])
    return grants


def needed_cluster_permissions() -> dict[tuple[str, str], set[str]]:
    """What cpx does with the API, from the installed plugins (so a new plugin needs RBAC)."""
    host = PluginHost.load()
    needed: dict[tuple[str, str], set[str]] = {}
    for watch in host.watches():
        needed.setdefault((watch.gvk.group, watch.gvk.plural), set()).update(READ)
    for writer in host.status_writers():
        if not writer.writes:
            continue
        needed.setdefault((writer.gvk.group, f"{writer.gvk.plural}/status"), set()).update(STATUS_WRITE)
    return needed


def test_cluster_role_grants_exactly_what_the_plugins_need() -> None:
    needed = needed_cluster_permissions()
    # The core's kinds and both plugins' are there; the Envoy Service is read through services.
    assert ("", "services") in needed and ("networking.k8s.io", "ingresses/status") in needed
    assert ("projectcontour.io", "httpproxies/status") in needed
    granted = _grants("ClusterRole", "ClusterRoleBinding", "cpx")
    assert granted == needed


def test_leader_election_lease_role() -> None:
    namespace = default("serve", "--leader-election-resource-namespace")
    assert namespace == NAMESPACE
    granted = _grants("Role", "RoleBinding", "cpx", namespace)
    assert granted == {(LEASE.group, LEASE.plural): LEASE_VERBS}


def test_service_accounts_of_the_workloads() -> None:
    assert pod_spec(the("Deployment", "cpx"))["serviceAccountName"] == "cpx"
    assert pod_spec(the("Job", "cpx-certgen"))["serviceAccountName"] == "cpx-certgen"
    envoy = pod_spec(the("DaemonSet", "envoy"))
    assert envoy["serviceAccountName"] == "envoy" and envoy["automountServiceAccountToken"] is False
    assert _grants("ClusterRole", "ClusterRoleBinding", "envoy") == {}
    assert _grants("Role", "RoleBinding", "envoy", NAMESPACE) == {}
    assert _grants("ClusterRole", "ClusterRoleBinding", "cpx-certgen") == {}
    names = sorted([certgen.CPX_SECRET, certgen.ENVOY_SECRET])
    assert _grants("Role", "RoleBinding", "cpx-certgen", NAMESPACE) == {
        ("", "secrets"): {"create"},
        ("", f"secrets:{names}"): {"get"},
    }


# -- CRDs ------------------------------------------------------------------------------------------


def test_crds_file_is_current() -> None:
    generate = generate_module()
    assert generate.render(ROOT) == (DEPLOY / "01-crds.yaml").read_text(), "run python deploy/generate.py"
    assert generate.main(["--check"]) == 0
    shipped = [
        doc for p in sorted(ROOT.glob("plugins/*/crd/*.yaml")) for doc in yaml.safe_load_all(p.read_text())
    ]
    assert [d for d in shipped if d] == objects("CustomResourceDefinition")
    assert all(d["kind"] == "CustomResourceDefinition" for _, d in DOCS if _ == "01-crds.yaml")


def test_generate_renders_every_plugins_crds(tmp_path: Path) -> None:
    generate = generate_module()
    for plugin, text in {"b": "kind: B\n", "a": "# comment\n---\nkind: A\n"}.items():
        (tmp_path / "plugins" / plugin / "crd").mkdir(parents=True)
        (tmp_path / "plugins" / plugin / "crd" / f"{plugin}.yaml").write_text(text)
    assert [d["kind"] for d in yaml.safe_load_all(generate.render(tmp_path)) if d] == ["A", "B"]


# API groups the API server serves itself (every other group comes from a CRD, including
# gateway.networking.k8s.io).
BUILT_IN_GROUPS = ("", "networking.k8s.io", "discovery.k8s.io")


def test_every_custom_kind_watched_has_its_crd() -> None:
    host = PluginHost.load()
    status_kinds = {w.gvk for w in host.status_writers()}
    crds = {
        (c["spec"]["group"], c["spec"]["names"]["plural"]): c for c in objects("CustomResourceDefinition")
    }
    custom = [w.gvk for w in host.watches() if w.gvk.group not in BUILT_IN_GROUPS]
    assert custom, "no custom kind watched"
    for gvk in custom:
        crd = crds.get((gvk.group, gvk.plural))
        assert crd is not None, f"no CRD for {gvk}"
        assert crd["metadata"]["name"] == f"{gvk.plural}.{gvk.group}"
        assert crd["spec"]["names"]["kind"] == gvk.kind
        assert crd["spec"]["scope"] == ("Namespaced" if gvk.namespaced else "Cluster")
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == gvk.version]
        assert version["served"] and version["storage"]
        if gvk in status_kinds:
            assert "status" in version.get("subresources", {})


# -- certgen Job -----------------------------------------------------------------------------------


class FakeCoreV1:
    """The two calls the certgen Role allows (get and create Secrets), on a dict."""

    def __init__(self, store: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.store = store

    def read_namespaced_secret(self, name: str, namespace: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        if (namespace, name) not in self.store:
            raise ApiException(status=404, reason="Not Found")
        return self.store[(namespace, name)]

    def create_namespaced_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        assert body["metadata"]["namespace"] == namespace
        key = (namespace, body["metadata"]["name"])
        if key in self.store:
            raise ApiException(status=409, reason="AlreadyExists")
        self.store[key] = body
        return body


def run_certgen_job(monkeypatch: pytest.MonkeyPatch, store: dict[tuple[str, str], dict[str, Any]]) -> None:
    job = the("Job", "cpx-certgen")
    ctr = container(job, "certgen")
    assert ctr["image"] == cpx_image()
    assert ctr["command"] == ["python", "-c"]
    env = {e["name"]: e for e in ctr["env"]}
    assert env["CPX_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    monkeypatch.setenv("CPX_NAMESPACE", job["metadata"]["namespace"])
    monkeypatch.setattr(kubernetes.config, "load_incluster_config", lambda: None)
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", lambda: FakeCoreV1(store))
    code = compile(ctr["args"][0], "05-certgen-job.yaml", "exec")
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise


def test_certgen_job_creates_the_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    store: dict[tuple[str, str], dict[str, Any]] = {}
    run_certgen_job(monkeypatch, store)
    assert sorted(store) == [(NAMESPACE, certgen.CPX_SECRET), (NAMESPACE, certgen.ENVOY_SECRET)]
    files = {name: {k: base64.b64decode(v) for k, v in s["data"].items()} for (_, name), s in store.items()}
    for secret in store.values():
        assert secret["type"] == "kubernetes.io/tls"
    cpx, envoy = files[certgen.CPX_SECRET], files[certgen.ENVOY_SECRET]
    assert cpx["ca.crt"] == envoy["ca.crt"]
    ca = x509.load_pem_x509_certificate(cpx["ca.crt"])
    server = x509.load_pem_x509_certificate(cpx["tls.crt"])
    client = x509.load_pem_x509_certificate(envoy["tls.crt"])
    server.verify_directly_issued_by(ca)
    client.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = sans.get_values_for_type(x509.DNSName)
    assert XDS_SERVER_SAN in names and f"cpx.{NAMESPACE}.svc" in names

    # Applying again keeps them.
    before = copy.deepcopy(store)
    run_certgen_job(monkeypatch, store)
    assert store == before


def test_certgen_job_refuses_to_pair_certificates_of_two_cas(monkeypatch: pytest.MonkeyPatch) -> None:
    store = {(NAMESPACE, certgen.CPX_SECRET): {"metadata": {"name": certgen.CPX_SECRET}}}
    with pytest.raises(SystemExit, match="only cpxcert exists"):
        run_certgen_job(monkeypatch, store)
    assert list(store) == [(NAMESPACE, certgen.CPX_SECRET)]


# -- image -----------------------------------------------------------------------------------------


def test_dockerfile_installs_the_core_and_every_plugin() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert [line for line in instructions if line.startswith("FROM ")][-1] == "FROM python:3.11-slim"
    install = next(line for line in text.split("RUN ") if "pip wheel" in line)
    final = next(line for line in text.split("RUN ") if "pip install" in line)
    for project in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        directory = project.parent.relative_to(ROOT).as_posix()
        assert f"./{directory}" in install.split(), f"the image does not build {directory}"
        distribution = re.search(r'^name = "([^"]+)"', project.read_text(), re.M)
        assert distribution is not None and distribution.group(1) in final.split()
    assert " . " in install and "cpx" in final.split()
    user = re.search(r"^USER (\d+)(?::(\d+))?$", text, re.M)
    assert user is not None and int(user.group(1)) != 0
    assert 'ENTRYPOINT ["cpx"]' in instructions
    # The pods' runAsUser is the image's user.
    assert pod_spec(the("Deployment", "cpx"))["securityContext"]["runAsUser"] == int(user.group(1))
    assert container(the("DaemonSet", "envoy"), "bootstrap")["securityContext"]["runAsUser"] == int(
        user.group(1)
    )
