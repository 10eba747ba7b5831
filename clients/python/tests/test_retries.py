"""Retries, redelivery and leader hints against scripted fake nodes: the failures a real cluster
only shows under faults (a lost answer, a NOT_LEADER hint, a forwarded answer), made exact."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from idem_client import (
    AsyncClient,
    CanonicalRequest,
    ClaimOutcome,
    Client,
    ClientOptions,
    RetryPolicy,
    Scope,
    Target,
    errors,
)
from idem_client._pb.idem.v1 import idempotency_pb2 as pb
from idem_client._pb.idem.v1 import idempotency_pb2_grpc as pb_grpc
from support import free_port

OPTIONS = ClientOptions(connect_timeout=0.5, request_timeout=2, retry=RetryPolicy(4, 0.01, 0.05, 5))
TARGET = Target(Scope("acme", "test", "u", "POST /x"), "k1")
REQUEST = CanonicalRequest("POST", "/x", body_json=b"{}")
Action = Callable[[Any, grpc.ServicerContext], Any]


def acquired(request: pb.ClaimRequest, context: grpc.ServicerContext) -> pb.ClaimResponse:
    return pb.ClaimResponse(
        outcome=pb.CLAIM_OUTCOME_ACQUIRED, operation_id="0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d", fence=1,
        state=pb.STATE_PENDING, stage=pb.STAGE_NOT_CALLED, version=1, attempts=1, redelivered=True,
    )  # fmt: skip


def refuse(code: grpc.StatusCode, reason: str, hints: dict[str, str] | None = None, rich: bool = True) -> Action:
    """An action that fails the call as idemd does: ErrorInfo in the details, reason and hints
    in the metadata (only the metadata when not `rich`)."""

    def act(request: Any, context: grpc.ServicerContext) -> Any:
        metadata: list[tuple[str, str | bytes]] = [("idem-reason", reason), *(hints or {}).items()]
        if rich:
            info = error_details_pb2.ErrorInfo(reason=reason, domain="idem.v1", metadata=hints or {})
            detail = any_pb2.Any()
            detail.Pack(info)
            status = status_pb2.Status(code=code.value[0], message=reason.lower(), details=[detail])
            metadata.append(("grpc-status-details-bin", status.SerializeToString()))
        context.set_trailing_metadata(tuple(metadata))
        context.abort(code, reason.lower())

    return act


def forwarded(leader: str) -> Action:
    def act(request: Any, context: grpc.ServicerContext) -> Any:
        context.send_initial_metadata((("leader-addr", leader),))
        return acquired(request, context)

    return act


@dataclass
class Fake(pb_grpc.IdempotencyServicer):  # type: ignore[misc]
    """A node whose Claim answers follow a script (then ACQUIRED); records what it received."""

    script: list[Action] = field(default_factory=list)
    claims: list[pb.ClaimRequest] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def Claim(self, request: pb.ClaimRequest, context: grpc.ServicerContext) -> pb.ClaimResponse:  # noqa: N802
        self.claims.append(request)
        self.times.append(time.monotonic())
        action = self.script.pop(0) if self.script else acquired
        return action(request, context)

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetResponse:  # noqa: N802
        refuse(grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE_OUTCOME_UNKNOWN")(request, context)

    def GetOperation(self, request: pb.GetOperationRequest, context: grpc.ServicerContext) -> pb.GetResponse:  # noqa: N802
        self.times.append(time.monotonic())
        time.sleep(0.5)
        return pb.GetResponse()


@pytest.fixture
def nodes() -> Iterator[Callable[[], tuple[Fake, str]]]:
    servers: list[grpc.Server] = []

    def start() -> tuple[Fake, str]:
        fake = Fake()
        server = grpc.server(futures.ThreadPoolExecutor(4))
        pb_grpc.add_IdempotencyServicer_to_server(fake, server)
        port = free_port()
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        servers.append(server)
        return fake, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0)


def test_outcome_unknown_is_redelivered_with_the_same_holder(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE_OUTCOME_UNKNOWN", {"retry-after-ms": "300"})]
    with Client([addr], options=OPTIONS) as client:
        claim = client.claim(TARGET, REQUEST)
    assert claim.outcome is ClaimOutcome.ACQUIRED and claim.redelivered
    assert len(fake.claims) == 2
    assert fake.claims[0] == fake.claims[1], "the retry is the very same request"
    assert fake.claims[0].holder == claim.holder
    assert fake.times[1] - fake.times[0] >= 0.29, "retry-after-ms honoured"


def test_not_leader_hint_is_followed_at_once(nodes: Any) -> None:
    follower, follower_addr = nodes()
    leader, leader_addr = nodes()
    follower.script = [
        refuse(grpc.StatusCode.UNAVAILABLE, "NOT_LEADER", {"leader-id": "2", "leader-addr": leader_addr})
    ]
    with Client([follower_addr], options=OPTIONS) as client:
        assert client.claim(TARGET, REQUEST).owns
        assert len(follower.claims) == 1 and len(leader.claims) == 1
        assert client.tenant_endpoint("acme") == f"http://{leader_addr}"
        client.claim(TARGET, REQUEST)
        assert len(leader.claims) == 2, "the tenant's next call goes straight to the leader"


def test_forwarded_answers_teach_the_leader(nodes: Any) -> None:
    follower, follower_addr = nodes()
    leader, leader_addr = nodes()
    follower.script = [forwarded(leader_addr)]
    with Client([follower_addr], options=OPTIONS) as client:
        client.claim(TARGET, REQUEST)
        client.claim(TARGET, REQUEST)
    assert (len(follower.claims), len(leader.claims)) == (1, 1)


async def test_async_client_follows_hints_too(nodes: Any) -> None:
    follower, follower_addr = nodes()
    leader, leader_addr = nodes()
    follower.script = [refuse(grpc.StatusCode.UNAVAILABLE, "NOT_LEADER", {"leader-addr": leader_addr})]
    leader.script = [refuse(grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE_OUTCOME_UNKNOWN")]
    async with AsyncClient([follower_addr], options=OPTIONS) as client:
        claim = await client.claim(TARGET, REQUEST)
    # NOT_LEADER → the leader at once; OUTCOME_UNKNOWN there → the next node, same request.
    assert claim.redelivered and (len(follower.claims), len(leader.claims)) == (2, 1)
    assert {c.holder for c in follower.claims + leader.claims} == {claim.holder}


def test_definite_answers_are_not_retried(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")]
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.StaleFence) as caught:
        client.claim(TARGET, REQUEST)
    assert len(fake.claims) == 1 and caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    fake.script = [refuse(grpc.StatusCode.UNAVAILABLE, "REGION_FAILOVER", {"retry-after-ms": "1500"})]
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.RegionFailover) as failover:
        client.claim(TARGET, REQUEST)
    assert failover.value.retry_after == 1.5 and failover.value.is_region_failover


def test_reason_from_metadata_without_rich_status(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_KEY", rich=False)]
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.InvalidKey):
        client.claim(TARGET, REQUEST)


def test_wrong_group_is_retried(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.UNAVAILABLE, "WRONG_GROUP")] * 2
    with Client([addr], options=OPTIONS) as client:
        assert client.claim(TARGET, REQUEST).owns
    assert len(fake.claims) == 3


def test_exhausted_writes_are_unknown_and_reads_unavailable(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE_OUTCOME_UNKNOWN")] * 10
    with Client([addr], options=OPTIONS) as client:
        with pytest.raises(errors.OutcomeUnknown) as unknown:
            client.claim(TARGET, REQUEST)
        assert unknown.value.is_outcome_unknown and "4 attempt(s)" in unknown.value.message
        with pytest.raises(errors.Unavailable):
            client.get(TARGET)
    assert len(fake.claims) == 4


def test_per_call_deadline(nodes: Any) -> None:
    fake, addr = nodes()
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.Unavailable) as caught:
        client.get_operation("0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d", timeout=0.1)
    assert "DEADLINE_EXCEEDED" in str(caught.value) or "deadline" in str(caught.value).lower()
    assert len(fake.times) == OPTIONS.retry.max_attempts, "each attempt had its own deadline"


def test_overloaded_is_sent_to_the_next_node_after_the_hint(nodes: Any) -> None:
    full, full_addr = nodes()
    spare, spare_addr = nodes()
    full.script = [refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED", {"retry-after-ms": "200"})]
    with Client([full_addr, spare_addr], options=OPTIONS) as client:
        claim = client.claim(TARGET, REQUEST)
    assert claim.owns and (len(full.claims), len(spare.claims)) == (1, 1)
    assert full.claims[0] == spare.claims[0], "the same request, shed unread, sent again"
    assert spare.times[0] - full.times[0] >= 0.19, "retry-after-ms honoured"


def test_rate_limited_waits_for_the_hint_on_the_same_node(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", {"retry-after-ms": "200"})]
    with Client([addr], options=OPTIONS) as client:
        assert client.claim(TARGET, REQUEST).owns
    assert len(fake.claims) == 2 and fake.times[1] - fake.times[0] >= 0.19


def test_limits_beyond_the_budget_are_raised_at_once(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", {"retry-after-ms": "60000"})]
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.RateLimited) as limited:
        client.claim(TARGET, REQUEST)
    assert limited.value.retry_after == 60 and isinstance(limited.value, errors.LimitExceeded)
    fake.script = [refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED")]
    with Client([addr], options=OPTIONS) as client, pytest.raises(errors.QuotaExceeded):
        client.claim(TARGET, REQUEST)
    assert len(fake.claims) == 2, "neither was retried"


async def test_async_overloaded_everywhere_ends_overloaded(nodes: Any) -> None:
    fake, addr = nodes()
    fake.script = [refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED", {"retry-after-ms": "20"})] * 10
    async with AsyncClient([addr], options=OPTIONS) as client:
        with pytest.raises(errors.Overloaded) as shed:
            await client.claim(TARGET, REQUEST)
    assert shed.value.retry_after == 0.02 and len(fake.claims) == OPTIONS.retry.max_attempts
