"""A 3-node cluster: leader hints, region preference, and a leader killed mid-run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from conftest import FAST, new_target
from idem_client import AsyncClient, CanonicalRequest, ClaimOutcome, Client, ClientOptions, State, StoredResult, Target
from support import Cluster

REQUEST = CanonicalRequest.with_json("POST", "/v1/transfers", {"amount": 5})


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    started = Cluster(3)
    yield started
    started.stop()


def test_a_follower_forwards_and_names_the_leader(cluster: Cluster) -> None:
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n.id != leader)
    with Client([follower.endpoint], options=FAST) as client:
        target = new_target(tenant="hinted")
        claim = client.claim(target, REQUEST)
        assert claim.outcome is ClaimOutcome.ACQUIRED
        leader_uri = f"http://{cluster.node(leader).endpoint}"
        assert client.tenant_endpoint("hinted") == leader_uri, "leader-addr followed for the tenant"
        assert client.preferred_endpoint() == leader_uri
        client.complete(target, 1, StoredResult(201))
        assert client.get(target).record.state is State.COMPLETED


def test_region_preference_learns_regions(cluster: Cluster) -> None:
    options = ClientOptions(request_timeout=FAST.request_timeout, retry=FAST.retry, region="r2")
    with Client([cluster.node(1).endpoint], options=options) as client:
        target = new_target(tenant="regional")
        assert client.claim(target, REQUEST).owns
        regions = {node.uri: node.region for node in client._router.nodes}
        assert regions[f"http://{cluster.node(2).endpoint}"] == "r2", "a member of the client's region was added"
        assert regions[f"http://{cluster.node(1).endpoint}"] == "r1"


async def test_async_client_learns_regions_and_the_leader(cluster: Cluster) -> None:
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n.id != leader)
    options = ClientOptions(request_timeout=FAST.request_timeout, retry=FAST.retry, region=f"r{follower.id}")
    async with AsyncClient([follower.endpoint], options=options) as client:
        target = new_target(tenant="async-hinted")
        assert (await client.claim(target, REQUEST)).owns
        assert client.tenant_endpoint("async-hinted") == f"http://{cluster.node(leader).endpoint}"
        regions = {node.uri: node.region for node in client._router.nodes}
        assert regions[f"http://{follower.endpoint}"] == f"r{follower.id}"


def test_leader_killed_mid_run(cluster: Cluster) -> None:
    """Claims and completions keep succeeding while the leader dies: the client re-sends the
    same requests (same holder, same fence) and follows the new leader."""
    client = Client(cluster.endpoints(), options=FAST)
    done: list[Target] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            target = new_target(tenant="failover")
            try:
                claim = client.claim(target, REQUEST)
                assert claim.owns, claim
                client.complete(target, claim.fence or 0, StoredResult(201, resource_id=target.key))
            except BaseException as e:  # noqa: BLE001 - collected and asserted below
                failures.append(e)
                return
            done.append(target)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(done) < 30 and time.monotonic() < deadline:
        time.sleep(0.02)
    old = cluster.leader()
    before = len(done)
    cluster.node(old).kill9()
    new = cluster.leader(excluded=(old,))
    deadline = time.monotonic() + 20
    while len(done) < before + 30 and time.monotonic() < deadline and not failures:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not failures, failures
    assert len(done) >= before + 30, f"only {len(done) - before} operations after the kill"
    assert client.preferred_endpoint() == f"http://{cluster.node(new).endpoint}"
    for target in done[before - 5 :]:
        record = client.get(target).record
        assert record.state is State.COMPLETED and record.fence == 1, record
    client.close()
