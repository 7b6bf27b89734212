"""A third-party-style test plugin: Envoy's ``header_mutation`` HTTP filter, switched on per route.

Its POLICIES-phase processor attaches an :class:`AddedHeader` to every route of the virtual hosts
whose name starts with ``mutate.``; the filter's per-route config turns that attachment into
``HeaderMutationPerRoute`` adding ``x-mutated: <host>`` to responses.  Loaded by the unit tests
with ``PluginHost.from_modules`` and by the end-to-end test through an entry point.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import attrs
from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2 as mutation_rules
from envoy.config.core.v3 import base_pb2 as core_base
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2 as header_mutation

from cpx import Config, FilterSite, HttpFilterSpec, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG, AttachmentKey, Route

FILTER = "envoy.filters.http.header_mutation"
HOST_PREFIX = "mutate."


@attrs.frozen
class AddedHeader:
    name: str
    value: str


ROUTE_HEADER = AttachmentKey("test-header-mutation/route", AddedHeader)


class MutateProcessor:
    def __init__(self, config: Config) -> None:
        self.config = config

    def run(self, dag: DAG, source: SourceView) -> None:
        for listener in dag.listeners.values():
            for vhost in (*listener.virtual_hosts.values(), *listener.secure_virtual_hosts.values()):
                if not vhost.name.startswith(HOST_PREFIX):
                    continue
                header = AddedHeader("x-mutated", vhost.name)
                for key, route in vhost.routes.items():
                    attached = route.attachments.set(ROUTE_HEADER, header)
                    vhost.routes[key] = attrs.evolve(route, attachments=attached)


_NO_MUTATIONS = header_mutation.HeaderMutation()  # inert until a route brings its own


def _listener_config(site: FilterSite) -> header_mutation.HeaderMutation:
    return _NO_MUTATIONS


@functools.lru_cache(maxsize=1024)
def _added(header: AddedHeader) -> header_mutation.HeaderMutationPerRoute:
    option = core_base.HeaderValueOption(
        header=core_base.HeaderValue(key=header.name, value=header.value),
        append_action=core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
    )
    mutations = header_mutation.Mutations(response_mutations=[mutation_rules.HeaderMutation(append=option)])
    return header_mutation.HeaderMutationPerRoute(mutations=mutations)


def _per_route(route: Route) -> header_mutation.HeaderMutationPerRoute | None:
    header = route.attachments.get(ROUTE_HEADER)
    return None if header is None else _added(header)


@hookimpl
def cpx_http_filters() -> Iterator[HttpFilterSpec]:
    yield HttpFilterSpec(name=FILTER, config=_listener_config, per_route=_per_route)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(name="test-header-mutation", factory=MutateProcessor, phase=Phase.POLICIES)
