"""Fixtures: one single-node idemd for the whole session, clients with short retries, and
fresh targets (a new key per test, so tests never see each other's records)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from idem_client import Client, ClientOptions, RetryPolicy, Scope, Target
from support import Node, single_node

FAST = ClientOptions(
    connect_timeout=1.0,
    request_timeout=5.0,
    retry=RetryPolicy(max_attempts=10, initial_backoff=0.02, max_backoff=0.5, total_budget=20.0),
)
"""Client settings for tests: short backoffs, a budget that outlasts a failover."""


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    """A single-node cluster shared by the session."""
    started = single_node()
    yield started
    started.remove()


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    """A sync client of the single node."""
    with Client([node.endpoint], options=FAST) as c:
        yield c


def new_target(endpoint: str = "POST /v1/charges", tenant: str = "acme") -> Target:
    """A target with a key no other test uses."""
    return Target(Scope(tenant, "test", "user-42", endpoint), f"k-{uuid.uuid4().hex}")


@pytest.fixture
def target() -> Target:
    """A fresh target."""
    return new_target()
