"""Bad input and refusals: each ends in the exception class of its idem reason, nothing retried."""

from __future__ import annotations

import re
import time
from pathlib import Path

import grpc
import pytest

from conftest import FAST, new_target
from idem_client import (
    CanonicalRequest,
    Client,
    ClientOptions,
    ErrorSummary,
    RetryPolicy,
    Scope,
    StoredResult,
    Target,
    errors,
)
from idem_client.errors import REASONS, IdemError, error_for

BODY = CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 1})


@pytest.mark.parametrize(
    ("target", "request_", "kwargs", "expected", "reason"),
    [
        (Target(Scope("acme", "test", "u", "POST /x"), "bad key"), BODY, {}, errors.InvalidKey, "INVALID_KEY"),
        (Target(Scope("acme", "test", "u", "POST /x"), ""), BODY, {}, errors.InvalidKey, "INVALID_KEY"),
        (Target(Scope("ac me", "test", "u", "POST /x"), "k"), BODY, {}, errors.InvalidScope, "INVALID_SCOPE"),
        (Target(Scope("acme", "Test", "u", "POST /x"), "k"), BODY, {}, errors.InvalidScope, "INVALID_SCOPE"),
        (Target(Scope("acme", "test", "u", "post"), "k"), BODY, {}, errors.InvalidScope, "INVALID_SCOPE"),
        (
            Target(Scope("acme", "test", "u", "POST /x"), "k"),
            None,
            {},
            errors.InvalidFingerprint,
            "INVALID_FINGERPRINT",
        ),
        (
            Target(Scope("acme", "test", "u", "POST /x"), "k"),
            BODY,
            {"lease": 7200},
            errors.InvalidPolicy,
            "INVALID_POLICY",
        ),
        (
            Target(Scope("acme", "test", "u", "POST /x"), "k"),
            CanonicalRequest("POST", "/x", body_json=b"{oops"),
            {},
            errors.InvalidFingerprint,
            "INVALID_FINGERPRINT",
        ),
        (
            Target(Scope("acme", "test", "u", "POST /x"), "k"),
            CanonicalRequest("POST", "/x", body_json=b'"' + b"a" * (1 << 20) + b'"'),
            {},
            errors.BodyTooLarge,
            "BODY_TOO_LARGE",
        ),
    ],
)
def test_bad_claims_are_refused_by_reason(
    client: Client, target: Target, request_: CanonicalRequest | None, kwargs: dict[str, float],
    expected: type[IdemError], reason: str,
) -> None:  # fmt: skip
    with pytest.raises(expected) as caught:
        client.claim(target, request_, **kwargs)
    assert caught.value.reason == reason
    assert isinstance(caught.value, errors.InvalidArgument)
    assert caught.value.message


def test_owner_command_refusals(client: Client) -> None:
    target = new_target()
    claim = client.claim(target, BODY)
    assert claim.fence == 1
    with pytest.raises(errors.StaleFence) as stale:
        client.start(target, 2)
    assert stale.value.reason == "STALE_FENCE" and isinstance(stale.value, errors.Rejected)
    client.record_calling(target, 1)
    with pytest.raises(errors.IrreversibleStage):
        client.release(target, 1)
    with pytest.raises(errors.IrreversibleStage):
        client.cancel(target, 1)
    with pytest.raises(errors.InvalidResult):
        client.complete(target, 1, StoredResult(42))
    client.complete(target, 1, StoredResult(201, resource_id="a"))
    with pytest.raises(errors.AlreadyTerminal):
        client.complete(target, 1, StoredResult(201, resource_id="b"))
    with pytest.raises(errors.AlreadyTerminal):
        client.fail(target, 1, ErrorSummary("late"), retryable=True)
    with pytest.raises(errors.InvalidArgument):
        client.record_confirmed(target, 1, "")


def test_lookups_of_unknown_records(client: Client) -> None:
    with pytest.raises(errors.NotFound) as missing:
        client.get(new_target())
    assert missing.value.reason == "NOT_FOUND"
    with pytest.raises(errors.NotFound):
        client.get_operation("0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d")
    with pytest.raises(errors.InvalidArgument):
        client.get_operation("not-a-uuid")


def test_local_fingerprint_of_bad_json_fails_before_sending(client: Client, target: Target) -> None:
    for body in (b'{"a":1,"a":2}', b"[NaN]", b'"\\ud800"', b"1e400", b"{oops"):
        with pytest.raises(errors.InvalidArgument) as bad:
            client.claim(target, CanonicalRequest("POST", "/x", body_json=body), local_fingerprint=True)
        assert bad.value.reason == "INVALID_ARGUMENT"
    with pytest.raises(errors.NotFound):
        client.get(target)


def test_unreachable_nodes_are_unavailable_not_unknown() -> None:
    options = ClientOptions(connect_timeout=0.2, request_timeout=1, retry=RetryPolicy(3, 0.01, 0.05, 5))
    with Client(["127.0.0.1:1", "127.0.0.1:2"], options=options) as client:
        started = time.monotonic()
        with pytest.raises(errors.Unavailable) as caught:
            client.claim(new_target(), BODY)
        assert caught.value.reason == "UNAVAILABLE"
        assert "3 attempt(s)" in caught.value.message
        assert time.monotonic() - started < 5


def test_malformed_endpoints_are_refused() -> None:
    for endpoints in ([], ["a b:1"], "127.0.0.1:7400"):
        with pytest.raises(errors.InvalidArgument):
            Client(endpoints, options=FAST)  # type: ignore[arg-type]


PROTO_LIB = Path(__file__).resolve().parents[3] / "crates" / "idem-proto" / "src" / "lib.rs"
FAMILY = {
    "InvalidArgument": errors.InvalidArgument,
    "NotFound": errors.NotFound,
    "FailedPrecondition": errors.Rejected,
    "Aborted": errors.Rejected,
    "ResourceExhausted": errors.Rejected,
    "DeadlineExceeded": errors.Rejected,
    "Internal": errors.Rejected,
    "Unauthenticated": errors.Rejected,
    "PermissionDenied": errors.PermissionDenied,
}
"""The base class each gRPC code's reasons must fall under (UNAVAILABLE ones are retried)."""


def server_reasons() -> list[tuple[str, str]]:
    """``(reason, code)`` of every entry of ``idem_proto::reason::ALL``, read from its source."""
    text = PROTO_LIB.read_text()
    block = text[text.index("pub const ALL") : text.index("];", text.index("pub const ALL"))]
    pairs = re.findall(r"\((\w+), Code::(\w+)\)", block)
    assert len(pairs) >= 30, "the reason table was not found"
    return pairs


def test_every_server_reason_has_its_own_class() -> None:
    for reason, code in server_reasons():
        assert reason in REASONS, f"{reason} is not in the error map"
        error = error_for(reason, "m", code=grpc.StatusCode.UNKNOWN)
        assert type(error) is REASONS[reason] and error.reason == reason
        if code in FAMILY:
            assert isinstance(error, FAMILY[code]), f"{reason} ({code}) is a {type(error).__name__}"
    classes = [REASONS[r] for r, _ in server_reasons()]
    assert len(set(classes)) == len(classes), "one class per reason"


def test_limit_and_security_classes() -> None:
    for reason in ("RATE_LIMITED", "QUOTA_EXCEEDED", "OVERLOADED"):
        assert isinstance(error_for(reason, "m", retry_after=0.1), errors.LimitExceeded)
    assert isinstance(error_for("TENANT_FORBIDDEN", "m"), errors.PermissionDenied)
    assert isinstance(error_for("ROLE_FORBIDDEN", "m"), errors.PermissionDenied)
    assert not isinstance(error_for("UNAUTHENTICATED", "m"), errors.PermissionDenied)
    unknown = error_for("SOMETHING_NEW", "m", code=grpc.StatusCode.INVALID_ARGUMENT)
    assert type(unknown) is errors.InvalidArgument
    assert type(error_for("SOMETHING_NEW", "m", code=grpc.StatusCode.ABORTED)) is errors.Rejected
