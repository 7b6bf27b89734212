"""Listener and route hostname intersection (gateway.networking.k8s.io) and listener ownership."""

from __future__ import annotations

import pytest

from cpx_gatewayapi.hostnames import ANY, intersect, matches, owner


@pytest.mark.parametrize(
    ("listener", "route", "expected"),
    [
        (None, [], ["*"]),
        (None, ["a.example.com", "*.b.com"], ["a.example.com", "*.b.com"]),
        ("a.example.com", [], ["a.example.com"]),
        ("a.example.com", ["a.example.com", "b.example.com"], ["a.example.com"]),
        ("a.example.com", ["*.example.com"], ["a.example.com"]),
        ("a.example.com", ["*.com"], ["a.example.com"]),
        ("a.example.com", ["b.example.com"], []),
        ("*.example.com", [], ["*.example.com"]),
        (
            "*.example.com",
            ["a.example.com", "a.b.example.com", "example.com", "a.other.com"],
            ["a.example.com", "a.b.example.com"],
        ),
        ("*.example.com", ["*.a.example.com"], ["*.a.example.com"]),
        ("*.example.com", ["*.com"], ["*.example.com"]),
        ("*.example.com", ["*.other.com"], []),
        ("*.example.com", ["*.example.com"], ["*.example.com"]),
    ],
)
def test_intersection(listener: str | None, route: list[str], expected: list[str]) -> None:
    assert intersect(listener, route) == expected


@pytest.mark.parametrize(
    ("pattern", "hostname", "expected"),
    [
        (None, "anything.com", True),
        ("*.bar.com", "foo.bar.com", True),
        ("*.bar.com", "multiple.prefixes.bar.com", True),
        ("*.bar.com", "bar.com", False),
        ("*.bar.com", "foobar.com", False),
        ("bar.com", "bar.com", True),
        ("bar.com", "foo.bar.com", False),
    ],
)
def test_wildcards_span_labels(pattern: str | None, hostname: str, expected: bool) -> None:
    assert matches(pattern, hostname) is expected


def test_the_most_specific_listener_owns_a_hostname() -> None:
    listeners = [None, "*.example.com", "*.foo.example.com", "abc.foo.example.com"]
    assert owner(listeners, "bar.com") == ANY
    assert owner(listeners, "bar.example.com") == "*.example.com"
    assert owner(listeners, "bar.foo.example.com") == "*.foo.example.com"
    assert owner(listeners, "abc.foo.example.com") == "abc.foo.example.com"
    assert owner(listeners, "*.foo.example.com") == "*.foo.example.com"
    assert owner(listeners, ANY) == ANY
    assert owner(["a.com"], "b.com") is None
