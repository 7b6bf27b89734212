"""Which ExternalName Services may become Envoy clusters (Contour's rule, plus DNS resolution).

Every kind goes through the core here (:func:`cpx.dag.services.lookup_service_port` reads the
:class:`ExternalNamePolicy` the source cache holds), so no plugin can forget the rule:

* ExternalName Services are refused unless ``--enable-external-name-service`` is given (Contour's
  ``enableExternalNameService``, off by default; GHSA-5ph6-qq5x-7jwc).
* Even then, a target Envoy would reach on its own host is refused: the well-known local names and
  literal addresses, and any name that *resolves* (``getaddrinfo``, as Envoy's STRICT_DNS cluster
  would) to a loopback, unspecified or link-local address.  Lookups are cached and time-bounded
  (:class:`cpx.sources.resolver.Resolver`) so that a slow resolver cannot hold up a build.

DNS can change after the check (Envoy re-resolves); the check narrows the window, the admin
interface on a Unix socket (:mod:`cpx.xds.envoy.bootstrap`) removes the target.  See
docs/design/0007-externalname-and-admin.md.
"""

from __future__ import annotations

import ipaddress
import json
import socket

import attrs

from cpx.sources.resolver import PENDING, Resolver

# The core's option (declared by the builtin plugin): ExternalName Services are refused unless set.
ENABLE_OPTION_NAME = "enable_external_name_service"
ENABLE_OPTION_HELP = (
    "Let routes of every kind use Services of type ExternalName (never ones that resolve to "
    "Envoy's own host). Applies to Ingress and HTTPProxy."
)
# Contour's blocklist plus the other names resolvers map to the loopback interface.
LOCALHOST_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "local.projectcontour.io", "ip6-localhost", "ip6-loopback"}
)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def forbidden_address(address: IPAddress) -> bool:
    """Loopback, unspecified (both reach the local host) or link-local (node metadata services)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified or address.is_link_local


def parse_address(host: str) -> IPAddress | None:
    """A literal address, including the legacy IPv4 spellings resolvers accept (127.1, 0x7f.1)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def points_to_localhost(name: str) -> bool:
    """Whether ``name`` is a local name or a literal local address (no DNS lookup)."""
    host = name.strip().lower().rstrip(".").strip("[]")
    if host in LOCALHOST_NAMES or host.endswith(".localhost"):
        return True
    address = parse_address(host)
    return address is not None and forbidden_address(address)


@attrs.frozen
class ExternalNamePolicy:
    """Whether ExternalName Services are enabled, and the resolver the loopback check uses."""

    enabled: bool = False
    resolver: Resolver = attrs.field(factory=Resolver, eq=False, repr=False)

    def refusal(self, ref: str, name: str) -> str | None:
        """Why the ExternalName Service ``ref`` (namespace/name) targeting ``name`` is refused,
        in Contour's words; None when it may be used."""
        if not self.enabled:
            return (
                f"{ref} is an ExternalName service, these are not currently enabled. "
                "See the config.enableExternalNameService config file setting"
            )
        local = f"{ref} is an ExternalName service that points to localhost, this is not allowed"
        if points_to_localhost(name):
            return local
        answer = self.resolver.resolve(name.strip())
        if answer is PENDING:
            return (
                f"{ref} is an ExternalName service whose name {_q(name)} has not resolved yet; it is "
                "refused until cpx can check that it does not point to localhost"
            )
        for text in answer.addresses or ():
            address = parse_address(text)
            if address is not None and forbidden_address(address):
                return f"{local} ({_q(name)} resolves to {text})"
        # Not resolvable now: Envoy cannot connect either (and re-checked at every rebuild).
        return None


def _q(text: str) -> str:
    """Go's %q, which Contour's messages use."""
    return json.dumps(text, ensure_ascii=False)


def parse_enabled(value: object) -> bool:
    """The option's value; anything but a bool (or unset) is refused."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    flag = "--" + ENABLE_OPTION_NAME.replace("_", "-")
    raise ValueError(f"{flag}: expected true or false, got {value!r}")
