"""Test helpers for cpx and its plugins: a real Envoy, loopback backends, TLS material.

Import from :mod:`cpx.testing.harness`; the modules behind it are an implementation detail.
"""
