"""The one DAG processor: Gateways first, then the routes attached to them, then Gateway status.

One processor rather than one per kind: the route side needs the Gateways this build resolved,
and the Gateway status needs the routes that attached (``attachedRoutes``).  The Gateways are
resolved in every build (a few objects); the routes' part is kept between builds and worked out
again only where a change can affect it (:mod:`cpx_gatewayapi.incremental`).  It runs after the
Ingress and HTTPProxy processors, as in Contour, so that those hosts and a Gateway listener on the
same address and port share one Envoy listener.
"""

from __future__ import annotations

import attrs
from cpx import Config, SourceView
from cpx.dag import DAG

from cpx_gatewayapi import gateways, httproutes
from cpx_gatewayapi.incremental import RouteMemo
from cpx_gatewayapi.model import Attachments
from cpx_gatewayapi.settings import Settings


@attrs.define
class GatewayAPIProcessor:
    settings: Settings
    routes: RouteMemo = attrs.field(factory=RouteMemo)

    @classmethod
    def from_config(cls, config: Config) -> GatewayAPIProcessor:
        return cls(Settings.from_config(config))

    def run(self, dag: DAG, source: SourceView) -> None:
        resolution = gateways.resolve(dag, source, self.settings)
        attachments = Attachments()
        httproutes.apply(dag, source, resolution, attachments, self.settings, self.routes)
        gateways.report(dag, source, resolution, attachments, self.settings)
