"""The asyncio client (``grpc.aio``): the same surface as :class:`~idem_client.Client`, awaited.

Use one :class:`AsyncClient` per event loop (grpc.aio channels belong to the loop that opened
them) and share it across that loop's tasks. Requests, retries, routing and errors are those of
the sync client: both send the :class:`~idem_client._calls.Call` built by the same code and
decide after each attempt with the same :class:`~idem_client._router.Attempts`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

import grpc
import grpc.aio

from . import _calls
from ._base import ClientBase, leader_hint
from ._calls import MAX_WAIT, Call
from ._pb.idem.v1 import admin_pb2, admin_pb2_grpc, idempotency_pb2_grpc
from ._router import Attempts, Node
from ._status import classify
from .fingerprint import CanonicalRequest, Fingerprint
from .operation import AsyncOperation
from .options import ClientOptions, TlsConfig
from .types import Claim, ErrorSummary, Lookup, Record, Risk, Stage, StoredResult, Target

T = TypeVar("T")


class AsyncClient(ClientBase):
    """An asyncio client of an idem cluster; arguments as :class:`~idem_client.Client`."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        tls: TlsConfig | None = None,
        token: str | None = None,
        options: ClientOptions | None = None,
    ) -> None:
        super().__init__(endpoints, tls=tls, token=token, options=options)
        self._learning = asyncio.Lock()

    async def close(self) -> None:
        """Closes every channel."""
        for node in self._router.nodes:
            if node.channel is not None:
                await node.channel.close()
                node.channel = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def claim(
        self,
        target: Target,
        request: CanonicalRequest | None = None,
        *,
        fingerprints: Sequence[Fingerprint] | None = None,
        local_fingerprint: bool = False,
        risk: Risk | None = None,
        lease: float | None = None,
        retention: float | None = None,
        max_result_bytes: int | None = None,
        holder: str | None = None,
        timeout: float | None = None,
    ) -> Claim:
        """Claims the record of `target`: see :meth:`idem_client.Client.claim`."""
        call = _calls.claim(
            target,
            request,
            fingerprints=fingerprints,
            local_fingerprint=local_fingerprint,
            risk=risk,
            lease=lease,
            retention=retention,
            max_result_bytes=max_result_bytes,
            holder=holder,
        )
        return await self._run(call, timeout)

    async def start(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: PENDING → IN_PROGRESS."""
        return await self._run(_calls.start(target, fence), timeout)

    async def record_external_call(
        self, target: Target, fence: int, stage: Stage, remote_ref: str | None = None
    ) -> Record:
        """Owner: records CALLING before a downstream call or REMOTE_CONFIRMED after."""
        return await self._run(_calls.record_external_call(target, fence, stage, remote_ref))

    async def record_calling(self, target: Target, fence: int, remote_ref: str | None = None) -> Record:
        """Owner: ``record_external_call(…, Stage.CALLING)``."""
        return await self.record_external_call(target, fence, Stage.CALLING, remote_ref)

    async def record_confirmed(self, target: Target, fence: int, remote_ref: str) -> Record:
        """Owner: ``record_external_call(…, Stage.REMOTE_CONFIRMED, remote_ref)``."""
        return await self.record_external_call(target, fence, Stage.REMOTE_CONFIRMED, remote_ref)

    async def renew(
        self, target: Target, fence: int, lease: float | None = None, *, timeout: float | None = None
    ) -> Record:
        """Owner: extends the lease to now + `lease` seconds (default: the record's)."""
        return await self._run(_calls.renew(target, fence, lease), timeout)

    async def complete(
        self, target: Target, fence: int, result: StoredResult, *, timeout: float | None = None
    ) -> Record:
        """Owner: stores the result; the record becomes COMPLETED and is replayed."""
        return await self._run(_calls.complete(target, fence, result), timeout)

    async def fail(
        self, target: Target, fence: int, error: ErrorSummary, *, retryable: bool, timeout: float | None = None
    ) -> Record:
        """Owner: records a failure, retryable (the next claim takes over) or terminal."""
        return await self._run(_calls.fail(target, fence, error, retryable), timeout)

    async def release(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: gives the record up; only before any external call."""
        return await self._run(_calls.release(target, fence), timeout)

    async def cancel(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: cancels the operation (terminal); only before any external call."""
        return await self._run(_calls.cancel(target, fence), timeout)

    async def get(self, target: Target, *, timeout: float | None = None) -> Lookup:
        """Reads the record of `target` and what a matching claim would see."""
        return await self._run(_calls.get(target), timeout)

    async def get_operation(self, operation_id: str, *, timeout: float | None = None) -> Lookup:
        """Reads a record by its operation id."""
        return await self._run(_calls.get_operation(operation_id), timeout)

    async def wait(self, target: Target, timeout: float = MAX_WAIT) -> Lookup:
        """Waits up to `timeout` seconds (at most 30) for the record to settle."""
        return await self._run(_calls.wait(target, None, timeout))

    async def wait_operation(self, operation_id: str, timeout: float = MAX_WAIT) -> Lookup:
        """Waits up to `timeout` seconds (at most 30) for an operation to settle."""
        return await self._run(_calls.wait(None, operation_id, timeout))

    async def operation(self, target: Target, request: CanonicalRequest | None = None, **claim: Any) -> AsyncOperation:
        """Claims `target` and returns the owner-side helper, an async context manager::

        async with await client.operation(target, request) as op: ...
        """
        return AsyncOperation(self, await self.claim(target, request, **claim))

    def _channel(self, node: Node) -> grpc.aio.Channel:
        if node.channel is None:
            credentials, options = self._channel_settings(node)
            if credentials is not None:
                node.channel = grpc.aio.secure_channel(node.target, credentials, options)
            else:
                node.channel = grpc.aio.insecure_channel(node.target, options)
        channel: grpc.aio.Channel = node.channel
        return channel

    async def _run(self, call: Call[T], timeout: float | None = None) -> T:
        attempts = Attempts(self._router, call.tenant, call.write, self.options.retry)
        per_attempt = (timeout or self.options.request_timeout) + call.extra_timeout
        while True:
            attempt = attempts.next()
            if call.tenant is not None and attempt == 1 and self._router.needs_regions():
                await self._learn_regions()
            index, node = self._router.start(call.tenant, attempt)
            method = getattr(idempotency_pb2_grpc.IdempotencyStub(self._channel(node)), call.rpc)
            rpc = method(call.request, timeout=per_attempt, metadata=self._metadata)
            try:
                response = await rpc
                initial = await rpc.initial_metadata()
                trailing = await rpc.trailing_metadata()
            except grpc.aio.AioRpcError as e:
                failure = classify(e.code(), e.details() or "", e.trailing_metadata() or ())
                await asyncio.sleep(attempts.after(failure, index, node))
                continue
            hint = leader_hint(initial) or leader_hint(trailing)
            self._router.follow_answer(call.tenant, hint, index, node)
            return call.parse(response)

    async def _learn_regions(self) -> None:
        """Learns the endpoints' regions from the first one whose ``Admin.Status`` answers."""
        async with self._learning:
            if not self._router.needs_regions():
                return
            wait = min(self.options.request_timeout, 2 * self.options.connect_timeout)
            for node in list(self._router.nodes):
                stub = admin_pb2_grpc.AdminStub(self._channel(node))
                try:
                    status = await stub.Status(admin_pb2.StatusRequest(), timeout=wait, metadata=self._metadata)
                except grpc.aio.AioRpcError:
                    continue
                self._router.note_regions(node, status)
                return
            self._router.note_regions(self._router.nodes[0], None)
