"""Notes on delegations that do not do what they seem to (Contour accepts them silently).

The delegations themselves need no DAG nodes: the secret-access policy reads them when a
referrer looks a Secret up.  This processor only reports, as warnings, the entries Contour
ignores, so that a user can tell why a reference is still refused.
"""

from __future__ import annotations

import attrs
from cpx import Config, ObjectKey, SourceView, blame, shown
from cpx.dag import DAG, Note

from cpx_tlsdelegation.kinds import TLS_CERTIFICATE_DELEGATION
from cpx_tlsdelegation.model import ALL_NAMESPACES, Delegation, delegations


@attrs.define
class DelegationProcessor:
    config: Config

    def run(self, dag: DAG, source: SourceView) -> None:
        for obj in source.list(TLS_CERTIFICATE_DELEGATION):
            key = ObjectKey.of(obj)
            with blame(key):
                for delegation in delegations(obj):
                    note = _ignored(delegation)
                    if note is not None:
                        dag.add_note(key, note)


def _ignored(delegation: Delegation) -> Note | None:
    field = f"spec.delegations[{delegation.index}]"
    secret = shown(delegation.secret_name)
    targets = delegation.target_namespaces
    if not targets:
        return Note(
            type="DelegationError",
            reason="NoTargetNamespaces",
            message=f"{field}: no targetNamespaces: Secret {secret} is delegated to no namespace",
            severity="warning",
        )
    if ALL_NAMESPACES in targets and len(targets) > 1:
        return Note(
            type="DelegationError",
            reason="WildcardNotAlone",
            message=f'{field}.targetNamespaces: "*" delegates to all namespaces only as the one entry; '
            f"Secret {secret} is delegated to the namespaces listed beside it only",
            severity="warning",
        )
    return None
