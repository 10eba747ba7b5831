"""Connection, retry and security settings of a client.

The defaults suit a service calling idem on its request path, as the Rust SDK's do: a call
that cannot be answered within about 15 s is better reported (as ``OutcomeUnknown`` or
``Unavailable``) than held, since the service's own caller is waiting too. Batch workers may
want a larger budget; tests want tiny backoffs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of transport failures, ``NOT_LEADER`` redirects and
    ``UNAVAILABLE_OUTCOME_UNKNOWN`` answers.

    Every retry re-sends the very same request (same key, holder, fence, fingerprint): the
    server's commands are idempotent for the same holder and fence, so a retry of a request
    that did take effect gets the same answer instead of a second effect. Definite answers
    (``STALE_FENCE``, ``INVALID_*``, any claim outcome) are never retried.
    """

    max_attempts: int = 8
    """Most attempts of one call, the first included (1 = no retry)."""
    initial_backoff: float = 0.05
    """Wait before the first retry, in seconds; doubles on every retry."""
    max_backoff: float = 2.0
    """Longest wait between two attempts, in seconds."""
    total_budget: float = 15.0
    """No new attempt starts after this many seconds since the call began."""

    def backoff(self, retry: int) -> float:
        """The wait before retry number `retry` (1 for the first), before jitter."""
        return float(min(self.initial_backoff * float(2 ** max(retry - 1, 0)), self.max_backoff))

    def jittered(self, retry: int) -> float:
        """A uniform wait in ``[backoff/2, backoff]``, so clients that failed together do not
        retry together."""
        full = self.backoff(retry)
        return random.uniform(full / 2, full)


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings (etcd's names): the CA that signed the nodes' certificates and, for mutual
    TLS, the client's certificate and key. Files are PEM; ``None`` uses the system roots / no
    client certificate."""

    cacert: str | Path | None = None
    cert: str | Path | None = None
    key: str | Path | None = None
    server_name: str | None = None
    """Overrides the name checked against the node's certificate (e.g. for IP endpoints)."""

    def read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """The PEM bytes of (CA, key, certificate chain), as grpc wants them."""

        def load(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        return load(self.cacert), load(self.key), load(self.cert)


@dataclass(frozen=True)
class ClientOptions:
    """Settings of a :class:`~idem_client.Client` or :class:`~idem_client.AsyncClient`."""

    connect_timeout: float = 3.0
    """Time allowed to open a connection to one endpoint, in seconds."""
    request_timeout: float = 10.0
    """Time allowed for one attempt of a call, in seconds (``wait`` adds its budget)."""
    keep_alive_interval: float = 30.0
    """Interval of HTTP/2 keep-alive pings, in seconds."""
    keep_alive_timeout: float = 10.0
    """How long a keep-alive ping may go unanswered before the connection is dropped."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """How failed attempts are retried."""
    region: str | None = None
    """The region this client runs in: a tenant's first call, while its leader is unknown,
    starts at an endpoint of this region (learned once from ``Admin.Status``)."""

    def channel_options(self) -> list[tuple[str, int | str]]:
        """grpc channel arguments for these settings."""
        return [
            ("grpc.keepalive_time_ms", int(self.keep_alive_interval * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.keep_alive_timeout * 1000)),
            # grpc core uses this as the connect timeout of one connection attempt.
            ("grpc.min_reconnect_backoff_ms", int(self.connect_timeout * 1000)),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
            ("grpc.client_idle_timeout_ms", 300_000),
        ]
