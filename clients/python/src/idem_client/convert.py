"""Conversions between the generated wire messages and :mod:`idem_client.types`.

Both client flavours build requests and read answers through here, so the sync and asyncio
clients cannot drift apart. Reading is strict: an unspecified enum, an owned claim without a
fence or a COMPLETED claim without a result is :class:`~idem_client.errors.InvalidResponse`,
never a silently defaulted value.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from ._pb.idem.v1 import idempotency_pb2 as pb
from .errors import INVALID_RESPONSE, InvalidResponse
from .fingerprint import CanonicalRequest, Fingerprint
from .types import (
    Claim,
    ClaimOutcome,
    ErrorSummary,
    FingerprintInfo,
    KeyWarning,
    Lease,
    Lookup,
    Record,
    Risk,
    Scope,
    Stage,
    State,
    StoredResult,
    Target,
)

E = TypeVar("E", bound=enum.Enum)

RESULT_WITH_BODY = 1
"""``StoredResult.result_version`` of a result that carries a verbatim body."""


def bad(message: str) -> InvalidResponse:
    """An :class:`InvalidResponse` with `message`."""
    return InvalidResponse(INVALID_RESPONSE, message)


def enum_from(wire_enum: object, prefix: str, value: int, cls: type[E]) -> E:
    """The Python enum member for a wire enum number (``STATE_PENDING`` → ``State.PENDING``)."""
    try:
        name = wire_enum.Name(value)  # type: ignore[attr-defined]
    except ValueError:
        raise bad(f"unknown {cls.__name__} value {value}") from None
    try:
        return cls(name.removeprefix(prefix))
    except ValueError:
        raise bad(f"{name} is not a valid {cls.__name__}") from None


def optional_stage(value: int) -> Stage | None:
    """A stage that may be unset (``previous_stage``)."""
    return None if value == pb.STAGE_UNSPECIFIED else enum_from(pb.Stage, "STAGE_", value, Stage)


def scope_to_wire(scope: Scope) -> pb.Scope:
    """The wire scope."""
    return pb.Scope(tenant=scope.tenant, environment=scope.environment, actor=scope.actor, endpoint=scope.endpoint)


def scope_from_wire(scope: pb.Scope) -> Scope:
    """The typed scope."""
    return Scope(scope.tenant, scope.environment, scope.actor, scope.endpoint)


def risk_to_wire(risk: Risk | None) -> pb.Risk:
    """The wire risk (UNSPECIFIED: the endpoint policy)."""
    return pb.RISK_UNSPECIFIED if risk is None else pb.Risk.Value(f"RISK_{risk.value}")


def canonical_to_wire(request: CanonicalRequest) -> pb.CanonicalRequest:
    """The wire canonical request, for the server to fingerprint."""
    wire = pb.CanonicalRequest(
        method=request.method,
        route=request.route,
        path_params=dict(request.path_params),
        query=[pb.QueryParam(name=n, value=v) for n, v in request.query],
        schema_version=request.schema_version,
    )
    if request.body_json is not None:
        wire.body_json = request.body_json
    return wire


def fingerprint_to_wire(fingerprint: Fingerprint) -> pb.Fingerprint:
    """The wire fingerprint."""
    return pb.Fingerprint(
        algorithm=fingerprint.algorithm,
        schema_version=fingerprint.schema_version,
        digest=fingerprint.digest,
    )


def result_to_wire(result: StoredResult) -> pb.StoredResult:
    """The wire result (``purged`` is never sent); a body makes it result version 1."""
    wire = pb.StoredResult(
        status_code=result.status_code,
        resource_id=result.resource_id,
        resource_version=result.resource_version,
        fields=dict(result.fields),
    )
    if result.body is not None:
        wire.result_version = RESULT_WITH_BODY
        wire.body = result.body
        wire.content_type = result.content_type
    return wire


def result_from_wire(result: pb.StoredResult) -> StoredResult:
    """The typed result."""
    return StoredResult(
        status_code=result.status_code,
        resource_id=result.resource_id,
        resource_version=result.resource_version,
        fields=dict(result.fields),
        purged=result.purged,
        body=result.body if result.result_version == RESULT_WITH_BODY else None,
        content_type=result.content_type,
    )


def error_from_wire(error: pb.ErrorSummary) -> ErrorSummary:
    """The typed error summary."""
    return ErrorSummary(code=error.code, message=error.message)


def millis(seconds: float) -> int:
    """Seconds to whole milliseconds, at least 1 for a positive duration."""
    ms = round(seconds * 1000)
    return max(ms, 1) if seconds > 0 else ms


def record_from_wire(record: pb.Record) -> Record:
    """The typed record."""
    fp = record.fingerprint if record.HasField("fingerprint") else None
    return Record(
        scope=scope_from_wire(record.scope),
        key=record.key,
        operation_id=record.operation_id,
        fingerprint=FingerprintInfo(fp.algorithm, fp.schema_version, fp.digest) if fp else None,
        state=enum_from(pb.State, "STATE_", record.state, State),
        stage=enum_from(pb.Stage, "STAGE_", record.stage, Stage),
        remote_ref=record.remote_ref,
        fence=record.fence,
        lease=Lease(record.lease.holder, record.lease.expires_at_ms) if record.HasField("lease") else None,
        attempts=record.attempts,
        version=record.version,
        risk=enum_from(pb.Risk, "RISK_", record.risk, Risk),
        lease_ms=record.lease_ms,
        retention_ms=record.retention_ms,
        max_result_bytes=record.max_result_bytes,
        result=result_from_wire(record.result) if record.HasField("result") else None,
        error=error_from_wire(record.error) if record.HasField("error") else None,
        created_at_ms=record.created_at_ms,
        updated_at_ms=record.updated_at_ms,
        completed_at_ms=record.completed_at_ms,
        expires_at_ms=record.expires_at_ms,
        previous_stage=optional_stage(record.previous_stage),
    )


def required_record(message: pb.RecordResponse | pb.GetResponse | pb.WaitResponse) -> Record:
    """The record of an answer that must carry one."""
    if not message.HasField("record"):
        raise bad("an answer without its record")
    return record_from_wire(message.record)


def outcome_from_wire(value: int) -> ClaimOutcome:
    """The typed claim outcome."""
    return enum_from(pb.ClaimOutcome, "CLAIM_OUTCOME_", value, ClaimOutcome)


def lookup_from_wire(message: pb.GetResponse | pb.WaitResponse) -> Lookup:
    """The typed answer of Get, GetOperation and Wait."""
    terminal = message.terminal if isinstance(message, pb.WaitResponse) else False
    return Lookup(required_record(message), outcome_from_wire(message.outcome), terminal)


def claim_from_wire(r: pb.ClaimResponse, holder: str, target: Target) -> Claim:
    """The typed claim, checking that its outcome's fields are there."""
    outcome = outcome_from_wire(r.outcome)
    if outcome.owns and r.fence == 0:
        raise bad("an owned claim without a fence")
    if outcome is ClaimOutcome.COMPLETED and not r.HasField("result"):
        raise bad("a COMPLETED claim without its result")
    taken_over = outcome is ClaimOutcome.TAKEN_OVER
    return Claim(
        outcome=outcome,
        operation_id=r.operation_id,
        state=enum_from(pb.State, "STATE_", r.state, State),
        stage=enum_from(pb.Stage, "STAGE_", r.stage, Stage),
        version=r.version,
        attempts=r.attempts,
        holder=holder,
        target=target,
        fence=r.fence if outcome.owns else None,
        lease_expires_at_ms=r.lease_expires_at_ms or None,
        redelivered=r.redelivered,
        previous_stage=optional_stage(r.previous_stage) if taken_over else None,
        remote_ref=(r.remote_ref or None) if taken_over else None,
        retry_after=r.retry_after_ms / 1000 if outcome is ClaimOutcome.IN_PROGRESS else None,
        result=result_from_wire(r.result) if outcome is ClaimOutcome.COMPLETED else None,
        error=error_from_wire(r.error) if r.HasField("error") and outcome is ClaimOutcome.FAILED else None,
        required_algorithm=r.required_algorithm or None,
        warnings=tuple(key_warning(w) for w in r.warnings),
    )


def key_warning(value: int) -> KeyWarning:
    """A key warning; OTHER for a value this client does not know (advisory, never an error)."""
    try:
        return KeyWarning(pb.KeyWarning.Name(value).removeprefix("KEY_WARNING_"))
    except ValueError:
        return KeyWarning.OTHER
