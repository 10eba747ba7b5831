"""The outcome table of docs/semantics.md, through the sync and asyncio clients, on a real node."""

from __future__ import annotations

import time

import pytest

from conftest import FAST, new_target
from idem_client import (
    AsyncClient,
    CanonicalRequest,
    ClaimOutcome,
    Client,
    ErrorSummary,
    Fingerprint,
    KeyWarning,
    Risk,
    Stage,
    State,
    StoredResult,
    Target,
    errors,
)

CHARGE = CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 1000, "currency": "EUR"})
SAME_CHARGE_REORDERED = CanonicalRequest("POST", "/v1/charges", body_json=b'{ "currency": "EUR", "amount": 1000.0 }')
OTHER_CHARGE = CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 2000, "currency": "EUR"})


def test_acquired_in_progress_redelivered_completed_replayed(client: Client, target: Target) -> None:
    first = client.claim(target, CHARGE, risk=Risk.HIGH, lease=30)
    assert first.outcome is ClaimOutcome.ACQUIRED
    assert first.owns and first.fence == 1 and first.state is State.PENDING
    assert first.stage is Stage.NOT_CALLED and first.attempts == 1
    assert first.lease_expires_at_ms and first.lease_expires_at_ms > time.time() * 1000

    # Another attempt (its own holder) sees the live lease; the same holder gets it back.
    other = client.claim(target, SAME_CHARGE_REORDERED)
    assert other.outcome is ClaimOutcome.IN_PROGRESS and other.fence is None
    assert other.retry_after is not None and 0 < other.retry_after <= 30
    assert other.operation_id == first.operation_id
    again = client.claim(target, CHARGE, holder=first.holder)
    assert again.outcome is ClaimOutcome.ACQUIRED and again.redelivered and again.fence == 1

    record = client.start(target, 1)
    assert record.state is State.IN_PROGRESS and record.risk is Risk.HIGH
    record = client.record_calling(target, 1)
    assert record.stage is Stage.CALLING
    record = client.record_confirmed(target, 1, "psp_77")
    assert record.stage is Stage.REMOTE_CONFIRMED and record.remote_ref == "psp_77"
    client.renew(target, 1, lease=10)
    result = StoredResult(201, resource_id="ch_1", resource_version="v1", fields={"amount": "1000"})
    record = client.complete(target, 1, result)
    assert record.state is State.COMPLETED and record.stage is Stage.LOCAL_DONE
    assert record.expires_at_ms > record.completed_at_ms > 0

    replay = client.claim(target, SAME_CHARGE_REORDERED)
    assert replay.outcome is ClaimOutcome.COMPLETED and replay.fence is None
    assert replay.result == result

    mismatch = client.claim(target, OTHER_CHARGE)
    assert mismatch.outcome is ClaimOutcome.FINGERPRINT_MISMATCH
    assert client.get(target).record.state is State.COMPLETED, "a mismatch never touches the record"

    lookup = client.get(target)
    assert lookup.outcome is ClaimOutcome.COMPLETED and lookup.record.result == result
    assert client.get_operation(first.operation_id).record.key == target.key


def test_terminal_failure_is_replayed(client: Client, target: Target) -> None:
    claim = client.claim(target, CHARGE)
    assert claim.fence is not None
    client.fail(target, claim.fence, ErrorSummary("card_declined", "declined"), retryable=False)
    replay = client.claim(target, CHARGE)
    assert replay.outcome is ClaimOutcome.FAILED and replay.state is State.TERMINAL_FAILURE
    assert replay.error == ErrorSummary("card_declined", "declined")


def test_cancelled_is_failed_without_error(client: Client, target: Target) -> None:
    claim = client.claim(target, CHARGE)
    assert claim.fence is not None
    assert client.cancel(target, claim.fence).state is State.CANCELLED
    replay = client.claim(target, CHARGE)
    assert replay.outcome is ClaimOutcome.FAILED and replay.state is State.CANCELLED
    assert replay.error is None


def test_retryable_failure_and_release_are_taken_over(client: Client, target: Target) -> None:
    claim = client.claim(target, CHARGE)
    assert claim.fence == 1
    client.fail(target, 1, ErrorSummary("upstream_503"), retryable=True)
    second = client.claim(target, CHARGE)
    assert second.outcome is ClaimOutcome.TAKEN_OVER and second.fence == 2 and second.attempts == 2
    assert second.previous_stage is Stage.NOT_CALLED
    client.release(target, 2)
    third = client.claim(target, CHARGE)
    assert third.outcome is ClaimOutcome.TAKEN_OVER and third.fence == 3


def test_expired_lease_during_a_call(client: Client) -> None:
    normal, high = new_target(), new_target()
    for target, risk in ((normal, Risk.NORMAL), (high, Risk.HIGH)):
        claim = client.claim(target, CHARGE, risk=risk, lease=0.2)
        assert claim.fence is not None
        client.record_calling(target, claim.fence)
    time.sleep(0.4)
    taken = client.claim(normal, CHARGE)
    assert taken.outcome is ClaimOutcome.TAKEN_OVER and taken.previous_stage is Stage.CALLING
    stuck = client.claim(high, CHARGE)
    assert stuck.outcome is ClaimOutcome.NEEDS_RECONCILIATION
    assert client.get(high).record.state is State.NEEDS_RECONCILIATION


def test_unverifiable_fingerprint_names_the_algorithm(client: Client, target: Target) -> None:
    custom = Fingerprint("acme-hash/v1", 1, bytes(range(32)))
    assert client.claim(target, fingerprints=[custom]).outcome is ClaimOutcome.ACQUIRED
    answer = client.claim(target, CHARGE)
    assert answer.outcome is ClaimOutcome.FINGERPRINT_UNVERIFIABLE
    assert answer.required_algorithm == "acme-hash/v1"


def test_wait_returns_when_the_owner_finishes(client: Client, target: Target) -> None:
    claim = client.claim(target, CHARGE)
    assert claim.fence is not None
    waited = client.wait(target, timeout=0.2)
    assert not waited.terminal and waited.outcome is ClaimOutcome.IN_PROGRESS
    client.complete(target, claim.fence, StoredResult(200))
    done = client.wait_operation(claim.operation_id, timeout=5)
    assert done.terminal and done.record.state is State.COMPLETED


async def test_async_client_has_the_same_surface(node: object, target: Target) -> None:
    async with AsyncClient([node.endpoint], options=FAST) as client:  # type: ignore[attr-defined]
        claim = await client.claim(target, CHARGE)
        assert claim.outcome is ClaimOutcome.ACQUIRED and claim.fence == 1
        await client.start(target, 1)
        await client.record_external_call(target, 1, Stage.CALLING)
        await client.renew(target, 1)
        await client.complete(target, 1, StoredResult(201, resource_id="ch_9"))
        replay = await client.claim(target, SAME_CHARGE_REORDERED)
        assert replay.outcome is ClaimOutcome.COMPLETED and replay.result is not None
        assert replay.result.resource_id == "ch_9"
        lookup = await client.wait(target, timeout=1)
        assert lookup.terminal
        assert (await client.get_operation(claim.operation_id)).record.fence == 1
        with pytest.raises(errors.StaleFence):
            await client.release(target, 7)


def test_a_stored_body_is_replayed_verbatim_and_older_results_have_none(client: Client) -> None:
    with_body = new_target()
    claim = client.claim(with_body, CHARGE, max_result_bytes=4096)
    body = b'{"id":"ch_9","amount":1000}'
    result = StoredResult(201, resource_id="ch_9", body=body, content_type="application/json")
    client.complete(with_body, claim.fence or 0, result)
    replay = client.claim(with_body, CHARGE)
    assert replay.outcome is ClaimOutcome.COMPLETED and replay.result == result
    assert replay.result is not None and replay.result.body == body

    plain = new_target()
    claim = client.claim(plain, CHARGE)
    client.complete(plain, claim.fence or 0, StoredResult(201, resource_id="ch_10"))
    replay = client.claim(plain, CHARGE)
    assert replay.result is not None and replay.result.body is None and replay.result.content_type == ""


def test_a_body_over_max_result_bytes_is_refused_and_nothing_changes(client: Client, target: Target) -> None:
    claim = client.claim(target, CHARGE, max_result_bytes=64)
    with pytest.raises(errors.ResultTooLarge):
        client.complete(target, claim.fence or 0, StoredResult(201, body=b"x" * 128, content_type="text/plain"))
    record = client.get(target).record
    assert record is not None and record.state is State.PENDING and record.result is None


def test_weak_keys_are_claimed_with_warnings(client: Client) -> None:
    weak = Target(new_target().scope, f"order-{time.time_ns() % 10**9}")
    claim = client.claim(weak, CHARGE)
    assert claim.outcome is ClaimOutcome.ACQUIRED, "a warning never refuses"
    assert claim.warnings == (KeyWarning.SEQUENTIAL, KeyWarning.SHORT)
    assert client.claim(weak, CHARGE).warnings == claim.warnings
    assert client.claim(new_target(), CHARGE).warnings == ()
