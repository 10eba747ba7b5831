"""The synchronous client: one method per rpc of ``idem.v1.Idempotency``.

Thread-safe: share one :class:`Client` across a service's threads (it keeps one channel per
endpoint and the learned leader). Every method builds its request once (:mod:`._calls`) and
sends that same message on every retry (see :class:`~idem_client.options.RetryPolicy`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar

import grpc

from . import _calls
from ._base import ClientBase, leader_hint
from ._calls import MAX_WAIT, Call
from ._pb.idem.v1 import admin_pb2, admin_pb2_grpc, idempotency_pb2_grpc
from ._router import Attempts, Node
from ._status import classify
from .fingerprint import CanonicalRequest, Fingerprint
from .operation import Operation
from .options import ClientOptions, TlsConfig
from .types import Claim, ErrorSummary, Lookup, Record, Risk, Stage, StoredResult, Target

T = TypeVar("T")


class Client(ClientBase):
    """A client of an idem cluster (``endpoints``: ``host:port``, ``http://`` or ``https://``).

    Nothing is connected until the first call. ``tls`` turns on TLS for endpoints without a
    scheme; ``token`` is sent as ``authorization: Bearer <token>`` with every call. ``timeout``
    on a call is its per-attempt deadline in seconds (default ``options.request_timeout``);
    ``options.retry.total_budget`` bounds the whole call.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        tls: TlsConfig | None = None,
        token: str | None = None,
        options: ClientOptions | None = None,
    ) -> None:
        super().__init__(endpoints, tls=tls, token=token, options=options)
        self._lock = threading.Lock()
        self._learning = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every channel."""
        with self._lock:
            for node in self._router.nodes:
                if node.channel is not None:
                    node.channel.close()
                    node.channel = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the Idempotency service -------------------------------------------------------------

    def claim(
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
        """Claims the record of `target`. The request is sent for the server to fingerprint,
        or fingerprinted here with ``local_fingerprint=True``, or ``fingerprints`` are sent
        as given. A claim whose answer was lost is re-sent with the same holder and gets its
        ownership back (``redelivered``)."""
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
        return self._run(call, timeout)

    def start(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: PENDING → IN_PROGRESS."""
        return self._run(_calls.start(target, fence), timeout)

    def record_external_call(self, target: Target, fence: int, stage: Stage, remote_ref: str | None = None) -> Record:
        """Owner: records ``Stage.CALLING`` before a downstream call (pass the operation id as
        its idempotency key) or ``Stage.REMOTE_CONFIRMED`` with its reference after."""
        return self._run(_calls.record_external_call(target, fence, stage, remote_ref))

    def record_calling(self, target: Target, fence: int, remote_ref: str | None = None) -> Record:
        """Owner: ``record_external_call(…, Stage.CALLING)``."""
        return self.record_external_call(target, fence, Stage.CALLING, remote_ref)

    def record_confirmed(self, target: Target, fence: int, remote_ref: str) -> Record:
        """Owner: ``record_external_call(…, Stage.REMOTE_CONFIRMED, remote_ref)``."""
        return self.record_external_call(target, fence, Stage.REMOTE_CONFIRMED, remote_ref)

    def renew(self, target: Target, fence: int, lease: float | None = None, *, timeout: float | None = None) -> Record:
        """Owner: extends the lease to now + `lease` seconds (default: the record's)."""
        return self._run(_calls.renew(target, fence, lease), timeout)

    def complete(self, target: Target, fence: int, result: StoredResult, *, timeout: float | None = None) -> Record:
        """Owner: stores the result; the record becomes COMPLETED and is replayed."""
        return self._run(_calls.complete(target, fence, result), timeout)

    def fail(
        self, target: Target, fence: int, error: ErrorSummary, *, retryable: bool, timeout: float | None = None
    ) -> Record:
        """Owner: records a failure, retryable (the next claim takes over) or terminal."""
        return self._run(_calls.fail(target, fence, error, retryable), timeout)

    def release(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: gives the record up; only before any external call."""
        return self._run(_calls.release(target, fence), timeout)

    def cancel(self, target: Target, fence: int, *, timeout: float | None = None) -> Record:
        """Owner: cancels the operation (terminal); only before any external call."""
        return self._run(_calls.cancel(target, fence), timeout)

    def get(self, target: Target, *, timeout: float | None = None) -> Lookup:
        """Reads the record of `target` (linearizable) and what a matching claim would see."""
        return self._run(_calls.get(target), timeout)

    def get_operation(self, operation_id: str, *, timeout: float | None = None) -> Lookup:
        """Reads a record by its operation id."""
        return self._run(_calls.get_operation(operation_id), timeout)

    def wait(self, target: Target, timeout: float = MAX_WAIT) -> Lookup:
        """Waits up to `timeout` seconds (at most 30) for the record to settle."""
        return self._run(_calls.wait(target, None, timeout))

    def wait_operation(self, operation_id: str, timeout: float = MAX_WAIT) -> Lookup:
        """Waits up to `timeout` seconds (at most 30) for an operation to settle."""
        return self._run(_calls.wait(None, operation_id, timeout))

    def operation(self, target: Target, request: CanonicalRequest | None = None, **claim: Any) -> Operation:
        """Claims `target` and returns the owner-side helper, a context manager: see
        :class:`~idem_client.operation.Operation`."""
        return Operation(self, self.claim(target, request, **claim))

    # --- plumbing -----------------------------------------------------------------------------

    def _channel(self, node: Node) -> grpc.Channel:
        with self._lock:
            if node.channel is None:
                credentials, options = self._channel_settings(node)
                if credentials is not None:
                    node.channel = grpc.secure_channel(node.target, credentials, options)
                else:
                    node.channel = grpc.insecure_channel(node.target, options)
            return node.channel

    def _run(self, call: Call[T], timeout: float | None = None) -> T:
        attempts = Attempts(self._router, call.tenant, call.write, self.options.retry)
        per_attempt = (timeout or self.options.request_timeout) + call.extra_timeout
        while True:
            attempt = attempts.next()
            if call.tenant is not None and attempt == 1 and self._router.needs_regions():
                self._learn_regions()
            index, node = self._router.start(call.tenant, attempt)
            method = getattr(idempotency_pb2_grpc.IdempotencyStub(self._channel(node)), call.rpc)
            try:
                response, rpc = method.with_call(call.request, timeout=per_attempt, metadata=self._metadata)
            except grpc.RpcError as e:
                failure = classify(e.code(), e.details() or "", e.trailing_metadata() or ())
                time.sleep(attempts.after(failure, index, node))
                continue
            hint = leader_hint(rpc.initial_metadata()) or leader_hint(rpc.trailing_metadata())
            self._router.follow_answer(call.tenant, hint, index, node)
            return call.parse(response)

    def _learn_regions(self) -> None:
        """Learns the endpoints' regions from the first one whose ``Admin.Status`` answers."""
        with self._learning:
            if not self._router.needs_regions():
                return
            wait = min(self.options.request_timeout, 2 * self.options.connect_timeout)
            for node in list(self._router.nodes):
                stub = admin_pb2_grpc.AdminStub(self._channel(node))
                try:
                    status = stub.Status(admin_pb2.StatusRequest(), timeout=wait, metadata=self._metadata)
                except grpc.RpcError:
                    continue
                self._router.note_regions(node, status)
                return
            self._router.note_regions(self._router.nodes[0], None)
