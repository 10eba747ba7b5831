"""Every call of the client as data: which rpc, the wire request (built once), the tenant whose
route it starts on, whether it writes, and how its answer is read.

Building each request once and re-sending that very message on every retry is what makes
retries safe: same key, same holder, same fence, same fingerprint. The sync and asyncio
clients only differ in how they send a :class:`Call`; what they send is decided here.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from . import convert
from ._pb.idem.v1 import idempotency_pb2 as pb
from .errors import invalid
from .fingerprint import CanonicalRequest, Fingerprint, FingerprintError
from .types import Claim, ErrorSummary, Lookup, Record, Risk, Stage, StoredResult, Target

T = TypeVar("T")

MAX_WAIT = 30.0
"""Longest wait budget the server honours for ``Wait``, in seconds."""
_MAX_HOST = 48


@dataclass(frozen=True)
class Call(Generic[T]):
    """One call: ``service.rpc(request)``, read by ``parse``."""

    rpc: str
    request: Message
    parse: Callable[[Any], T]
    tenant: str | None
    write: bool
    extra_timeout: float = 0.0
    """Added to the per-attempt timeout (``Wait``'s budget)."""


def new_holder() -> str:
    """A holder unique to one claim: ``{hostname}-{pid}-{uuid}``. The UUID makes it unique;
    host and pid tell an operator (``idemctl op show``) who held the lease."""
    host = "".join(c for c in socket.gethostname() if c.isascii() and c.isprintable() and c != " ")
    return f"{host[:_MAX_HOST] or 'host'}-{os.getpid()}-{uuid.uuid4().hex}"


def _target(target: Target) -> dict[str, Any]:
    return {"scope": convert.scope_to_wire(target.scope), "key": target.key}


def claim(
    target: Target,
    request: CanonicalRequest | None,
    *,
    fingerprints: Sequence[Fingerprint] | None,
    local_fingerprint: bool,
    risk: Risk | None,
    lease: float | None,
    retention: float | None,
    max_result_bytes: int | None,
    holder: str | None,
) -> Call[Claim]:
    """A claim; the holder is generated unless given (reuse one only to re-send a claim)."""
    holder = holder or new_holder()
    wire = pb.ClaimRequest(holder=holder, risk=convert.risk_to_wire(risk), **_target(target))
    if fingerprints:
        wire.fingerprints.extend(convert.fingerprint_to_wire(f) for f in fingerprints)
    elif request is not None and local_fingerprint:
        try:
            wire.fingerprints.append(convert.fingerprint_to_wire(request.fingerprint()))
        except FingerprintError as e:
            raise e.to_idem_error() from None
    elif request is not None:
        wire.request.CopyFrom(convert.canonical_to_wire(request))
    if lease is not None:
        wire.lease_ms = convert.millis(lease)
    if retention is not None:
        wire.retention_ms = convert.millis(retention)
    if max_result_bytes is not None:
        wire.max_result_bytes = max_result_bytes
    return Call("Claim", wire, lambda r: convert.claim_from_wire(r, holder, target), target.scope.tenant, True)


def _mutation(rpc: str, message: type[Message], target: Target, fence: int, **fields: Any) -> Call[Record]:
    wire = message(fence=fence, **_target(target), **fields)
    return Call(rpc, wire, convert.required_record, target.scope.tenant, True)


def start(target: Target, fence: int) -> Call[Record]:
    """Owner: PENDING → IN_PROGRESS."""
    return _mutation("Start", pb.StartRequest, target, fence)


def record_external_call(target: Target, fence: int, stage: Stage, remote_ref: str | None) -> Call[Record]:
    """Owner: the external-call ledger (``CALLING`` or ``REMOTE_CONFIRMED``)."""
    if stage is Stage.CALLING:
        wire_stage = pb.EXTERNAL_CALL_STAGE_CALLING
    elif stage is Stage.REMOTE_CONFIRMED:
        if not remote_ref:
            raise invalid("INVALID_ARGUMENT", "REMOTE_CONFIRMED needs the downstream's reference")
        wire_stage = pb.EXTERNAL_CALL_STAGE_REMOTE_CONFIRMED
    else:
        raise invalid(
            "INVALID_ARGUMENT", f"an external call is recorded as CALLING or REMOTE_CONFIRMED, not {stage.value}"
        )
    return _mutation(
        "RecordExternalCall", pb.RecordExternalCallRequest, target, fence, stage=wire_stage, remote_ref=remote_ref or ""
    )


def renew(target: Target, fence: int, lease: float | None) -> Call[Record]:
    """Owner: extends the lease to now + `lease` seconds (default: the record's)."""
    extra = {} if lease is None else {"lease_ms": convert.millis(lease)}
    return _mutation("Renew", pb.RenewRequest, target, fence, **extra)


def complete(target: Target, fence: int, result: StoredResult) -> Call[Record]:
    """Owner: stores the result; the record becomes COMPLETED and is replayed."""
    return _mutation("Complete", pb.CompleteRequest, target, fence, result=convert.result_to_wire(result))


def fail(target: Target, fence: int, error: ErrorSummary, retryable: bool) -> Call[Record]:
    """Owner: records a failure, retryable (next claim takes over) or terminal (replayed)."""
    summary = pb.ErrorSummary(code=error.code, message=error.message)
    return _mutation("Fail", pb.FailRequest, target, fence, retryable=retryable, error=summary)


def release(target: Target, fence: int) -> Call[Record]:
    """Owner: gives the record up (back to PENDING, no lease); only before any external call."""
    return _mutation("Release", pb.ReleaseRequest, target, fence)


def cancel(target: Target, fence: int) -> Call[Record]:
    """Owner: cancels the operation (CANCELLED, terminal); only before any external call."""
    return _mutation("Cancel", pb.CancelRequest, target, fence)


def get(target: Target) -> Call[Lookup]:
    """Reads the record and what a matching claim would decide now."""
    return Call("Get", pb.GetRequest(**_target(target)), convert.lookup_from_wire, target.scope.tenant, False)


def get_operation(operation_id: str) -> Call[Lookup]:
    """Reads a record by operation id."""
    return Call(
        "GetOperation", pb.GetOperationRequest(operation_id=operation_id), convert.lookup_from_wire, None, False
    )


def wait(target: Target | None, operation_id: str | None, timeout: float) -> Call[Lookup]:
    """Long-polls a record until it settles or `timeout` seconds (at most 30) pass."""
    budget = min(max(timeout, 0.001), MAX_WAIT)
    wire = pb.WaitRequest(timeout_ms=convert.millis(budget))
    tenant = None
    if target is not None:
        wire.scope.CopyFrom(convert.scope_to_wire(target.scope))
        wire.key = target.key
        tenant = target.scope.tenant
    if operation_id is not None:
        wire.operation_id = operation_id
    return Call("Wait", wire, convert.lookup_from_wire, tenant, False, extra_timeout=budget)
