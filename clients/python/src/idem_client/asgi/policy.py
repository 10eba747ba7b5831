"""What the middleware does on a route: the per-route policy.

One :class:`IdempotencyPolicy` applies to every covered route unless a route has its own
(``routes={"POST /v1/charges": IdempotencyPolicy(risk=Risk.HIGH, wait_budget=5)}``), keyed by
the endpoint idem sees: the method and the route template.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..types import Risk
from .replay import Renderer


@dataclass(frozen=True)
class IdempotencyPolicy:
    """The behaviour of the middleware on a route."""

    required: bool = True
    """A request without ``Idempotency-Key`` is refused (400); else it runs without protection."""
    wait_budget: float = 0.0
    """Seconds a duplicate of an in-flight request is held (``Wait``) before 409; 0: 409 at once."""
    risk: Risk | None = None
    """Risk class of new records (default: the server's endpoint policy)."""
    lease: float | None = None
    """Lease of new records in seconds (default: the server's, 30 s); renewed every third of it."""
    retention: float | None = None
    """How long a finished request is replayed, in seconds (default: the server's, 24 h)."""
    reconciliation_status: int = 409
    """Status answered while a record waits for reconciliation (409, or 503)."""
    complete_statuses: frozenset[int] = frozenset()
    """4xx statuses stored as a result (replayed as is) instead of a terminal failure."""
    replay_headers: tuple[str, ...] = ("location",)
    """Response headers stored and replayed."""
    body_fields: tuple[str, ...] = ()
    """Top-level members of a JSON response body stored as resource fields (unless the
    handler called ``set_resource``); replayed by the default renderer."""
    resource_id_field: str = "id"
    """The JSON response member stored as the resource id (unless ``set_resource``)."""
    render: Renderer | None = None
    """Renders a replayed success's body: ``async (result, operation_id) -> (body, content
    type)``, e.g. the resource read again by id. Default: ``{"id", "version", "operation_id",
    ...fields}`` as JSON."""
    schema_version: int = 1
    """The request schema version stored in the fingerprint."""
