"""Example cpx plugin: a ResponseHeaders kind whose headers Envoy's header_mutation filter adds to
every response of the virtual host it names."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import attrs
from envoy.config.common.mutation_rules.v3.mutation_rules_pb2 import HeaderMutation
from envoy.config.core.v3.base_pb2 import HeaderValue, HeaderValueOption
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2 as hm

import cpx
from cpx import FilterSite, HttpFilterSpec, ObjectKey, Phase, ProcessorSpec, StatusWriterSpec, WatchSpec
from cpx.dag import DAG, AttachmentKey, Route

KIND = cpx.GroupVersionKind(
    group="examples.cpx.dev", version="v1alpha1", kind="ResponseHeaders", plural="responseheaders"
)
HEADERS = AttachmentKey("example/response-headers", tuple)  # ((name, value), ...) on a route
OVERWRITE = HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


class AttachHeaders:
    def run(self, dag: DAG, source: cpx.SourceView) -> None:
        for obj in source.list(KIND):
            with cpx.blame(key := ObjectKey.of(obj)):
                spec = obj.get("spec") or {}
                headers = tuple(sorted((str(k), str(v)) for k, v in (spec.get("set") or {}).items()))
                hosts = list(dag.virtual_hosts(str(spec.get("host"))))
                for vhost in hosts:
                    for match, route in vhost.routes.items():
                        attached = route.attachments.set(HEADERS, headers, origin=key)
                        vhost.routes[match] = attrs.evolve(route, attachments=attached)
                reason = "Attached" if hosts else "NoVirtualHost"
                accepted = {"type": "Accepted", "status": str(bool(hosts)), "reason": reason}
                dag.set_status(key, {"conditions": [accepted]})


def per_route(route: Route) -> hm.HeaderMutationPerRoute | None:
    headers = route.attachments.get(HEADERS)
    return mutation(headers) if headers else None


@functools.cache  # the same config object for the same headers: the core packs it once
def mutation(headers: tuple[tuple[str, str], ...]) -> hm.HeaderMutationPerRoute:
    added = [
        HeaderValueOption(header=HeaderValue(key=k, value=v), append_action=OVERWRITE) for k, v in headers
    ]
    return hm.HeaderMutationPerRoute(
        mutations=hm.Mutations(response_mutations=[HeaderMutation(append=option) for option in added])
    )


def listener_config(site: FilterSite) -> hm.HeaderMutation:
    return hm.HeaderMutation()  # on every chain, inert until a route brings its own config


@cpx.hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=KIND)


@cpx.hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    # AttachHeaders edits hosts that DAG.virtual_hosts() hands it: private copies.
    yield ProcessorSpec(
        name="response-headers",
        factory=lambda config: AttachHeaders(),
        phase=Phase.POLICIES,
        accessors_only=True,
    )


@cpx.hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    yield StatusWriterSpec(name="response-headers", gvk=KIND)


@cpx.hookimpl
def cpx_http_filters() -> Iterator[HttpFilterSpec]:
    yield HttpFilterSpec(
        name="envoy.filters.http.header_mutation", config=listener_config, per_route=per_route
    )
