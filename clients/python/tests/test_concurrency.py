"""Concurrent first claims (threads and asyncio tasks): exactly one owner. Takeovers: the late
worker's fence is stale and changes nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import FAST
from idem_client import AsyncClient, CanonicalRequest, ClaimOutcome, Client, ErrorSummary, StoredResult, Target, errors
from support import Node

REQUEST = CanonicalRequest.with_json("POST", "/v1/orders", {"sku": "A-1", "qty": 2})
CONTENDERS = 16


def test_threads_racing_on_one_key_get_one_owner(client: Client, target: Target) -> None:
    barrier = threading.Barrier(CONTENDERS)

    def contend(_: int) -> ClaimOutcome:
        barrier.wait()
        return client.claim(target, REQUEST).outcome

    with ThreadPoolExecutor(CONTENDERS) as pool:
        outcomes = list(pool.map(contend, range(CONTENDERS)))
    assert outcomes.count(ClaimOutcome.ACQUIRED) == 1, outcomes
    assert outcomes.count(ClaimOutcome.IN_PROGRESS) == CONTENDERS - 1, outcomes


def test_threads_with_their_own_clients_get_one_owner(node: Node, target: Target) -> None:
    clients = [Client([node.endpoint], options=FAST) for _ in range(4)]
    barrier = threading.Barrier(len(clients))

    def contend(c: Client) -> ClaimOutcome:
        barrier.wait()
        return c.claim(target, REQUEST).outcome

    with ThreadPoolExecutor(len(clients)) as pool:
        outcomes = list(pool.map(contend, clients))
    for c in clients:
        c.close()
    assert sorted(o.value for o in outcomes) == ["ACQUIRED"] + ["IN_PROGRESS"] * 3


async def test_tasks_racing_on_one_key_get_one_owner(node: Node, target: Target) -> None:
    async with AsyncClient([node.endpoint], options=FAST) as client:
        claims = await asyncio.gather(*(client.claim(target, REQUEST) for _ in range(CONTENDERS)))
        owners = [c for c in claims if c.owns]
        assert len(owners) == 1
        assert {c.operation_id for c in claims} == {owners[0].operation_id}
        # The other tasks wait for the owner instead of running the operation again.
        waiting = asyncio.gather(*(client.wait(target, timeout=5) for _ in range(4)))
        await asyncio.sleep(0.1)
        await client.complete(target, owners[0].fence or 0, StoredResult(201, resource_id="o-1"))
        assert all(w.terminal for w in await waiting)


def test_takeover_makes_the_late_worker_stale(client: Client, target: Target) -> None:
    slow = client.claim(target, REQUEST, lease=0.2)
    assert slow.fence == 1
    client.start(target, 1)
    time.sleep(0.4)  # the slow worker's lease expires (paused, GC, network...)
    fast = client.claim(target, REQUEST)
    assert fast.outcome is ClaimOutcome.TAKEN_OVER and fast.fence == 2
    assert fast.previous_stage is not None
    for late in (
        lambda: client.complete(target, 1, StoredResult(201, resource_id="late")),
        lambda: client.fail(target, 1, ErrorSummary("late"), retryable=False),
        lambda: client.renew(target, 1),
        lambda: client.release(target, 1),
    ):
        with pytest.raises(errors.StaleFence):
            late()
    client.complete(target, 2, StoredResult(201, resource_id="fast"))
    replay = client.claim(target, REQUEST)
    assert replay.result is not None and replay.result.resource_id == "fast"
