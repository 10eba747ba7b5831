"""Endpoints, routes and retry bookkeeping shared by the sync and asyncio clients.

Any idem node accepts any request, but writes are cheapest at the leader of the Raft group
that decides them: a follower forwards them (and says so with ``leader-addr`` response
metadata) or answers ``NOT_LEADER`` with the leader's address. So, like the Rust SDK, the
router keeps a **route per tenant** (the node that served the tenant's last call itself, or
the leader named for it) and a **default route** (the last leader learned) for calls that
name no tenant. A node that cannot be reached is skipped round-robin and the tenant's route
forgotten. With a **region** set, a tenant's first call while it has no route starts at an
endpoint of that region (regions learned once from ``Admin.Status``).

Only decisions live here; the flavours own the channels and the waiting, so the sync and
asyncio clients behave identically by construction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._pb.idem.v1 import admin_pb2
from ._status import Failure, Kind
from .errors import IdemError, OutcomeUnknown, Unavailable, invalid
from .options import ClientOptions, RetryPolicy

MAX_ENDPOINTS = 64
"""Most endpoints kept (configured ones plus leader hints and region members)."""
MAX_ROUTES = 10_000
"""Most tenant routes kept; the table starts over when full."""
FAILED_FOR = 10.0
"""How long the region preference skips an endpoint that could not be reached (s)."""
RELEARN_AFTER = 30.0
"""How long before regions are asked again when no endpoint answered (s)."""


def normalize(endpoint: str, secure_default: bool) -> tuple[str, str, bool]:
    """``(uri, grpc target, secure)`` of an endpoint; a missing scheme takes the client's."""
    text = endpoint.strip().rstrip("/")
    if text.startswith("https://"):
        return text, text.removeprefix("https://"), True
    if text.startswith("http://"):
        return text, text.removeprefix("http://"), False
    if not text or "/" in text or " " in text:
        raise invalid("INVALID_ARGUMENT", f"malformed endpoint {endpoint!r}")
    scheme = "https" if secure_default else "http"
    return f"{scheme}://{text}", text, secure_default


@dataclass(eq=False)
class Node:
    """One endpoint: its address, its channel (opened by the flavour on first use), its region
    once learned and when it last could not be reached."""

    uri: str
    target: str
    secure: bool
    channel: Any = None
    region: str | None = None
    failed_at: float | None = None

    def failed_recently(self) -> bool:
        """Whether the node could not be reached within the last :data:`FAILED_FOR`."""
        return self.failed_at is not None and time.monotonic() - self.failed_at < FAILED_FOR

    def reached(self, ok: bool) -> None:
        """Notes whether the last attempt reached the node."""
        self.failed_at = None if ok else time.monotonic()


@dataclass
class Router:
    """The endpoint set, the default route and the tenant routes."""

    options: ClientOptions
    secure: bool
    nodes: list[Node] = field(default_factory=list)
    preferred: int = 0
    routes: dict[str, int] = field(default_factory=dict)
    learned: str = "not yet"
    learned_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def of(endpoints: Sequence[str], options: ClientOptions, secure: bool) -> Router:
        """A router over `endpoints` (at least one)."""
        if isinstance(endpoints, (str, bytes)) or not endpoints:
            raise invalid("INVALID_ARGUMENT", "endpoints must be a non-empty list of host:port")
        router = Router(options, secure)
        for endpoint in endpoints:
            router.index_of(endpoint, add=True)
        return router

    def endpoints(self) -> list[str]:
        """Every known endpoint URI, configured ones first."""
        return [n.uri for n in self.nodes]

    def node(self, index: int) -> tuple[int, Node]:
        """The node at `index` (wrapped)."""
        with self.lock:
            index %= len(self.nodes)
            return index, self.nodes[index]

    def route_of(self, tenant: str) -> str | None:
        """The endpoint a tenant's next call starts at, once the client learned one."""
        index = self.routes.get(tenant)
        return None if index is None else self.nodes[index].uri

    def start(self, tenant: str | None, attempt: int) -> tuple[int, Node]:
        """Where an attempt starts: the tenant's route, else (first attempt, region set) an
        endpoint of the client's region, else the default route."""
        if tenant is not None:
            known = self.routes.get(tenant)
            if known is not None:
                return self.node(known)
            if attempt == 1:
                found = self.in_region()
                if found is not None:
                    return found
        return self.node(self.preferred)

    def in_region(self) -> tuple[int, Node] | None:
        """An endpoint of the client's region not failed recently (the default route first)."""
        region = self.options.region
        if region is None:
            return None
        index, default = self.node(self.preferred)
        if default.region == region and not default.failed_recently():
            return index, default
        for i, node in enumerate(self.nodes):
            if node.region == region and not node.failed_recently():
                return i, node
        return None

    def needs_regions(self) -> bool:
        """True when the region preference is on and the regions should be (re)learned."""
        if self.options.region is None or self.learned == "done":
            return False
        return self.learned == "not yet" or time.monotonic() - self.learned_at >= RELEARN_AFTER

    def note_regions(self, answered: Node, status: admin_pb2.StatusResponse | None) -> None:
        """Records an ``Admin.Status`` answer (or that none came): the answering node's region
        and each member's; members of the client's region that are unknown are added."""
        self.learned_at = time.monotonic()
        if status is None:
            self.learned = "failed"
            return
        self.learned = "done"
        if status.region:
            answered.region = status.region
        for member in status.membership:
            if not member.region or not member.api_addr:
                continue
            add = member.region == self.options.region
            index = self.index_of(member.api_addr, add=add)
            if index is not None:
                self.nodes[index].region = member.region

    def index_of(self, addr: str, *, add: bool) -> int | None:
        """The index of the endpoint at `addr`, added when new and `add` (and not full)."""
        uri, target, secure = normalize(addr, self.secure)
        with self.lock:
            for i, node in enumerate(self.nodes):
                if node.uri == uri:
                    return i
            if not add or len(self.nodes) >= MAX_ENDPOINTS:
                return None
            self.nodes.append(Node(uri, target, secure))
            return len(self.nodes) - 1

    def set_route(self, tenant: str | None, index: int) -> None:
        """Makes `index` the tenant's route."""
        if tenant is None or self.routes.get(tenant) == index:
            return
        if len(self.routes) >= MAX_ROUTES and tenant not in self.routes:
            self.routes.clear()
        self.routes[tenant] = index

    def forget_route(self, tenant: str | None, index: int | None) -> None:
        """Forgets the tenant's route if it still points at `index` (any when ``None``)."""
        if tenant is not None and (index is None or self.routes.get(tenant) == index):
            self.routes.pop(tenant, None)

    def move_on(self, tenant: str | None, index: int) -> None:
        """After a failure at `index`: the default route moves past it, the tenant's route is
        forgotten if it pointed there."""
        with self.lock:
            if self.preferred % len(self.nodes) == index:
                self.preferred = (index + 1) % len(self.nodes)
        self.forget_route(tenant, index)

    def redirect(self, tenant: str | None, addr: str, source: Node) -> bool:
        """Follows a leader hint naming another node than `source`; True when it did."""
        try:
            uri, _, _ = normalize(addr, self.secure)
        except IdemError:
            return False
        if uri == source.uri:
            return False
        index = self.index_of(addr, add=True)
        if index is None:
            return False
        self.preferred = index
        self.set_route(tenant, index)
        return True

    def follow_answer(self, tenant: str | None, leader_addr: str | None, index: int, node: Node) -> None:
        """Learns from a successful answer: a forwarding follower names the leader; a node
        that served the tenant itself becomes its route."""
        node.reached(True)
        if not (leader_addr and self.redirect(tenant, leader_addr, node)):
            self.set_route(tenant, index)


@dataclass
class Attempts:
    """The retry bookkeeping of one call: decides, after each failed attempt, how long to wait
    before the next one, or raises the error the call ends with."""

    router: Router
    tenant: str | None
    write: bool
    policy: RetryPolicy
    routed: bool = True
    attempt: int = 0
    maybe_sent: bool = False
    deadline: float = field(default=0.0)
    later: IdemError | None = None

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.policy.total_budget

    def next(self) -> int:
        """Counts a new attempt; returns its number (1 for the first)."""
        self.attempt += 1
        return self.attempt

    def after(self, failure: Failure, index: int, node: Node) -> float:
        """The wait before the next attempt after `failure` on `node`; raises when the call
        must end (a definite answer, or the attempts or the budget ran out)."""
        if failure.kind is Kind.FINAL:
            raise failure.error
        unreachable = failure.kind in (Kind.NOT_SENT, Kind.MAYBE_SENT)
        if self.routed:
            node.reached(not unreachable)
        wait = self.policy.jittered(self.attempt)
        self.later = None
        if failure.kind is Kind.MAYBE_SENT:
            # A leader cut off from its quorum keeps answering OUTCOME_UNKNOWN: let another
            # node redirect us.
            self.maybe_sent = True
            wait = max(wait, failure.retry_after or 0.0)
            self._move_on(index)
        elif failure.kind is Kind.NOT_SENT:
            self._move_on(index)
        elif failure.kind is Kind.NOT_LEADER:
            moved = (
                self.routed
                and failure.leader_addr is not None
                and self.router.redirect(self.tenant, failure.leader_addr, node)
            )
            if moved:
                wait = 0.0
            else:
                self._move_on(index)
        else:  # LATER, THROTTLED, SHED: nothing ran; come back after the server's hint
            if failure.kind is Kind.LATER:  # the tenant's home is changing, its route may be stale
                self.router.forget_route(self.tenant, None)
            elif failure.kind is Kind.SHED:  # this node is full, another may not be
                self._move_on(index)
            wait = max(wait, failure.retry_after or 0.0)
            self.later = failure.error
        if self.attempt >= self.policy.max_attempts or time.monotonic() + wait > self.deadline:
            raise self._exhausted(failure, node)
        return wait

    def _move_on(self, index: int) -> None:
        if self.routed:
            self.router.move_on(self.tenant, index)

    def _exhausted(self, failure: Failure, node: Node) -> IdemError:
        if self.later is not None and not (self.write and self.maybe_sent):
            return self.later
        message = f"{self.attempt} attempt(s), last on {node.uri}: {failure.error.message}"
        if self.write and self.maybe_sent:
            return OutcomeUnknown("UNAVAILABLE_OUTCOME_UNKNOWN", message)
        return Unavailable("UNAVAILABLE", message)
