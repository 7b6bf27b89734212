"""A real rate limit service (envoy.service.ratelimit.v3, grpcio) for the end-to-end tests: it
counts the descriptors Envoy sends and answers OVER_LIMIT once a descriptor was seen more than
``limit`` times in its domain."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent import futures

import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

Descriptor = tuple[tuple[str, str], ...]


class CountingRateLimitService(rls_pb2_grpc.RateLimitServiceServicer):  # type: ignore[misc]
    """Allows ``limit`` requests per (domain, descriptor); remembers every request's descriptors."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: list[tuple[str, tuple[Descriptor, ...]]] = []
        self.counts: Counter[tuple[str, Descriptor]] = Counter()
        self._lock = threading.Lock()

    def ShouldRateLimit(
        self, request: rls_pb2.RateLimitRequest, context: grpc.ServicerContext
    ) -> rls_pb2.RateLimitResponse:
        descriptors = tuple(tuple((e.key, e.value) for e in d.entries) for d in request.descriptors)
        response = rls_pb2.RateLimitResponse(overall_code=rls_pb2.RateLimitResponse.OK)
        with self._lock:
            self.seen.append((request.domain, descriptors))
            for descriptor in descriptors:
                self.counts[request.domain, descriptor] += 1
                used = self.counts[request.domain, descriptor]
                over = used > self.limit
                status = response.statuses.add(
                    code=rls_pb2.RateLimitResponse.OVER_LIMIT if over else rls_pb2.RateLimitResponse.OK,
                    limit_remaining=max(self.limit - used, 0),
                )
                status.current_limit.requests_per_unit = self.limit
                status.current_limit.unit = rls_pb2.RateLimitResponse.RateLimit.MINUTE
                if over:
                    response.overall_code = rls_pb2.RateLimitResponse.OVER_LIMIT
        return response

    def reset(self) -> None:
        with self._lock:
            self.seen.clear()
            self.counts.clear()


class RateLimitServer:
    """The service on 127.0.0.1, over h2c."""

    def __init__(self, limit: int, port: int = 0) -> None:
        self.service = CountingRateLimitService(limit)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        rls_pb2_grpc.add_RateLimitServiceServicer_to_server(self.service, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")

    def start(self) -> RateLimitServer:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=None).wait()
