"""Upstream HTTPRouteHTTPSListenerDetectMisdirectedRequests
(conformance/tests/httproute-https-listener-detect-misdirected-requests.go).

HTTPS listeners sharing port 443, over HTTP/2 (where a connection may be reused for another
Host): a Host owned by another listener than the one the SNI chose gets a 421, a Host nobody owns
a 404 (or 421 where the SNI's listener has a hostname).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import HTTPS_GATEWAY, INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, Conformance, Expect

MANIFEST = "httproute-https-listener-detect-misdirected-requests.yaml"
ROUTES = [(INFRA_NS, f"https-listener-detect-misdirected-requests-test-{n}") for n in range(1, 5)]
# (SNI, Host, status, backend)
CASES = [
    ("example.org", "example.org", 200, INFRA_V1),
    ("example.org", "second-example.org", 421, ""),
    ("example.org", "unknown-example.org", 404, ""),
    ("second-example.org", "second-example.org", 200, INFRA_V2),
    ("second-example.org", "example.org", 421, ""),
    ("second-example.org", "unknown-example.org", 421, ""),
    ("third-example.wildcard.org", "third-example.wildcard.org", 200, INFRA_V3),
    ("third-example.wildcard.org", "fith-example.wildcard.org", 200, INFRA_V3),
    ("third-example.wildcard.org", "fourth-example.wildcard.org", 421, ""),
    ("third-example.wildcard.org", "second-example.org", 421, ""),
    ("third-example.wildcard.org", "unknown-example.org", 421, ""),
    ("fourth-example.wildcard.org", "fourth-example.wildcard.org", 200, INFRA_V1),
    ("fourth-example.wildcard.org", "fith-example.wildcard.org", 421, ""),
    ("unknown-example.org", "example.org", 200, INFRA_V1),
    ("unknown-example.org", "unknown-example.org", 404, ""),
]


def test_httproute_https_listener_detect_misdirected_requests(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(HTTPS_GATEWAY, *ROUTES)
    upstream.expect_all(
        HTTPS_GATEWAY,
        [
            Expect(
                host=host,
                sni=sni,
                h2=True,
                path="/detect-misdirected-requests",
                status=(status,),
                backend=backend,
                namespace=INFRA_NS,
            )
            for sni, host, status, backend in CASES
        ],
        port=443,
        scheme="https",
    )
