"""The exceptions of the client: one class per idem reason, grouped by what the caller must do.

A caller of an idempotency store must tell three situations apart, because each asks for a
different reaction (the same split as the Rust SDK's ``ClientError``):

- the server **refused** the call and nothing changed (:class:`Rejected`, :class:`NotFound`,
  :class:`InvalidArgument` and their subclasses): retrying the same call is pointless;
- the call **may or may not have taken effect** (:class:`OutcomeUnknown`): re-send it with
  the same key, holder and fence, or read the record with ``get``;
- **no server could be reached** (:class:`Unavailable`): nothing was applied.

Every exception carries the machine-readable :attr:`IdemError.reason` (the server's reason from
``google.rpc.ErrorInfo``, falling back to the ``idem-reason`` metadata, or a client-side
reason), so ``except StaleFence`` and ``if e.reason == "STALE_FENCE"`` are equivalent.
"""

from __future__ import annotations

import grpc

# Client-side reasons (the server never sends these).
UNAVAILABLE = "UNAVAILABLE"
"""Reason of :class:`Unavailable`: no endpoint answered."""
INVALID_RESPONSE = "INVALID_RESPONSE"
"""Reason of :class:`InvalidResponse`: an answer this client cannot use."""


class IdemError(Exception):
    """Base of every error raised by the client."""

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        """The machine-readable reason, e.g. ``STALE_FENCE``."""
        self.message = message
        """The human-readable message, without the reason."""
        self.code = code
        """The gRPC status code of the server's answer, when there was one."""
        self.retry_after = retry_after
        """The server's suggested wait before trying again (``retry-after-ms``), in seconds."""

    @property
    def is_outcome_unknown(self) -> bool:
        """True when the call may have been applied: re-send it unchanged or read the record."""
        return isinstance(self, OutcomeUnknown)

    @property
    def is_region_failover(self) -> bool:
        """True for ``REGION_FAILOVER``: a HIGH-risk claim refused during region failover."""
        return self.reason == "REGION_FAILOVER"


class Rejected(IdemError):
    """The server refused the call with a definite answer; nothing changed. Never retried."""


class NotFound(IdemError):
    """No record for this scope and key, or operation id."""


class InvalidArgument(IdemError):
    """The input is malformed, as found by the client before sending or by the server."""


class OutcomeUnknown(IdemError):
    """The call may or may not have been applied: ``UNAVAILABLE_OUTCOME_UNKNOWN`` or a lost
    connection on every attempt the retry policy allowed. Re-send the same call (same key,
    holder, fence) or read the record."""


class Unavailable(IdemError):
    """No endpoint could be reached (or none answered a read) within the retry policy."""


class NodeStopped(Unavailable):
    """``NODE_STOPPED``: the node's Raft stopped after a storage failure (a failed fsync or
    write) and it serves nothing until restarted; nothing was done. The client tries the next
    endpoint; raised when none answered."""


class InvalidResponse(IdemError):
    """The server's answer is not what this client understands: a bug or a version skew."""


# --- one class per server reason -------------------------------------------------------------


class InvalidKey(InvalidArgument):
    """``INVALID_KEY``: empty, longer than 255 bytes, or a byte outside ``[A-Za-z0-9._:~-]``."""


class InvalidScope(InvalidArgument):
    """``INVALID_SCOPE``: a scope field is missing, too long or has a forbidden character."""


class InvalidFingerprint(InvalidArgument):
    """``INVALID_FINGERPRINT``: no fingerprint or canonical request, or a malformed one."""


class InvalidPolicy(InvalidArgument):
    """``INVALID_POLICY``: lease, retention, risk or result limit out of range."""


class InvalidResult(InvalidArgument):
    """``INVALID_RESULT``: a stored result or error summary is malformed."""


class BodyTooLarge(InvalidArgument):
    """``BODY_TOO_LARGE``: the canonical request body is above the server's limit."""


class ResultTooLarge(InvalidArgument):
    """``RESULT_TOO_LARGE``: the result is above the record's ``max_result_bytes``."""


class StaleFence(Rejected):
    """``STALE_FENCE``: the lease was taken over or revoked; stop working on the record."""


class WrongState(Rejected):
    """``WRONG_STATE``: the command is not allowed in the record's current state."""


class IrreversibleStage(Rejected):
    """``IRREVERSIBLE_STAGE``: release or cancel after an external call began."""


class AlreadyTerminal(Rejected):
    """``ALREADY_TERMINAL``: the record is COMPLETED, TERMINAL_FAILURE or CANCELLED."""


class VersionMismatch(Rejected):
    """``VERSION_MISMATCH``: Reconcile's expected version differs from the record's."""


class RegionFailover(Rejected):
    """``REGION_FAILOVER``: a HIGH-risk claim or takeover refused while the tenant's group is
    in region failover. Never retried by the client: try again after :attr:`retry_after`."""


class WrongGroup(Rejected):
    """``WRONG_GROUP``: the tenant's home region is changing (retried by the client first)."""


class RequestTooLarge(Rejected):
    """``REQUEST_TOO_LARGE``: the request message is above the server's limit."""


class Internal(Rejected):
    """``INTERNAL``: a bug or a storage failure on the server."""


class UnknownRegion(NotFound):
    """``UNKNOWN_REGION``: no region of that name is defined (placement commands)."""


class TenantHomeImmutable(Rejected):
    """``TENANT_HOME_IMMUTABLE``: the tenant has records; its home region cannot change."""


class PlacementConflict(Rejected):
    """``PLACEMENT_CONFLICT``: the placement change contradicts the cluster configuration."""


class NotInFailover(Rejected):
    """``NOT_IN_FAILOVER``: confirming a new home needs a group in region failover."""


class BackupUnsupported(Rejected):
    """``BACKUP_UNSUPPORTED``: the node cannot back up every group of the cluster yet (it does
    not run a region group the configuration names: still provisioning); retry shortly or ask
    another node. A Backup answer."""


class TokenExists(Rejected):
    """``TOKEN_EXISTS``: a replicated API token of that name exists already; an Admin answer."""


class DeadlineExceeded(Rejected):
    """``DEADLINE_EXCEEDED``: a read did not finish within the call's deadline (a write cut off
    by its deadline is :class:`OutcomeUnknown` instead)."""


class PermissionDenied(Rejected):
    """``PERMISSION_DENIED``: an authenticated caller may not make this call; nothing was read
    or written. The server's reasons are the subclasses."""


class TenantForbidden(PermissionDenied):
    """``TENANT_FORBIDDEN``: the scope's tenant (or the tenant of the record a fence or
    operation id names) is not one of the caller's."""


class RoleForbidden(PermissionDenied):
    """``ROLE_FORBIDDEN``: the call needs a role (``operator``, ``admin``) the caller lacks."""


class Unauthenticated(Rejected):
    """``UNAUTHENTICATED``: the node requires a credential and the call carried none that it
    knows (no token, an unknown or revoked one, no client certificate mapped to a principal)."""


class LimitExceeded(Rejected):
    """A limit of the server refused the call before running it; nothing changed. The
    subclasses say which one; :attr:`retry_after` is the server's suggested wait."""


class RateLimited(LimitExceeded):
    """``RATE_LIMITED``: the tenant's rate limit is used up. Retried by the client after
    ``retry-after-ms`` while the call's budget allows; raised when it does not."""


class QuotaExceeded(LimitExceeded):
    """``QUOTA_EXCEEDED``: the tenant has as many unfinished records as its quota allows; a
    claim that would create another is refused until some finish. Never retried."""


class Overloaded(LimitExceeded):
    """``OVERLOADED``: the node shed the call unread at its in-flight bound. Retried by the
    client on the next endpoint after ``retry-after-ms``; raised when the budget runs out."""


class DiskFull(LimitExceeded):
    """``DISK_FULL``: the node's free disk space is below its reserve; writes (claims and
    worker mutations) are refused until space is freed, reads and replays of finished keys
    still work. Nothing was proposed."""


class QuorumAtRisk(Rejected):
    """``QUORUM_AT_RISK``: a voter change (promote or remove a member) was refused because a
    majority of the voters before or after it does not answer the leader: it could not
    commit, and would block every later membership change. Nothing changed; an Admin
    answer."""


REASONS: dict[str, type[IdemError]] = {
    "INVALID_KEY": InvalidKey,
    "INVALID_SCOPE": InvalidScope,
    "INVALID_FINGERPRINT": InvalidFingerprint,
    "INVALID_POLICY": InvalidPolicy,
    "INVALID_RESULT": InvalidResult,
    "INVALID_ARGUMENT": InvalidArgument,
    "BODY_TOO_LARGE": BodyTooLarge,
    "RESULT_TOO_LARGE": ResultTooLarge,
    "STALE_FENCE": StaleFence,
    "WRONG_STATE": WrongState,
    "IRREVERSIBLE_STAGE": IrreversibleStage,
    "ALREADY_TERMINAL": AlreadyTerminal,
    "VERSION_MISMATCH": VersionMismatch,
    "NOT_FOUND": NotFound,
    "NOT_LEADER": Unavailable,
    "UNAVAILABLE_OUTCOME_UNKNOWN": OutcomeUnknown,
    "REGION_FAILOVER": RegionFailover,
    "WRONG_GROUP": WrongGroup,
    "UNKNOWN_REGION": UnknownRegion,
    "TENANT_HOME_IMMUTABLE": TenantHomeImmutable,
    "PLACEMENT_CONFLICT": PlacementConflict,
    "NOT_IN_FAILOVER": NotInFailover,
    "REQUEST_TOO_LARGE": RequestTooLarge,
    "RATE_LIMITED": RateLimited,
    "QUOTA_EXCEEDED": QuotaExceeded,
    "OVERLOADED": Overloaded,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "INTERNAL": Internal,
    "UNAUTHENTICATED": Unauthenticated,
    "TENANT_FORBIDDEN": TenantForbidden,
    "ROLE_FORBIDDEN": RoleForbidden,
    "BACKUP_UNSUPPORTED": BackupUnsupported,
    "TOKEN_EXISTS": TokenExists,
    "NODE_STOPPED": NodeStopped,
    "DISK_FULL": DiskFull,
    "QUORUM_AT_RISK": QuorumAtRisk,
    "PERMISSION_DENIED": PermissionDenied,
    UNAVAILABLE: Unavailable,
    INVALID_RESPONSE: InvalidResponse,
}
"""The exception class of every reason the server sends (``idem_proto::reason::ALL``), plus
``PERMISSION_DENIED`` and the client-side reasons."""


def error_for(
    reason: str,
    message: str,
    *,
    code: grpc.StatusCode | None = None,
    retry_after: float | None = None,
) -> IdemError:
    """The exception for `reason`: its own class, else by gRPC code (an unknown
    ``INVALID_ARGUMENT`` reason is an :class:`InvalidArgument`, anything else :class:`Rejected`)."""
    cls = REASONS.get(reason)
    if cls is None:
        cls = InvalidArgument if code == grpc.StatusCode.INVALID_ARGUMENT else Rejected
    return cls(reason, message, code=code, retry_after=retry_after)


def invalid(reason: str, message: str) -> IdemError:
    """An input error found by the client before sending."""
    return error_for(reason, message, code=grpc.StatusCode.INVALID_ARGUMENT)
