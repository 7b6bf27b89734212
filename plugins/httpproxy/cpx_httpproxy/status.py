"""HTTPProxy status, exactly as Contour writes it (``apis/projectcontour/v1/detailedconditions.go``,
``helpers.go``, ``internal/status/proxystatus.go``).

The processor collects errors and warnings per proxy in a :class:`ProxyStatus` and renders it into
the status dict (``DAG.set_status``); :func:`merge` is the status writer's merge of that into the
object's current status.  Contour writes one DetailedCondition, of type ``Valid``::

    currentStatus: valid | invalid | orphaned
    description: <the Valid message, or the orphan error's message>
    conditions:
    - type: Valid
      status: "True" | "False"
      reason: Valid | ErrorPresent
      message: Valid HTTPProxy | At least one error present, see Errors for details
      observedGeneration: <metadata.generation>
      lastTransitionTime: <RFC 3339>
      errors: [{type, status: "True", reason, message}, ...]
      warnings: [...]

Contour stamps ``lastTransitionTime`` with the time of every update; cpx keeps the previous time
while the condition's status stays the same (the Kubernetes convention), which also makes
``cpx translate`` output stable, and takes "now" from an injectable clock.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from cpx import DetailedStatus, StatusClock, SubCondition, object_generation, utc_now
from cpx.dag import Note

# currentStatus values (internal/status/proxystatus.go).
VALID = "valid"
INVALID = "invalid"
ORPHANED = "orphaned"

VALID_CONDITION = "Valid"
VALID_MESSAGE = "Valid HTTPProxy"
ORPHANED_MESSAGE = "this HTTPProxy is not part of a delegation chain from a root HTTPProxy"

# Sub-condition (error and warning) types (apis/projectcontour/v1/detailedconditions.go).
AUTH_ERROR = "AuthError"
CORS_ERROR = "CORSError"
IP_FILTER_ERROR = "IPFilterError"
JWT_VERIFICATION_ERROR = "JWTVerificationError"
INCLUDE_ERROR = "IncludeError"
ORPHANED_ERROR = "Orphaned"
PREFIX_REPLACE_ERROR = "PrefixReplaceError"
ROOT_NAMESPACE_ERROR = "RootNamespaceError"
ROUTE_ERROR = "RouteError"
SERVICE_ERROR = "ServiceError"
SPEC_ERROR = "SpecError"
TCP_PROXY_INCLUDE_ERROR = "TCPProxyIncludeError"
TCP_PROXY_ERROR = "TCPProxyError"
TLS_ERROR = "TLSError"
VIRTUAL_HOST_ERROR = "VirtualHostError"
LISTENER_ERROR = "ListenerError"


@attrs.define
class ProxyStatus(DetailedStatus):
    """Errors and warnings found for one HTTPProxy while building; renders its status.

    The Valid condition is the core's :class:`cpx.DetailedStatus`; an ``Orphaned`` error makes the
    proxy orphaned (currentStatus and description, HTTPProxy's own fields).
    """

    valid_message: str = VALID_MESSAGE

    @classmethod
    def for_object(cls, obj: Mapping[str, Any]) -> ProxyStatus:
        """An empty status for this object; observedGeneration comes from metadata.generation."""
        return cls(generation=object_generation(obj))

    def orphan(self) -> None:
        """Mark the proxy as not reachable from any root."""
        self.add_error(ORPHANED_ERROR, "Orphaned", ORPHANED_MESSAGE)

    @property
    def current_status(self) -> str:
        if self.valid:
            return VALID
        return ORPHANED if self._orphan_error() is not None else INVALID

    @property
    def description(self) -> str:
        if not self.errors:
            return self.message
        orphan = self._orphan_error()
        if orphan is not None:
            return orphan.message
        return self.message

    def _orphan_error(self) -> SubCondition | None:
        return next((e for e in self.errors if e.type == ORPHANED_ERROR), None)

    def render(
        self, previous: Mapping[str, Any] | None = None, *, clock: StatusClock = utc_now
    ) -> dict[str, Any]:
        """The status dict for ``DAG.set_status``."""
        return {
            "currentStatus": self.current_status,
            "description": self.description,
            "conditions": [self.condition(previous, clock=clock)],
        }


def _legacy_fields(valid: Mapping[str, Any]) -> dict[str, Any]:
    """currentStatus and description from the Valid condition, as Contour's ProxyUpdate.Mutate."""
    if valid.get("status") == "True":
        return {"currentStatus": VALID, "description": valid.get("message", "")}
    errors = valid.get("errors") or []
    orphan = next((e for e in errors if isinstance(e, Mapping) and e.get("type") == ORPHANED_ERROR), None)
    if orphan is not None:
        return {"currentStatus": ORPHANED, "description": orphan.get("message", "")}
    return {"currentStatus": INVALID, "description": valid.get("message", "")}


def _without_times(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    for condition in out.get("conditions") or []:
        if isinstance(condition, dict):
            condition.pop("lastTransitionTime", None)
    return out


def merge(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """StatusWriterSpec.merge: put the computed conditions into the current status.

    Conditions of other types (another controller's) are kept, and ``loadBalancer`` unless one was
    computed (``--ingress-status-address`` or the Envoy Service's address); a computed
    condition replaces the current one of its type unless the current one was observed at a newer
    generation (our observation is stale), and keeps its lastTransitionTime when its status is
    unchanged.  currentStatus/description follow the resulting Valid condition.  Returns None when
    nothing was computed or when nothing but timestamps would change.
    """
    if not computed:
        return None
    conditions = [c for c in (current.get("conditions") or []) if isinstance(c, Mapping)]
    merged_conditions = [dict(c) for c in conditions]
    for new in computed.get("conditions") or []:
        index = next((i for i, c in enumerate(merged_conditions) if c.get("type") == new.get("type")), None)
        if index is None:
            merged_conditions.append(dict(new))
            continue
        old = merged_conditions[index]
        old_generation, new_generation = old.get("observedGeneration"), new.get("observedGeneration")
        if (
            isinstance(old_generation, int)
            and isinstance(new_generation, int)
            and old_generation > new_generation
        ):
            continue
        replacement = dict(new)
        if old.get("status") == new.get("status") and old.get("lastTransitionTime"):
            replacement["lastTransitionTime"] = old["lastTransitionTime"]
        merged_conditions[index] = replacement
    merged: dict[str, Any] = {**current, "conditions": merged_conditions}
    if "loadBalancer" in computed:
        merged["loadBalancer"] = computed["loadBalancer"]
    valid = next((c for c in merged_conditions if c.get("type") == VALID_CONDITION), None)
    if valid is not None:
        merged.update(_legacy_fields(valid))
    else:
        merged.update({k: v for k, v in computed.items() if k in ("currentStatus", "description")})
    if _without_times(merged) == _without_times(current):
        return None
    return merged


def envoy_load_balancer(service_lb: Mapping[str, Any], computed: Mapping[str, Any]) -> dict[str, Any]:
    """StatusWriterSpec.load_balancer: HTTPProxy's ``status.loadBalancer`` is a core/v1
    LoadBalancerStatus, so the Envoy Service's goes in as it is (into every HTTPProxy's status)."""
    return {**computed, "loadBalancer": copy.deepcopy(dict(service_lb))}


def refused(obj: Mapping[str, Any], notes: Sequence[Note]) -> dict[str, Any]:
    """The status of an HTTPProxy cpx left out of the configuration (StatusWriterSpec.refused):
    invalid, with each note as an error of the Valid condition."""
    status = ProxyStatus.for_object(obj)
    for note in notes:
        status.add_error(note.type, note.reason, note.message)
    previous = obj.get("status")
    return status.render(previous if isinstance(previous, Mapping) else None)
