"""Plain JSON requests through the ``kubernetes`` package's ``ApiClient``, for any kind.

The generated typed APIs need a model class per kind and deserialise every response into it;
status writing and leader election only need a path (built from a :class:`GroupVersionKind`) and
dicts, for core and custom groups alike.  The calls block: run them in a thread.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from kubernetes.client.exceptions import ApiException

from cpx.objects import GroupVersionKind

MERGE_PATCH = "application/merge-patch+json"

__all__ = ["MERGE_PATCH", "ApiException", "collection_path", "object_path", "request_json", "status_code"]


def collection_path(gvk: GroupVersionKind, namespace: str | None = None) -> str:
    """``/api/v1/namespaces/ns/services`` or ``/apis/group/version/namespaces/ns/plural``."""
    base = f"/apis/{gvk.group}/{gvk.version}" if gvk.group else f"/api/{gvk.version}"
    if gvk.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    return f"{base}/{gvk.plural}"


def object_path(gvk: GroupVersionKind, namespace: str | None, name: str, subresource: str = "") -> str:
    path = f"{collection_path(gvk, namespace)}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def request_json(
    api_client: Any,
    method: str,
    path: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    timeout: float | None = None,
) -> Any:
    """One request; returns the decoded JSON answer, raises ApiException for a non-2xx one."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    method_, url, headers_, body_, post = api_client.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or None,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(
        method_, url, header_params=headers_, body=body_, post_params=post, _request_timeout=timeout
    )
    data = response.read()
    if not 200 <= response.status <= 299:
        text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        raise ApiException(status=response.status, reason=f"{response.reason}: {text[:500]}")
    return json.loads(data) if data else None


def status_code(err: BaseException) -> int | None:
    """The HTTP status of a failed request, or None when it never got an answer."""
    status = getattr(err, "status", None)
    return status if isinstance(status, int) and isinstance(err, ApiException) else None
