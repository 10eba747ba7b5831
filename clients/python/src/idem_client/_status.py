"""Reading a failed call: its idem reason, hints, and what it says about the request.

The server puts a ``google.rpc.Status`` with an ``ErrorInfo`` (domain ``idem.v1``) in the
``grpc-status-details-bin`` trailer, and the reason again in ``idem-reason`` metadata for
clients without rich-status support; hints (``leader-addr``, ``retry-after-ms``) are both
ErrorInfo metadata and response metadata. A status with no reason at all comes from the
transport (the request may not even have reached a node).

Failures are classified as the Rust SDK's transport does:

================================================  =======  ==================================
failure                                           sent?    what the retry loop does
================================================  =======  ==================================
could not connect                                 no       next endpoint, back off
``NODE_STOPPED`` (the node's storage failed)      no       next endpoint, back off
``NOT_LEADER``                                    no       hinted leader at once, else next
``WRONG_GROUP``                                   no       forget the tenant's route, back off
``RATE_LIMITED``                                  no       same node after ``retry-after-ms``
``OVERLOADED`` (shed unread)                      no       next endpoint after ``retry-after-ms``
``UNAVAILABLE_OUTCOME_UNKNOWN``, reset, timeout   maybe    next endpoint, back off, re-send
any other idem reason (``REGION_FAILOVER`` too)   yes      raised, never retried
================================================  =======  ==================================

``WRONG_GROUP``, ``RATE_LIMITED`` and ``OVERLOADED`` end the call with their own error
(``WrongGroup``, ``RateLimited``, ``Overloaded``) when the attempts or the budget run out, or
at once when the server's suggested wait does not fit in the budget. The Rust SDK raises ``RATE_LIMITED`` and
``OVERLOADED`` at once; this client waits for them since nothing ran and the hint says when to
come back.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2, status_pb2

from .errors import IdemError, error_for

DOMAIN = "idem.v1"
DETAILS_KEY = "grpc-status-details-bin"
REASON_KEY = "idem-reason"
LEADER_ADDR_KEY = "leader-addr"
RETRY_AFTER_KEY = "retry-after-ms"

# Transport statuses that leave the request's fate open.
_MAYBE_SENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,
}


class Kind(enum.Enum):
    """What a failed attempt means for the next one."""

    NOT_SENT = "not sent"
    MAYBE_SENT = "maybe sent"
    NOT_LEADER = "not leader"
    LATER = "later"
    THROTTLED = "throttled"
    SHED = "shed"
    FINAL = "final"


_LATER = {"WRONG_GROUP": Kind.LATER, "RATE_LIMITED": Kind.THROTTLED, "OVERLOADED": Kind.SHED}
"""Reasons of calls that did not run and are worth sending again later."""


@dataclass(frozen=True)
class Failure:
    """A classified failed attempt: its kind, the error to raise if it is the last one, and
    the hints (leader address, suggested wait in seconds)."""

    kind: Kind
    error: IdemError
    leader_addr: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Details:
    """The idem reason and hints of a failed status."""

    reason: str | None
    hints: dict[str, str]


def details(metadata: Iterable[tuple[str, str | bytes]]) -> Details:
    """The reason and hints of a status, from its ErrorInfo, else its response metadata."""
    hints: dict[str, str] = {}
    reason: str | None = None
    for key, value in metadata:
        if key == DETAILS_KEY and isinstance(value, bytes):
            info = _error_info(value)
            if info is not None:
                reason = info.reason
                hints.update(info.metadata)
        elif isinstance(value, str):
            hints.setdefault(key, value)
    if reason is None:
        reason = hints.get(REASON_KEY)
    return Details(reason, hints)


def _error_info(raw: bytes) -> error_details_pb2.ErrorInfo | None:
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # a malformed trailer only loses the rich form; metadata remains
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == DOMAIN:
            return info
    return None


def retry_after(hints: dict[str, str]) -> float | None:
    """The ``retry-after-ms`` hint in seconds."""
    raw = hints.get(RETRY_AFTER_KEY)
    try:
        return int(raw) / 1000 if raw is not None else None
    except ValueError:
        return None


def classify(
    code: grpc.StatusCode,
    message: str,
    metadata: Iterable[tuple[str, str | bytes]],
) -> Failure:
    """Classifies a failed attempt (see the module table)."""
    found = details(metadata)
    after = retry_after(found.hints)
    if found.reason is None:
        error = error_for(code.name, message, code=code, retry_after=after)
        if code == grpc.StatusCode.UNAVAILABLE and _not_connected(message):
            return Failure(Kind.NOT_SENT, error)
        if code in _MAYBE_SENT:
            return Failure(Kind.MAYBE_SENT, error, retry_after=after)
        return Failure(Kind.FINAL, error)
    error = error_for(found.reason, message, code=code, retry_after=after)
    if found.reason == "NOT_LEADER":
        return Failure(Kind.NOT_LEADER, error, leader_addr=found.hints.get(LEADER_ADDR_KEY))
    if found.reason == "UNAVAILABLE_OUTCOME_UNKNOWN":
        return Failure(Kind.MAYBE_SENT, error, retry_after=after)
    if found.reason == "NODE_STOPPED":
        return Failure(Kind.NOT_SENT, error)
    later = _LATER.get(found.reason)
    if later is not None:
        return Failure(later, error, retry_after=after)
    return Failure(Kind.FINAL, error)


def _not_connected(message: str) -> bool:
    """True for grpc's "could not open a connection" answers: the request never left."""
    text = message.lower()
    return "failed to connect" in text or "connection refused" in text or "dns resolution failed" in text
