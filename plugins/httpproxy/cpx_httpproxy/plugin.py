"""The ``httpproxy`` plugin's hook implementations: declarations only, the work is elsewhere.

The plugin watches HTTPProxies (schema-checked, class-filtered), turns them into virtual hosts
and routes on the core's static listeners (after Ingress, as in Contour, so that an HTTPProxy
route with the same match replaces an Ingress one) and owns their status.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from cpx import (
    Config,
    HttpFilterSpec,
    OptionSpec,
    Phase,
    ProcessorSpec,
    StatusWriterSpec,
    WatchSpec,
    hookimpl,
    ingress_class_accepts,
)

from cpx_httpproxy import globalauth, jwt, ratelimit, schema, status
from cpx_httpproxy.authfilter import EXT_AUTHZ_FILTER
from cpx_httpproxy.kinds import HTTPPROXY
from cpx_httpproxy.processor import HTTPProxyProcessor, Settings


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield OptionSpec(
        name="root_namespaces",
        help="namespaces where root HTTPProxies (with spec.virtualhost) are allowed "
        "(repeatable or comma-separated; default: all)",
        multiple=True,
    )
    yield OptionSpec(
        name="fallback_certificate",
        help="namespace/name of the TLS Secret served to clients without (known) SNI by HTTPProxies "
        "that set tls.enableFallbackCertificate",
        config_key="tls.fallback-certificate",
    )
    yield OptionSpec(
        name="disable_permit_insecure",
        help="ignore HTTPProxy routes' permitInsecure: plain HTTP always redirects to HTTPS on TLS "
        "virtual hosts",
        type=bool,
        default=False,
        config_key="disablePermitInsecure",
    )
    yield from globalauth.options()
    yield from ratelimit.options()


@hookimpl
def cpx_configure(config: Config) -> None:
    Settings.from_config(config)  # ConfigError for an unusable value


@hookimpl
def cpx_http_filters(config: Config) -> Iterator[HttpFilterSpec]:
    # Contour's order: rbac, jwt_authn, ext_authz, ratelimit (global), router.
    yield jwt.http_filter()
    yield attrs.evolve(EXT_AUTHZ_FILTER, after=(*EXT_AUTHZ_FILTER.after, jwt.FILTER_NAME))
    yield ratelimit.filter_spec(ratelimit.service_settings(config))


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts, validate=schema.validate)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="httpproxy",
        factory=HTTPProxyProcessor.from_config,
        phase=Phase.ROUTES,
        # Contour runs Ingress first: an HTTPProxy route with the same match replaces an
        # Ingress one.  A constraint on a processor that is not loaded is ignored.
        after=("listeners", "ingress", "extsvc"),
        description="projectcontour.io/v1 HTTPProxy roots, includes, TLS and TCP proxying",
        accessors_only=True,
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    # status.loadBalancer: the Envoy Service's (a core/v1 LoadBalancerStatus) in Kubernetes mode.
    yield StatusWriterSpec(
        name="httpproxy",
        gvk=HTTPPROXY,
        merge=status.merge,
        load_balancer=status.envoy_load_balancer,
        refused=status.refused,
    )


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_httpproxy.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
