"""The ``tlsdelegation`` plugin's hook implementations: declarations only, the work is elsewhere.

The plugin watches TLSCertificateDelegations (schema-checked) and answers the core's
secret-access policy with them for every referrer but Gateway API's.  It writes no status, as
Contour writes none: problems are notes (logs, ``cpx translate``, the standalone status file).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cpx import ObjectKey, Phase, ProcessorSpec, SourceView, StatusWriterSpec, WatchSpec, hookimpl

from cpx_tlsdelegation import policy, schema
from cpx_tlsdelegation.kinds import TLS_CERTIFICATE_DELEGATION
from cpx_tlsdelegation.processor import DelegationProcessor


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=TLS_CERTIFICATE_DELEGATION, validate=schema.validate)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="tlsdelegation",
        factory=DelegationProcessor,
        phase=Phase.POLICIES,
        description="projectcontour.io/v1 TLSCertificateDelegation: notes on ignored delegations",
        accessors_only=True,
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    # Reported (the standalone status file, `cpx translate`, logs list every delegation with its
    # notes) but never written: Contour leaves the status subresource alone.
    yield StatusWriterSpec(name="tlscertificatedelegation", gvk=TLS_CERTIFICATE_DELEGATION, writes=False)


@hookimpl
def cpx_secret_access_permitted(
    secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
) -> bool | None:
    return policy.permitted(source, secret_namespace, secret_name, referrer)


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_tlsdelegation.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
