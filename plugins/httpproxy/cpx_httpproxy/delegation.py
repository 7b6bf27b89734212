"""The wording of a refused cross-namespace Secret reference.

With a delegation policy enabled (the ``tlsdelegation`` plugin) a refusal is Contour's own message;
without one nothing could ever permit the reference, so the message says so instead of reading like
a missing delegation the user forgot (the reason stays Contour's, for tools that match on it).
"""

from __future__ import annotations

from cpx import DelegationNotEnabledError, DelegationNotPermittedError

NOT_ENABLED = "TLS certificate delegation is not enabled (the tlsdelegation plugin is not enabled)"


def refusal_message(err: DelegationNotPermittedError, subject: str, contour_message: str) -> str:
    """``contour_message`` when a policy refused; else ``subject`` is in another namespace and
    delegation is not enabled."""
    if isinstance(err, DelegationNotEnabledError):
        return f"{subject} is in another namespace and {NOT_ENABLED}"
    return contour_message
