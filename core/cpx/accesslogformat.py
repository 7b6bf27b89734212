"""Contour's access log formats (``apis/projectcontour/v1alpha1/accesslog.go``): the JSON fields
and their Envoy command operators, and the checks of fields and format strings, with Contour's
messages.  Pure values; :mod:`cpx.xds.envoy.listener` turns them into Envoy's access log."""

from __future__ import annotations

import re
from collections.abc import Iterable

ACCESS_LOG_FORMATS = ("envoy", "json")

# Contour's DefaultAccessLogJSONFields, in its order.
DEFAULT_JSON_FIELDS = (
    "@timestamp",
    "authority",
    "bytes_received",
    "bytes_sent",
    "downstream_local_address",
    "downstream_remote_address",
    "duration",
    "method",
    "path",
    "protocol",
    "request_id",
    "requested_server_name",
    "response_code",
    "response_flags",
    "uber_trace_id",
    "upstream_cluster",
    "upstream_host",
    "upstream_local_address",
    "upstream_service_time",
    "user_agent",
    "x_forwarded_for",
    "grpc_status",
    "grpc_status_number",
)

# Contour's jsonFields: field names with a canonical operator.
_ROUTE_METADATA = "%METADATA(ROUTE:envoy.access_loggers.file:io.projectcontour.{})%"
JSON_FIELDS = {
    "@timestamp": "%START_TIME%",
    "ts": "%START_TIME%",
    "authority": "%REQ(:AUTHORITY)%",
    "method": "%REQ(:METHOD)%",
    "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "uber_trace_id": "%REQ(UBER-TRACE-ID)%",
    "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    "user_agent": "%REQ(USER-AGENT)%",
    "x_forwarded_for": "%REQ(X-FORWARDED-FOR)%",
    "x_trace_id": "%REQ(X-TRACE-ID)%",
    "tls_ja3_fingerprint": "%TLS_JA3_FINGERPRINT%",
    "tls_ja4_fingerprint": "%TLS_JA4_FINGERPRINT%",
    **{f"contour_config_{part}": _ROUTE_METADATA.format(part) for part in ("kind", "namespace", "name")},
}

# Contour's envoySimpleOperators: operators without arguments.
_SIMPLE_OPERATORS = """BYTES_RECEIVED BYTES_SENT CONNECTION_ID CONNECTION_TERMINATION_DETAILS
    DOWNSTREAM_DIRECT_REMOTE_ADDRESS DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT
    DOWNSTREAM_DIRECT_REMOTE_PORT DOWNSTREAM_HEADER_BYTES_RECEIVED DOWNSTREAM_HEADER_BYTES_SENT
    DOWNSTREAM_LOCAL_ADDRESS DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT DOWNSTREAM_LOCAL_PORT
    DOWNSTREAM_LOCAL_SUBJECT DOWNSTREAM_LOCAL_URI_SAN DOWNSTREAM_PEER_CERT DOWNSTREAM_PEER_CERT_V_END
    DOWNSTREAM_PEER_CERT_V_START DOWNSTREAM_PEER_FINGERPRINT_1 DOWNSTREAM_PEER_FINGERPRINT_256
    DOWNSTREAM_PEER_ISSUER DOWNSTREAM_PEER_SERIAL DOWNSTREAM_PEER_SUBJECT DOWNSTREAM_PEER_URI_SAN
    DOWNSTREAM_REMOTE_ADDRESS DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT DOWNSTREAM_REMOTE_PORT
    DOWNSTREAM_TLS_CIPHER DOWNSTREAM_TLS_SESSION_ID DOWNSTREAM_TLS_VERSION DOWNSTREAM_WIRE_BYTES_RECEIVED
    DOWNSTREAM_WIRE_BYTES_SENT DURATION FILTER_CHAIN_NAME GRPC_STATUS GRPC_STATUS_NUMBER HOSTNAME
    LOCAL_REPLY_BODY PROTOCOL REQUEST_HEADERS_BYTES REQUESTED_SERVER_NAME REQUEST_DURATION
    REQUEST_TX_DURATION RESPONSE_CODE RESPONSE_CODE_DETAILS RESPONSE_DURATION RESPONSE_FLAGS
    RESPONSE_HEADERS_BYTES RESPONSE_TRAILERS_BYTES RESPONSE_TX_DURATION ROUTE_NAME SPAN_ID START_TIME
    TLS_JA3_FINGERPRINT TLS_JA4_FINGERPRINT TRACE_ID UPSTREAM_CLUSTER UPSTREAM_FILTER_STATE
    UPSTREAM_HEADER_BYTES_RECEIVED UPSTREAM_HEADER_BYTES_SENT UPSTREAM_HOST UPSTREAM_LOCAL_ADDRESS
    UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT UPSTREAM_LOCAL_PORT UPSTREAM_PEER_CERT UPSTREAM_PEER_CERT_V_END
    UPSTREAM_PEER_CERT_V_START UPSTREAM_PEER_ISSUER UPSTREAM_PEER_SUBJECT UPSTREAM_PROTOCOL
    UPSTREAM_REMOTE_ADDRESS UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT UPSTREAM_REMOTE_PORT
    UPSTREAM_REQUEST_ATTEMPT_COUNT UPSTREAM_TLS_CIPHER UPSTREAM_TLS_SESSION_ID UPSTREAM_TLS_VERSION
    UPSTREAM_TRANSPORT_FAILURE_REASON UPSTREAM_WIRE_BYTES_RECEIVED UPSTREAM_WIRE_BYTES_SENT
    VIRTUAL_CLUSTER_NAME"""
SIMPLE_OPERATORS = frozenset(_SIMPLE_OPERATORS.split())
# Contour's envoyComplexOperators: operator -> (arguments optional, truncation disallowed).
COMPLEX_OPERATORS = {
    "ENVIRONMENT": (False, False),
    "METADATA": (False, False),
    "REQ": (False, False),
    "REQ_WITHOUT_QUERY": (False, False),
    "RESP": (False, False),
    "START_TIME": (True, True),
    "TRAILER": (False, False),
}
# Contour's commandOperatorRegexp: whole operator, name, arguments, truncation length.
_COMMAND_OPERATOR = re.compile(r"%(([A-Z0-9_]+)(\([^)]+\)(:[0-9]+)?)?%)?")
# The formatter extensions an operator needs (Contour's AccessLogFormatterExtensions).
FORMATTER_EXTENSIONS = {
    "REQ_WITHOUT_QUERY": "envoy.formatter.req_without_query",
    "METADATA": "envoy.formatter.metadata",
}


def _check_operators(text: str) -> None:
    for found in _COMMAND_OPERATOR.finditer(text):
        token, name, arguments, truncation = found.group(0), found.group(2), found.group(3), found.group(4)
        if not name:
            raise ValueError(f"invalid Envoy format: {token}")
        if name not in SIMPLE_OPERATORS and name not in COMPLEX_OPERATORS:
            raise ValueError(f"invalid Envoy format: {token}, invalid Envoy operator: {name}")
        optional, no_truncation = COMPLEX_OPERATORS.get(name, (True, False))
        if not optional and not arguments:
            raise ValueError(f"invalid Envoy format: {token}, arguments required for operator: {name}")
        if no_truncation and truncation:
            raise ValueError(f"invalid Envoy format: {token}, operator {name} cannot have truncation length")


def format_string(value: str) -> str:
    """Contour's AccessLogFormatString check ("": Envoy's default format)."""
    if not value:
        return value
    try:
        _check_operators(value)
    except ValueError as err:
        raise ValueError(f"invalid access log format: {err}") from None
    if not value.endswith("\n"):
        raise ValueError("invalid access log format: must end in newline")
    return value


def json_field(item: str) -> tuple[str, str]:
    """One of Contour's json-fields: a known name, a simple operator's name in any case, or
    ``name=format``; the field's name and its Envoy format (Contour's AsFieldMap and Validate)."""
    name, equals, given = item.partition("=")
    if equals:
        operator = given
    elif item in JSON_FIELDS:
        operator = JSON_FIELDS[item]
    elif item.upper() in SIMPLE_OPERATORS:
        operator = f"%{item.upper()}%"
    else:
        raise ValueError(f"invalid JSON log field name {item}")
    if not operator:
        raise ValueError(f"invalid JSON log field name {name}")
    if JSON_FIELDS.get(name) != operator:
        try:
            _check_operators(operator)
        except ValueError as err:
            raise ValueError(f"invalid JSON field: {err}") from None
    return name, operator


def json_format(fields: Iterable[str]) -> dict[str, str]:
    """The JSON log's fields (a later field of the same name wins, as in Contour's map)."""
    return dict(json_field(item) for item in fields)


def formatter_extensions(formats: Iterable[str]) -> tuple[str, ...]:
    """The formatter extensions the operators in ``formats`` need, in a stable order."""
    text = "".join(formats)
    return tuple(ext for op, ext in FORMATTER_EXTENSIONS.items() if f"%{op}(" in text)
