"""The typed values of the API: enums by their API names, and frozen dataclasses.

The wire types (generated from ``proto/idem/v1``) are an implementation detail of the
client: callers see these instead, so an unset proto field never passes for a real value
(an owned claim always has a fence, a replayed claim always has its result) and enums are
compared by name (``ClaimOutcome.ACQUIRED``), not by number.

Durations given to the client are seconds (``float``); instants read from the server keep the
wire's Unix epoch milliseconds (``*_at_ms``, leader time), so nothing is lost in conversion.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Risk(enum.Enum):
    """How costly a second execution would be (fixed on the record at its first claim)."""

    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"


class State(enum.Enum):
    """The lifecycle state of a record."""

    PENDING = "PENDING"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    RETRYABLE_FAILURE = "RETRYABLE_FAILURE"
    TERMINAL_FAILURE = "TERMINAL_FAILURE"
    CANCELLED = "CANCELLED"
    NEEDS_RECONCILIATION = "NEEDS_RECONCILIATION"

    @property
    def terminal(self) -> bool:
        """True for COMPLETED, TERMINAL_FAILURE and CANCELLED."""
        return self in (State.COMPLETED, State.TERMINAL_FAILURE, State.CANCELLED)


class Stage(enum.Enum):
    """The external-call ledger: how far the side effect has gone."""

    NOT_CALLED = "NOT_CALLED"
    CALLING = "CALLING"
    REMOTE_CONFIRMED = "REMOTE_CONFIRMED"
    LOCAL_DONE = "LOCAL_DONE"


class KeyWarning(enum.Enum):
    """Why the server thinks a claim's key is weak (``Claim.warnings``).

    Advisory: the claim was decided exactly as without it. Keys built from counters, clocks
    or few characters collide across callers, and a collision answers one caller with
    another's stored result; use :func:`idem_client.new_key` instead.
    """

    SEQUENTIAL = "SEQUENTIAL"
    """Digits, optionally after a word prefix (``12345``, ``order-000123``)."""
    TIMESTAMP = "TIMESTAMP"
    """A Unix time or an ISO-8601 date-time, optionally after a word prefix."""
    SHORT = "SHORT"
    """Fewer than 16 characters."""
    LOW_ENTROPY = "LOW_ENTROPY"
    """Repeated characters: little entropy."""
    OTHER = "OTHER"
    """A warning this client does not know yet (from a newer server)."""


class ClaimOutcome(enum.Enum):
    """What a claim decided (see docs/semantics.md for the HTTP mapping)."""

    ACQUIRED = "ACQUIRED"
    TAKEN_OVER = "TAKEN_OVER"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FINGERPRINT_MISMATCH = "FINGERPRINT_MISMATCH"
    FINGERPRINT_UNVERIFIABLE = "FINGERPRINT_UNVERIFIABLE"
    NEEDS_RECONCILIATION = "NEEDS_RECONCILIATION"

    @property
    def owns(self) -> bool:
        """True when the caller owns the record and must run the operation."""
        return self in (ClaimOutcome.ACQUIRED, ClaimOutcome.TAKEN_OVER)


@dataclass(frozen=True)
class Scope:
    """The namespace of an idempotency key: the unique constraint is (scope, key)."""

    tenant: str
    environment: str
    actor: str
    endpoint: str
    """The operation, ``METHOD /route``, e.g. ``POST /v1/charges``."""


@dataclass(frozen=True)
class Target:
    """A record's identity: its scope and idempotency key. Every owner command names it."""

    scope: Scope
    key: str


@dataclass(frozen=True)
class StoredResult:
    """What is stored to answer a retry of a completed operation (never one-time secrets).

    By default a replay is re-rendered by the service from the resource id and version. A
    route that opts in stores the first answer's ``body`` verbatim (bytes, with its
    ``content_type``), counted against the record's ``max_result_bytes``; ``None`` means the
    result has no stored body (result version 0 on the wire, the form of older records).
    """

    status_code: int
    resource_id: str = ""
    resource_version: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    purged: bool = False
    """True once ``Admin.PurgeSubject`` scrubbed the fields and body (ignored on input)."""
    body: bytes | None = None
    content_type: str = ""


@dataclass(frozen=True)
class ErrorSummary:
    """A failure summary, replayed to later claims of a terminal failure."""

    code: str
    message: str = ""


@dataclass(frozen=True)
class Lease:
    """The current ownership of a record."""

    holder: str
    expires_at_ms: int


@dataclass(frozen=True)
class FingerprintInfo:
    """The fingerprint stored with a record."""

    algorithm: str
    schema_version: int
    digest: bytes


@dataclass(frozen=True)
class Record:
    """The full view of one record, as ``Get``, ``Wait`` and the owner commands answer it."""

    scope: Scope
    key: str
    operation_id: str
    fingerprint: FingerprintInfo | None
    state: State
    stage: Stage
    remote_ref: str
    fence: int
    lease: Lease | None
    attempts: int
    version: int
    risk: Risk
    lease_ms: int
    retention_ms: int
    max_result_bytes: int
    result: StoredResult | None
    error: ErrorSummary | None
    created_at_ms: int
    updated_at_ms: int
    completed_at_ms: int
    expires_at_ms: int
    previous_stage: Stage | None


@dataclass(frozen=True)
class Claim:
    """The answer to a claim: the outcome and the fields that outcome defines.

    ``fence`` is set exactly when the caller owns the record (ACQUIRED, TAKEN_OVER);
    ``result`` with COMPLETED; ``error`` with FAILED (``None`` for a cancelled record);
    ``retry_after`` (seconds) with IN_PROGRESS; ``previous_stage`` and ``remote_ref`` with
    TAKEN_OVER; ``required_algorithm`` with FINGERPRINT_UNVERIFIABLE. ``warnings`` (any
    outcome) are the server's advisory notes about the key, empty for a key that looks random.
    """

    outcome: ClaimOutcome
    operation_id: str
    """The downstream's idempotency key for this operation (every outcome)."""
    state: State
    stage: Stage
    version: int
    attempts: int
    holder: str
    """The holder this claim was sent with: re-sending the claim with it gets the ownership back."""
    target: Target
    fence: int | None = None
    lease_expires_at_ms: int | None = None
    redelivered: bool = False
    previous_stage: Stage | None = None
    remote_ref: str | None = None
    retry_after: float | None = None
    result: StoredResult | None = None
    error: ErrorSummary | None = None
    required_algorithm: str | None = None
    warnings: tuple[KeyWarning, ...] = ()

    @property
    def owns(self) -> bool:
        """True when the caller owns the record and must run the operation."""
        return self.outcome.owns


@dataclass(frozen=True)
class Lookup:
    """A record and what a claim with a matching fingerprint would decide now (``get``,
    ``get_operation``, ``wait``). ``terminal`` is only meaningful for ``wait``: True when the
    record reached COMPLETED, TERMINAL_FAILURE or CANCELLED before the budget ran out."""

    record: Record
    outcome: ClaimOutcome
    terminal: bool = False
