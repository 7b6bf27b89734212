"""Loaded as a plugin by the real-Envoy HTTPRoute test: installs the stand-in Gateway resolver in
the ``cpx serve`` process (see :mod:`cpx_gatewayapi.routetesting`)."""

from __future__ import annotations

from cpx_gatewayapi import routetesting

routetesting.install()
