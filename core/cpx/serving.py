"""The serving process (``cpx serve``): sources, the event handler, the snapshot handler, the xDS
server, status reporting and the health/debug endpoints, wired together and run until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from typing import Any, Protocol

import attrs

from cpx import objects as k8s
from cpx.config import Config, ServeOptions
from cpx.dag.dot import to_dot
from cpx.events import Event, EventHandler, Op
from cpx.heap import return_free_memory
from cpx.ops.httpserver import HTTPService, health_routes
from cpx.ops.metrics import Metrics
from cpx.plugins import PluginHost
from cpx.records import WatchSpec
from cpx.snapshot import SnapshotHandler
from cpx.sources.standalone import SOURCE_NAME, StandaloneSource
from cpx.status.reporter import StatusReporter
from cpx.xds.resource import Snapshot
from cpx.xds.server.ads import RejectReport, ServerTLS, XdsServer

log = logging.getLogger("cpx.serving")


def freeze_heap() -> None:
    """Exempt everything alive after the first build from the cyclic garbage collector.

    The initial sync leaves ~700k tracked long-lived objects at 10k routes (every manifest
    object, the DAG, the memoised translations).  Each full collection walks all of them (~200
    ms), and the objects later rebuilds allocate trigger one now and then, in
    the middle of some change.  What is alive now is freed by reference counting when replaced
    (the data is acyclic), so moving it to the permanent generation costs only the rare cycle.
    """
    gc.collect()
    gc.freeze()
    return_free_memory()


def _update_cache_metrics(metrics: Metrics, pipeline: SnapshotHandler) -> None:
    for group, kind in pipeline.source.kinds():
        gvk = k8s.GroupVersionKind(group=group, version="", kind=kind, plural="")
        metrics.dag_cache_object.labels(kind=kind).set(pipeline.source.count(gvk))


class Source(Protocol):
    """Feeds objects to the event handler until cancelled."""

    async def run(self, handler: EventHandler) -> None: ...


def make_source(
    host: PluginHost, pipeline: SnapshotHandler, options: ServeOptions
) -> tuple[Source, set[str]]:
    """The object source of the chosen mode, and the names it reports its initial sync under."""
    if options.kubeconfig is None and not options.incluster:
        return StandaloneSource(options.manifests, pipeline), {SOURCE_NAME}
    from cpx.sources.kube import KubeSource, new_api_client  # noqa: PLC0415 (kubernetes loads only when used)

    api_client = new_api_client(options.kubeconfig, incluster=options.incluster)
    source = KubeSource(
        api_client,
        host.contributions("cpx_watches", WatchSpec),
        options.watch_namespaces,
        on_missing_crd=options.on_missing_crd,
    )
    return source, source.source_names


def start_kube_status_writing(
    pipeline: SnapshotHandler, config: Config, options: ServeOptions, metrics: Metrics
) -> Any:
    """Kubernetes mode: the leader election, the Envoy Service watch and the status updater
    (:func:`cpx.status.updater.start_status_writing`), on a client of their own."""
    from cpx.sources.kube.client import new_api_client  # noqa: PLC0415 (kubernetes loads only when used)
    from cpx.status.loadbalancer import STATUS_ADDRESS_OPTION  # noqa: PLC0415
    from cpx.status.updater import start_status_writing  # noqa: PLC0415

    api_client = new_api_client(options.kubeconfig, incluster=options.incluster)
    address = config.option(STATUS_ADDRESS_OPTION.name)
    writing_options = attrs.evolve(
        options.status_writing, ingress_status_address=str(address) if address else None
    )
    return start_status_writing(api_client, pipeline, writing_options, metrics)


def rebuild_on_late_dns_answers(pipeline: SnapshotHandler, handler: EventHandler) -> None:
    """A DNS answer the ExternalName check could not wait for arrives later (on a resolver
    thread): rebuild then, rather than at the next unrelated change (cpx.sources.resolver)."""
    loop = asyncio.get_running_loop()

    def resync() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: cpx is stopping
            loop.call_soon_threadsafe(handler.submit, Event(Op.RESYNC))

    pipeline.source.external_names.resolver.on_late_answer = resync


def send_first_clusters_early(pipeline: SnapshotHandler, server: XdsServer) -> None:
    """Serve the first build's clusters while its routes are still being built (see
    SnapshotHandler.on_first_clusters): Envoy warms them meanwhile."""
    loop = asyncio.get_running_loop()

    def offer(snapshot: Snapshot) -> None:
        if server.snapshot is None or server.snapshot.clusters_only:  # never over a whole build
            server.set_snapshot(snapshot)

    def from_build_thread(snapshot: Snapshot) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: cpx is stopping
            loop.call_soon_threadsafe(offer, snapshot)

    pipeline.on_first_clusters = from_build_thread


async def serve(host: PluginHost, config: Config, options: ServeOptions) -> None:  # noqa: C901, PLR0915  (why: wires every serve component, in start-up order)
    """Run until cancelled (SIGTERM/SIGINT): every component stops within a few seconds."""
    metrics = Metrics()
    pipeline = SnapshotHandler.create(host, config)
    if options.envoy_validate:
        from cpx.xds.constraints.envoycheck import EnvoyValidator  # noqa: PLC0415 (protos load only when asked for)

        validator = EnvoyValidator.tested(options.envoy_binary)
        pipeline.checkers.append(validator)
        log.info("every snapshot goes through %s --mode validate before it is published", validator.binary)
    tls = None
    if config.xds_cafile or config.xds_cert_file or config.xds_key_file:
        tls = ServerTLS(
            ca_file=config.xds_cafile, cert_file=config.xds_cert_file, key_file=config.xds_key_file
        )

    def on_reject(report: RejectReport) -> None:
        # Envoy NACKed: note it on the objects behind it, and leave them out when the peer is
        # an authenticated Envoy (mTLS); applied between builds, see events.
        handler.envoy_rejected(
            report.type_url, report.resource_names, report.message, leave_out=tls is not None
        )

    server = XdsServer(
        address=config.xds_address, port=config.xds_port, tls=tls, metrics=metrics, on_reject=on_reject
    )
    reporter = StatusReporter(options.status_file, metrics)
    source, source_names = make_source(host, pipeline, options)
    status_tasks: list[asyncio.Task[None]] = []
    if options.kubernetes:
        writing = start_kube_status_writing(pipeline, config, options, metrics)
        reporter.sink = writing.submit
        status_tasks = writing.tasks

    def on_build_failed(p: SnapshotHandler) -> None:
        metrics.dag_build_failed.set(1)
        metrics.dag_build_failures.inc()

    def on_rebuild(p: SnapshotHandler) -> None:
        metrics.dag_build_failed.set(0)
        metrics.quarantined_objects.set(len(p.quarantined))
        metrics.dagrebuild_total.inc()
        metrics.dagrebuild_timestamp.set(time.time())
        metrics.dagrebuild_seconds.observe(p.last_build_seconds)
        _update_cache_metrics(metrics, p)
        reporter(p)
        if p.rebuilds == 1:
            # After the woken xDS streams have sent the first configuration (they are scheduled
            # already): the collection then runs while Envoy works on it, not before it gets it.
            asyncio.get_running_loop().call_soon(freeze_heap)

    handler = EventHandler(
        pipeline,
        on_snapshot=server.set_snapshot,
        on_rebuild=on_rebuild,
        on_build_failed=on_build_failed,
        on_statuses=reporter,
        holdoff_delay=config.holdoff_delay,
        holdoff_max_delay=config.holdoff_max_delay,
        pending_sources=set(source_names),
    )
    rebuild_on_late_dns_answers(pipeline, handler)
    send_first_clusters_early(pipeline, server)
    health = HTTPService(
        options.health_address, options.health_port, health_routes(metrics.registry, handler.not_ready)
    )
    debug = HTTPService(
        options.debug_address,
        options.debug_port,
        {
            "/debug/dag": lambda: (
                200,
                "text/vnd.graphviz",
                to_dot(pipeline.dag).encode() if pipeline.dag else b"",
            )
        },
    )
    if isinstance(source, StandaloneSource):
        source.start_prefetch()  # forks: before the gRPC server starts its threads
    port = await server.start()
    try:
        health.start()
        debug.start()
    except OSError:
        await server.stop(grace=0)  # e.g. the health port is taken: nothing may keep running
        raise
    log.info(
        "serving xDS on %s:%d (%s); health and metrics on %s:%d; debug on %s:%d",
        config.xds_address,
        port,
        "mTLS" if tls else "plaintext",
        options.health_address,
        health.port,
        options.debug_address,
        debug.port,
    )
    tasks = [
        asyncio.create_task(handler.run(), name="event-handler"),
        asyncio.create_task(source.run(handler), name="source"),
    ]
    tasks += status_tasks  # the Lease is released when they are cancelled
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait(), name="signals")
    try:
        done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task in tasks:
                error = task.exception()
                if error is not None:
                    raise error  # a source or the handler died
                log.error("%s ended unexpectedly; shutting down", task.get_name())
    finally:
        log.info("shutting down")
        for task in (*tasks, stopping):
            task.cancel()
        await asyncio.gather(*tasks, stopping, return_exceptions=True)
        await server.stop(grace=1.0)
        health.stop()
        debug.stop()
        host.unconfigure(config)
