"""The context-manager helper: claim, run the body, finish the record by how the body ended."""

from __future__ import annotations

import pytest

from conftest import FAST
from idem_client import (
    AsyncClient,
    CanonicalRequest,
    ClaimOutcome,
    Client,
    ErrorSummary,
    Stage,
    State,
    StoredResult,
    Target,
    TerminalFailure,
)
from support import Node

REQUEST = CanonicalRequest.with_json("POST", "/v1/imports", {"file": "a.csv"})


class Boom(Exception):
    pass


def test_result_completes_and_is_replayed(client: Client, target: Target) -> None:
    with client.operation(target, REQUEST) as op:
        assert op.owns and op.fence == 1 and op.operation_id
        op.record_calling()
        op.record_confirmed("imp_1")
        op.result = StoredResult(201, resource_id="imp_1")
    assert client.get(target).record.state is State.COMPLETED
    with client.operation(target, REQUEST) as replay:
        assert not replay.owns and replay.claim.outcome is ClaimOutcome.COMPLETED
        assert replay.claim.result is not None and replay.claim.result.resource_id == "imp_1"
        with pytest.raises(RuntimeError):
            replay.fence  # noqa: B018 - a non-owner has no fence


def test_exception_fails_retryably_and_propagates(client: Client, target: Target) -> None:
    with pytest.raises(Boom), client.operation(target, REQUEST) as op:
        op.start()
        raise Boom("card 4242 declined for alice@example.com")
    record = client.get(target).record
    assert record.state is State.RETRYABLE_FAILURE
    assert record.error == ErrorSummary("Boom", ""), "the exception's text is never stored"
    with client.operation(target, REQUEST) as retry:
        assert retry.claim.outcome is ClaimOutcome.TAKEN_OVER and retry.fence == 2
        retry.result = StoredResult(200)


def test_terminal_failure_is_stored_and_replayed(client: Client, target: Target) -> None:
    with pytest.raises(TerminalFailure), client.operation(target, REQUEST):
        raise TerminalFailure("invalid_file", "the file has no header row")
    replay = client.claim(target, REQUEST)
    assert replay.outcome is ClaimOutcome.FAILED
    assert replay.error == ErrorSummary("invalid_file", "the file has no header row")


def test_no_result_releases_or_fails_after_a_call(client: Client, target: Target) -> None:
    with client.operation(target, REQUEST) as op:
        assert op.owns
    record = client.get(target).record
    assert record.state is State.PENDING and record.lease is None, "released: the next claim takes over"
    with client.operation(target, REQUEST) as op:
        op.record_calling()
    record = client.get(target).record
    assert record.state is State.RETRYABLE_FAILURE and record.stage is Stage.CALLING
    assert record.error is not None and record.error.code == "no_result"


def test_explicit_finish_is_not_repeated(client: Client, target: Target) -> None:
    with client.operation(target, REQUEST) as op:
        op.cancel()
    assert client.get(target).record.state is State.CANCELLED


async def test_async_helper(node: Node, target: Target) -> None:
    async with AsyncClient([node.endpoint], options=FAST) as client:
        async with await client.operation(target, REQUEST) as op:
            assert op.owns
            await op.start()
            await op.renew()
            op.result = StoredResult(202, fields={"rows": "12"})
        replay = await client.claim(target, REQUEST)
        assert replay.result is not None and replay.result.fields == {"rows": "12"}
        other = Target(target.scope, target.key + "-b")
        with pytest.raises(Boom):
            async with await client.operation(other, REQUEST):
                raise Boom()
        assert (await client.get(other)).record.state is State.RETRYABLE_FAILURE
