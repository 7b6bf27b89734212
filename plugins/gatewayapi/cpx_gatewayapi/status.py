"""The status writers' merges: what cpx computed, put into what the object's status holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_gateway_class(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return computed


def merge_gateway(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return computed


def merge_route(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return computed
