"""KubeSource against kmock's KubernetesEmulator: list, watch, relist, slimming, missing CRDs.

The emulator keeps no resourceVersions and replays every object as ADDED on each watch, so these
tests also cover cpx's content comparison.  ``kmock.objects[...] = ...`` and ``del kmock.objects``
change the store without a watch event: that is how a change the watch missed is simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client

from cpx import objects as k8s
from cpx.builtin.plugin import SECRET_FIELD_SELECTOR
from cpx.cli import cli
from cpx.objects import ObjectKey
from cpx.records import WatchSpec
from cpx.sources.kube.watch import KubeSource, MissingKindError, field_selector_matches, slim
from cpx.testing.kubeapi import fix_kmock_paths

SERVICES = WatchSpec(gvk=k8s.SERVICE)
SECRETS = WatchSpec(gvk=k8s.SECRET, field_selector=SECRET_FIELD_SELECTOR)
NAMESPACES = WatchSpec(gvk=k8s.NAMESPACE)
WIDGET = k8s.GroupVersionKind(group="example.com", version="v1", kind="Widget", plural="widgets")
WIDGETS = WatchSpec(gvk=WIDGET)


class Recorder:
    """Stands in for the EventHandler: records what the source hands it."""

    def __init__(self) -> None:
        self.pending_sources: set[str] = set()
        self.synced_sources: list[str] = []
        self.events: list[tuple[str, ObjectKey, dict[str, Any]]] = []

    def upsert(self, obj: dict[str, Any], source: str = "") -> None:
        self.events.append(("upsert", ObjectKey.of(obj), obj))

    def delete(self, obj: dict[str, Any], source: str = "") -> None:
        self.events.append(("delete", ObjectKey.of(obj), obj))

    def synced(self, source: str) -> None:
        self.pending_sources.discard(source)
        self.synced_sources.append(source)

    def ops(self, name: str | None = None) -> list[tuple[str, str]]:
        return [(op, key.name) for op, key, _ in self.events if name is None or key.name == name]

    def last(self, name: str) -> dict[str, Any]:
        return next(obj for op, key, obj in reversed(self.events) if key.name == name and op == "upsert")

    async def wait(self, check: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out; events so far: {self.ops()}"
            await asyncio.sleep(0.01)


def api_client(kmock: Any) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = str(kmock.url).rstrip("/")
    return client.ApiClient(configuration)


def service(name: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, **extra},
        "spec": {"ports": [{"port": 80}]},
    }


def secret(name: str, type_: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": type_,
        "data": data,
    }


def requests_for(kmock: Any, api_version: str, plural: str) -> list[Any]:
    return [r for r in kmock if r.resource == kmock.resource(api_version, plural)]


@contextlib.asynccontextmanager
async def running(source: KubeSource, recorder: Recorder) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(source.run(recorder))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # let it start
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, MissingKindError):
            await task
        assert all(not w.thread or not w.thread.is_alive() for w in source.watchers), "a watcher lingers"


async def test_list_then_watch_create_modify_delete(kmock: Any) -> None:
    kmock.resources["v1/services"] = {}
    kmock.objects["v1/services", "default", "one"] = service("one")
    recorder = Recorder()
    source = KubeSource(api_client(kmock), [("core", SERVICES)])
    async with running(source, recorder):
        # Registered before anything was listed: the handler's initial-sync gate.
        assert recorder.pending_sources == {"kube:Service"}
        await recorder.wait(lambda: recorder.synced_sources == ["kube:Service"])
        assert recorder.ops() == [("upsert", "one")]
        # The sync is reported after the listed objects, so they are processed first.
        assert not recorder.pending_sources

        await kmock.post("/api/v1/namespaces/default/services", json=service("two"))
        await recorder.wait(lambda: ("upsert", "two") in recorder.ops())
        await kmock.patch("/api/v1/namespaces/default/services/one", json={"spec": {"ports": [{"port": 81}]}})
        await recorder.wait(lambda: len(recorder.ops("one")) == 2)
        assert recorder.last("one")["spec"]["ports"] == [{"port": 81}]
        await kmock.delete("/api/v1/namespaces/default/services/two")
        await recorder.wait(lambda: ("delete", "two") in recorder.ops())

    # The watch replays every object as ADDED (no resourceVersions): unchanged ones are skipped.
    assert recorder.ops() == [("upsert", "one"), ("upsert", "two"), ("upsert", "one"), ("delete", "two")]
    assert recorder.last("one")["apiVersion"] == "v1" and recorder.last("one")["kind"] == "Service"


async def test_nothing_is_built_before_every_kind_is_listed(kmock: Any) -> None:
    from cpx.builtin import plugin as core_plugin
    from cpx.config import Config
    from cpx.events import EventHandler
    from cpx.plugins import PluginHost
    from cpx.snapshot import SnapshotHandler

    kmock.resources["v1/services"] = {}
    kmock.objects["v1/services", "default", "a"] = service("a")
    release = asyncio.Event()

    async def slow_secrets(request: Any) -> dict[str, Any]:
        await release.wait()
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    kmock["list", kmock.resource("v1/secrets")] << slow_secrets
    pipeline = SnapshotHandler.create(PluginHost.from_modules([("core", core_plugin)]), Config())
    handler = EventHandler(pipeline, on_snapshot=lambda snapshot: None, holdoff_delay=0.01)
    handler_task = asyncio.create_task(handler.run())
    source = KubeSource(api_client(kmock), [SERVICES, SECRETS])
    try:
        task = asyncio.create_task(source.run(handler))
        await Recorder().wait(lambda: source.watchers[0].synced)  # Services listed...
        await asyncio.sleep(0.1)
        assert pipeline.snapshot is None and handler.pending_sources == {"kube:Secret"}  # ...not Secrets
        release.set()
        await handler.wait_for_sequence(1, timeout=5)
        assert pipeline.source.get(ObjectKey("", "Service", "default", "a")) is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        release.set()
        handler_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await handler_task


async def test_gone_relists_and_reconciles_what_the_watch_missed(kmock: Any) -> None:
    kmock.resources["v1/services"] = {}
    for name in ("keep", "change", "vanish"):
        kmock.objects["v1/services", "default", name] = service(name)
    watched = asyncio.Event()
    fired: list[int] = []

    def gone(request: Any) -> tuple[dict[str, Any], ...]:
        # Changes the watch never reports, then 410 Gone (resourceVersion too old).
        fired.append(1)
        del kmock.objects["v1/services", "default", "vanish"]
        kmock.objects["v1/services", "default", "change"] = service("change", labels={"v": "2"})
        kmock.objects["v1/services", "default", "new"] = service("new")
        watched.set()
        return ({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}},)

    kmock["watch", kmock.resource("v1/services")][lambda request: not fired] << gone
    recorder = Recorder()
    source = KubeSource(api_client(kmock), [SERVICES])
    async with running(source, recorder):
        await recorder.wait(
            lambda: ("delete", "vanish") in recorder.ops() and ("upsert", "new") in recorder.ops()
        )
    assert watched.is_set()
    assert sorted(recorder.ops()[3:]) == [("delete", "vanish"), ("upsert", "change"), ("upsert", "new")]
    assert recorder.last("change")["metadata"]["labels"] == {"v": "2"}
    assert recorder.synced_sources == ["kube:Service"]  # reported once, by the first list
    lists = [
        r for r in kmock if r.resource == kmock.resource("v1/services") and r.params.get("watch") is None
    ]
    assert len(lists) == 2


async def test_stalled_watch_relists(kmock: Any) -> None:
    kmock.resources["v1/services"] = {}
    kmock.objects["v1/services", "default", "a"] = service("a")
    recorder = Recorder()
    source = KubeSource(api_client(kmock), [SERVICES], watch_timeout=0.2, stall_grace=0.1)
    async with running(source, recorder):
        await recorder.wait(lambda: recorder.ops() == [("upsert", "a")])
        del kmock.objects["v1/services", "default", "a"]  # no event: only a relist can tell
        await recorder.wait(lambda: ("delete", "a") in recorder.ops())


async def test_objects_are_slimmed_and_secrets_selected(kmock: Any) -> None:
    kmock.resources["v1/secrets"] = {}
    objs = {
        "tls": secret("tls", "kubernetes.io/tls", {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}),
        "ca": secret("ca", "Opaque", {"ca.crt": "Y2E="}),
        "opaque": secret("opaque", "Opaque", {"password": "aHVudGVyMg=="}),
        "helm": secret("helm", "helm.sh/release.v1", {"release": "eA=="}),
    }
    objs["tls"]["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    for name, obj in objs.items():
        kmock.objects["v1/secrets", "default", name] = obj
    recorder = Recorder()
    async with running(KubeSource(api_client(kmock), [SECRETS]), recorder):
        await recorder.wait(lambda: bool(recorder.synced_sources))
    assert sorted(recorder.ops()) == [("upsert", "ca"), ("upsert", "opaque"), ("upsert", "tls")]
    assert "managedFields" not in recorder.last("tls")["metadata"]
    assert recorder.last("tls")["data"] == {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}
    assert recorder.last("ca")["data"] == {"ca.crt": "Y2E="}
    assert "data" not in recorder.last("opaque")
    # The API server is asked to leave Helm releases and SA tokens out, on list and watch alike
    # (the emulator ignores field selectors: cpx applies the simple ones itself too).
    requests = requests_for(kmock, "v1", "secrets")
    assert {r.params.get("watch") for r in requests} == {None, "true"}
    assert all(r.params["fieldSelector"] == SECRET_FIELD_SELECTOR for r in requests)


async def test_namespaces_limit_namespaced_kinds(kmock: Any) -> None:
    fix_kmock_paths()  # kmock 0.8 cannot serve /api/v1/namespaces otherwise
    kmock.resources["v1/services"] = {}
    kmock.resources["v1/namespaces"] = {}
    for namespace in ("a", "b", "c"):
        kmock.objects["v1/services", namespace, "svc"] = service("svc", namespace)
        kmock.objects["v1/namespaces", None, namespace] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        }
    recorder = Recorder()
    source = KubeSource(api_client(kmock), [SERVICES, NAMESPACES], ["a", "b", "a"])
    assert source.source_names == {"kube:Service@a", "kube:Service@b", "kube:Namespace"}
    async with running(source, recorder):
        await recorder.wait(lambda: len(recorder.synced_sources) == 3)
    keys = {(key.kind, key.namespace, key.name) for _, key, _ in recorder.events}
    assert keys == {
        ("Service", "a", "svc"),
        ("Service", "b", "svc"),
        ("Namespace", "", "a"),
        ("Namespace", "", "b"),
        ("Namespace", "", "c"),
    }


async def test_missing_crd_is_reported_once_then_picked_up(
    kmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    kmock.resources["v1/services"] = {}
    recorder = Recorder()
    source = KubeSource(api_client(kmock), [("core", SERVICES), ("widgets", WIDGETS)], missing_recheck=0.05)
    with caplog.at_level(logging.DEBUG, logger="cpx.sources.kube"):
        async with running(source, recorder):
            # The gate opens: a kind that is not served counts as listed (and empty).
            await recorder.wait(lambda: len(recorder.synced_sources) == 2)
            await recorder.wait(lambda: len(requests_for(kmock, WIDGET.api_version, "widgets")) >= 4)
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert len(errors) == 1, [r.getMessage() for r in errors]
            message = errors[0].getMessage()
            assert "example.com/v1/Widget (plugin 'widgets')" in message
            assert "CRD" in message and "--on-missing-crd" in message
            # The CRD gets installed: the kind is listed and watched from then on.
            kmock.objects["example.com/v1/widgets", "default", "w"] = {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "namespace": "default"},
            }
            await recorder.wait(lambda: ("upsert", "w") in recorder.ops())
    assert recorder.synced_sources.count("kube:Widget.example.com") == 1


async def test_missing_crd_fails_the_start_when_asked(kmock: Any) -> None:
    kmock.resources["v1/services"] = {}
    source = KubeSource(api_client(kmock), [("core", SERVICES), ("widgets", WIDGETS)], on_missing_crd="fail")
    with pytest.raises(MissingKindError, match=r"example.com/v1/Widget \(plugin 'widgets'\).*CRD"):
        await asyncio.wait_for(source.run(Recorder()), 5)  # type: ignore[arg-type]
    assert all(w.thread and not w.thread.is_alive() for w in source.watchers)


async def test_unreachable_api_server_retries_quietly(caplog: pytest.LogCaptureFixture) -> None:
    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: connection refused
    configuration.retries = False
    recorder = Recorder()
    source = KubeSource(client.ApiClient(configuration), [SERVICES], backoff_base=0.01, backoff_cap=0.02)
    with caplog.at_level(logging.WARNING, logger="cpx.sources.kube"):
        async with running(source, recorder):
            await asyncio.sleep(0.3)
    assert recorder.pending_sources == {"kube:Service"}  # never synced: nothing is built
    assert not recorder.events
    warnings = [r for r in caplog.records if r.name == "cpx.sources.kube"]
    assert len(warnings) == 1 and "retrying with backoff" in warnings[0].getMessage()


def test_slim_and_field_selectors() -> None:
    obj = secret("s", "Opaque", {"crl.pem": "eA=="})
    obj["metadata"]["managedFields"] = []
    slimmed = slim(obj, k8s.SECRET)
    assert slimmed["data"] == {"crl.pem": "eA=="} and "managedFields" not in slimmed["metadata"]
    assert field_selector_matches(obj, SECRET_FIELD_SELECTOR)
    assert not field_selector_matches(secret("h", "helm.sh/release.v1", {}), SECRET_FIELD_SELECTOR)
    assert field_selector_matches(obj, "metadata.name=s,metadata.namespace==default")
    assert not field_selector_matches(obj, "metadata.name=t")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--manifests", "."], "exclusive"),
        (["--incluster"], "mutually exclusive"),
        (["--watch-namespaces", "a"], "needs Kubernetes mode"),
    ],
)
def test_serve_modes_are_exclusive(tmp_path: Any, args: list[str], error: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    if "--watch-namespaces" in args:
        args = [*args, "--manifests", str(tmp_path)]
    else:
        args = [*args, "--kubeconfig", str(kubeconfig)]
    result = CliRunner().invoke(cli, ["serve", "--plugins", "", *args])
    assert result.exit_code == 2 and error in result.output, result.output


def test_api_client_from_kubeconfig(tmp_path: Any) -> None:
    from cpx.errors import ConfigError
    from cpx.sources.kube.client import new_api_client
    from cpx.testing.kubeapi import KubeAPI

    api = KubeAPI()
    api.url = "http://127.0.0.1:1"
    path = api.write_kubeconfig(tmp_path / "kubeconfig")
    assert new_api_client(path).configuration.host == "http://127.0.0.1:1"
    (tmp_path / "broken").write_text("clusters: []\n")
    with pytest.raises(ConfigError, match="cannot load the kubeconfig"):
        new_api_client(tmp_path / "broken")
    with pytest.raises(ConfigError, match="exactly one"):
        new_api_client(path, incluster=True)
