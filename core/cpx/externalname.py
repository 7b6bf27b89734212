"""Which ExternalName Services may become Envoy clusters (Contour's rule, plus DNS resolution).

Every kind goes through the core here (:func:`cpx.servicecluster.lookup_service_port` reads the
:class:`ExternalNamePolicy` the source cache holds), so no plugin can forget the rule:

* ExternalName Services are refused unless ``--enable-external-name-service`` is given (Contour's
  ``enableExternalNameService``, off by default; GHSA-5ph6-qq5x-7jwc).
* Even then, a target Envoy would reach on its own host is refused: the well-known local names and
  literal addresses, and any name that *resolves* (``getaddrinfo``, as Envoy's STRICT_DNS cluster
  would) to a loopback, unspecified or link-local address.  The lookup is cached with a TTL and
  bounded by a timeout so that a slow resolver cannot hold up a build.

DNS can change after the check (Envoy re-resolves); the check narrows the window, the admin
interface on a Unix socket (:mod:`cpx.bootstrap`) removes the target.  See
docs/design/0007-externalname-and-admin.md.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence

import attrs

from cpx.records import OptionSpec

ENABLE_OPTION = OptionSpec(
    name="enable_external_name_service",
    help="Let routes of every kind use Services of type ExternalName (never ones that resolve to "
    "Envoy's own host). Applies to Ingress and HTTPProxy.",
    type=bool,
    default=False,
)
# Contour's blocklist plus the other names resolvers map to the loopback interface.
LOCALHOST_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "local.projectcontour.io", "ip6-localhost", "ip6-loopback"}
)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# name -> the addresses it resolves to; raises OSError (socket.gaierror) when it does not resolve.
Lookup = Callable[[str], Sequence[str]]


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


def system_lookup(name: str) -> Sequence[str]:
    """Every address the system resolver gives for ``name`` (both families, as Envoy's AUTO)."""
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@attrs.frozen
class Answer:
    """A lookup's outcome: the addresses, or ``None`` with ``error`` saying why there are none."""

    addresses: tuple[str, ...] | None
    error: str = ""


PENDING = Answer(None, "pending")


class Resolver:
    """Cached, time-bounded DNS lookups for the ExternalName check.

    A build waits at most ``timeout`` for a name not in the cache; a lookup still running after
    that answers :data:`PENDING` (refused for now) and finishes in the background, so a later
    build gets its answer without waiting.  Answers are kept ``ttl`` seconds (failures
    ``negative_ttl``); at most ``max_names`` are kept.
    """

    def __init__(
        self,
        lookup: Lookup = system_lookup,
        *,
        timeout: float = 1.0,
        ttl: float = 30.0,
        negative_ttl: float = 5.0,
        max_names: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self.timeout = timeout
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._max_names = max_names
        self._clock = clock
        self._lock = threading.Lock()
        # name -> (expiry, future); a running future has no expiry yet (inf).
        self._cache: dict[str, tuple[float, concurrent.futures.Future[Answer]]] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def resolve(self, name: str) -> Answer:
        with self._lock:
            entry = self._cache.get(name)
            now = self._clock()
            if entry is not None and (not entry[1].done() or entry[0] > now):
                future, fresh = entry[1], False
            else:
                future, fresh = self._submit(name, now), True
        if not future.done() and not fresh:
            return PENDING  # already waited for it once; do not hold up another build
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            return PENDING

    def _submit(self, name: str, now: float) -> concurrent.futures.Future[Answer]:
        if len(self._cache) >= self._max_names:
            self._evict(now)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="cpx-dns")
        future = self._pool.submit(self._run, name)
        self._cache[name] = (float("inf"), future)
        return future

    def _run(self, name: str) -> Answer:
        try:
            answer = Answer(tuple(dict.fromkeys(self._lookup(name))))
            ttl = self._ttl
        except (OSError, UnicodeError) as err:
            answer = Answer(None, str(err) or type(err).__name__)
            ttl = self._negative_ttl
        with self._lock:
            entry = self._cache.get(name)
            if entry is not None:
                self._cache[name] = (self._clock() + ttl, entry[1])
        return answer

    def _evict(self, now: float) -> None:
        expired = [n for n, (expiry, f) in self._cache.items() if f.done() and expiry <= now]
        for name in expired or list(self._cache)[: max(1, self._max_names // 8)]:
            del self._cache[name]


_SYSTEM_RESOLVER = Resolver()


@attrs.frozen
class ExternalNamePolicy:
    """Whether ExternalName Services are enabled, and the resolver the loopback check uses."""

    enabled: bool = False
    resolver: Resolver = attrs.field(default=_SYSTEM_RESOLVER, eq=False, repr=False)

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
                f"{ref} is an ExternalName service whose name {_q(name)} did not resolve within "
                f"{self.resolver.timeout:g}s; it is refused until cpx can check that it does not "
                "point to localhost"
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
    raise ValueError(f"{ENABLE_OPTION.flag}: expected true or false, got {value!r}")
