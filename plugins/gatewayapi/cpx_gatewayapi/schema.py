"""What the API server's schema (CRD OpenAPI and CEL rules) refuses, for GatewayClass, Gateway and
ReferenceGrant: such objects never reach the processor (``WatchSpec.validate``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def validate_gateway_class(obj: Mapping[str, Any]) -> list[str]:
    return []


def validate_gateway(obj: Mapping[str, Any]) -> list[str]:
    return []


def validate_reference_grant(obj: Mapping[str, Any]) -> list[str]:
    return []
