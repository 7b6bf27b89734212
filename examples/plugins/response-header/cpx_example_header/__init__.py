"""Example cpx plugin: add a response header to every route."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from cpx import Config, OptionSpec, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG, HeaderValue


class ResponseHeaderProcessor:
    def __init__(self, config: Config) -> None:
        self.name = config.option("response_header_name", "x-served-by")
        self.value = config.option("response_header_value", "cpx")

    def run(self, dag: DAG, source: SourceView) -> None:
        header = HeaderValue(name=self.name, value=self.value)
        for listener in dag.listeners.values():
            for vhost in (*listener.virtual_hosts.values(), *listener.secure_virtual_hosts.values()):
                for key, route in vhost.routes.items():
                    policy = attrs.evolve(route.response_headers, set=(*route.response_headers.set, header))
                    vhost.routes[key] = attrs.evolve(route, response_headers=policy)


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield OptionSpec(name="response_header_name", help="Name of the header to add.", default="x-served-by")
    yield OptionSpec(name="response_header_value", help="Value of the header to add.", default="cpx")


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="response-header",
        factory=ResponseHeaderProcessor,
        phase=Phase.FINALIZE,
        description="adds a response header to every route",
    )
