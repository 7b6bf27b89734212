"""status.loadBalancer from --ingress-status-address, and the status writer's merge."""

from __future__ import annotations

import pytest

from cpx_ingress.status import load_balancer_status, merge_status, parse_status_addresses


def test_addresses() -> None:
    assert parse_status_addresses(None) == []
    assert parse_status_addresses("192.0.2.1") == [{"ip": "192.0.2.1"}]
    assert parse_status_addresses(" 2001:db8::1 , lb.example.com,") == [
        {"ip": "2001:db8::1"},
        {"hostname": "lb.example.com"},
    ]
    assert parse_status_addresses(["a.example.com", "192.0.2.2,b.example.com"]) == [
        {"hostname": "a.example.com"},
        {"ip": "192.0.2.2"},
        {"hostname": "b.example.com"},
    ]


@pytest.mark.parametrize("value", ["not a host", "http://lb.example.com", "-lb.example.com"])
def test_invalid_addresses(value: str) -> None:
    with pytest.raises(ValueError, match="neither an IP address nor a host name"):
        parse_status_addresses(value)


def test_load_balancer_status() -> None:
    assert load_balancer_status(None) is None
    assert load_balancer_status(" , ") is None
    assert load_balancer_status("192.0.2.1") == {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}


def test_merge() -> None:
    lb = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    assert merge_status({}, lb) == lb
    assert merge_status(lb, lb) is None  # unchanged: nothing to write
    assert merge_status(lb, {}) is None  # nothing computed: leave what is there
    moved = {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}
    assert merge_status(lb, moved) == moved
