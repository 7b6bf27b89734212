"""Whether a JSON Web Key Set holds a key Envoy can use.

Envoy refuses a jwt_authn provider whose local JWKS has no valid public key ("Jwks doesn't have
any valid public key"), so such a Secret must be refused before it reaches Envoy.  Envoy's
jwt_verify_lib takes RSA, EC (P-256/384/521), symmetric (oct) and Ed25519 (OKP) keys; the public
ones are built here with ``cryptography`` exactly as far as Envoy builds them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

# The JWK curve names Envoy takes, as cryptography's curve classes name them.
_CURVES = {"P-256": "SECP256R1", "P-384": "SECP384R1", "P-521": "SECP521R1"}


def _bytes(jwk: dict[str, Any], member: str) -> bytes:
    value = jwk.get(member)
    if not isinstance(value, str) or not value:
        raise ValueError(member)
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def _integer(jwk: dict[str, Any], member: str) -> int:
    return int.from_bytes(_bytes(jwk, member), "big")


def usable(jwk: Any) -> bool:
    """Whether Envoy can build a verification key from this JWK."""
    if not isinstance(jwk, dict):
        return False
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415 (~10 MB, only for a JWKS)

    kty = jwk.get("kty")
    try:
        if kty == "RSA":
            rsa.RSAPublicNumbers(_integer(jwk, "e"), _integer(jwk, "n")).public_key()
        elif kty == "EC":
            curve = getattr(ec, _CURVES[str(jwk.get("crv"))])()
            ec.EllipticCurvePublicNumbers(_integer(jwk, "x"), _integer(jwk, "y"), curve).public_key()
        elif kty == "oct":
            _bytes(jwk, "k")
        elif kty == "OKP":
            return jwk.get("crv") == "Ed25519" and len(_bytes(jwk, "x")) == 32
        else:
            return False
    except (KeyError, ValueError, TypeError, binascii.Error):
        return False
    return True
