"""A cluster-less runner for the Gateway API conformance tests: the real ``cpx serve`` and a real Envoy.

Upstream's suite (``kubernetes-sigs/gateway-api`` ``conformance/``) applies YAML to a cluster, waits
for statuses and sends requests to the Gateways' addresses.  :class:`Conformance` does the same with
no cluster: one ``cpx serve --manifests <dir> --status-file <file> --plugins gatewayapi`` and one
Envoy for a whole test session, the base set of ``conformance/base/manifests.yaml`` (namespaces,
the four base Gateways, the Services) with EndpointSlices pointing at :class:`EchoBackend` servers
named like pods, the GatewayClass ``contour`` and the TLS Secrets the suite creates.

* :meth:`Conformance.apply` writes a test's YAML (``{GATEWAY_CLASS_NAME}`` substituted, each Gateway
  given its own loopback address in ``spec.addresses[0]``, ``metadata.generation`` and
  ``creationTimestamp`` kept as the API server would) and :meth:`Conformance.remove` deletes it.
* The waits mirror ``conformance/utils/kubernetes/helpers.go`` (statuses read from the status
  file, conditions at the object's current generation), :meth:`Conformance.expect` mirrors
  ``conformance/utils/http/http.go`` (3 consecutive matching answers; the echo reports path, host,
  method, headers, namespace and pod).

Envoy serves a Gateway listener on port + 8000 (80 -> 8080); requests still carry the Gateway's port
in ``Host`` (none for 80), as in a cluster.  Timeouts are shorter than upstream's cluster ceilings
(cpx converges in well under a second): ``CPX_CONFORMANCE_TIMEOUT`` seconds, 10 by default.

Modules: ``base`` (the suite's names, the port mapping, waiting), ``echo`` (the backends),
``answers`` (what a test expects of an answer, and the comparison), ``checks`` (status
conditions), ``waits`` and ``traffic`` (the harness's status and request halves), ``harness``
(:class:`Conformance`: the session's processes and the objects a test applies), ``objects`` (the
GatewayClass and Gateways the other end-to-end tests serve).
"""

from __future__ import annotations

from cpx_gatewayapi.testing.answers import (
    Answer,
    Expect,
    Redirect,
    compare,
    h2c_request,
)
from cpx_gatewayapi.testing.base import (
    ALL_NAMESPACES,
    APP_NS,
    APP_V1,
    BACKEND_NAMESPACES,
    EDITS_REMOVED,
    EDITS_SEEN,
    EDITS_SENT,
    HTTPS_GATEWAY,
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    INFRA_V3,
    SAME_NAMESPACE,
    WEB_BACKEND,
    WEB_NS,
    NotYet,
    await_convergence,
    envoy_port,
    wait_until,
)
from cpx_gatewayapi.testing.echo import (
    EchoBackend,
)
from cpx_gatewayapi.testing.harness import (
    Conformance,
)
from cpx_gatewayapi.testing.objects import gateway, gateway_class, gateway_yaml

__all__ = [
    "ALL_NAMESPACES",
    "APP_NS",
    "APP_V1",
    "BACKEND_NAMESPACES",
    "EDITS_REMOVED",
    "EDITS_SEEN",
    "EDITS_SENT",
    "HTTPS_GATEWAY",
    "INFRA_NS",
    "INFRA_V1",
    "INFRA_V2",
    "INFRA_V3",
    "SAME_NAMESPACE",
    "WEB_BACKEND",
    "WEB_NS",
    "Answer",
    "Conformance",
    "EchoBackend",
    "Expect",
    "NotYet",
    "Redirect",
    "await_convergence",
    "compare",
    "envoy_port",
    "gateway",
    "gateway_class",
    "gateway_yaml",
    "h2c_request",
    "wait_until",
]
