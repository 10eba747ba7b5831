"""The handle a protected handler finds in ``request.state.idempotency``.

A handler that calls a downstream records the external-call ledger around it, so that a
crash in the middle is recoverable: ``CALLING`` before (passing :attr:`operation_id` as the
downstream's idempotency key), ``REMOTE_CONFIRMED`` with the downstream's reference after. After
a takeover, :attr:`previous_stage` tells the new attempt whether the previous one may have
called already (``CALLING``: ask the downstream about the operation id first).
"""

from __future__ import annotations

from ..aio import AsyncClient
from ..types import Claim, Record, Stage
from .replay import Failure, Resource


class IdempotencyHandle:
    """The owned record of the request being handled."""

    def __init__(self, client: AsyncClient, claim: Claim) -> None:
        assert claim.fence is not None
        self._client = client
        self.claim = claim
        """The claim that gave this request the record."""
        self.stage = claim.stage
        """The ledger stage as last written by this request."""
        self.resource: Resource | None = None
        """Set with :meth:`set_resource`: what a replay of a success is rendered from."""
        self.failure: Failure | None = None
        """Set with :meth:`set_failure`: the code and message of a terminal 4xx, replayed."""

    def set_resource(self, resource_id: str, version: str = "", **fields: str) -> None:
        """Names the resource this request's success refers to, and a few stable fields (names
        ``[A-Za-z0-9._-]``, short values): stored instead of what the JSON body's ``id`` gives."""
        self.resource = Resource(resource_id, version, dict(fields))

    def set_failure(self, code: str, message: str = "") -> None:
        """The stable code (``[A-Za-z0-9._-]``) and a message free of personal data of this
        request's terminal 4xx answer, replayed to retries (default code ``error``)."""
        self.failure = Failure(code, message)

    @property
    def operation_id(self) -> str:
        """The downstream's idempotency key for this operation."""
        return self.claim.operation_id

    @property
    def fence(self) -> int:
        """The fence of this attempt."""
        assert self.claim.fence is not None
        return self.claim.fence

    @property
    def taken_over(self) -> bool:
        """True when an earlier attempt of this request ran (and failed, expired or released)."""
        return self.claim.outcome.value == "TAKEN_OVER"

    @property
    def previous_stage(self) -> Stage | None:
        """After a takeover: how far the previous attempt got."""
        return self.claim.previous_stage

    async def record_calling(self, remote_ref: str | None = None) -> Record:
        """Records CALLING before the downstream call."""
        return self._note(await self._client.record_calling(self.claim.target, self.fence, remote_ref))

    async def record_confirmed(self, remote_ref: str) -> Record:
        """Records REMOTE_CONFIRMED with the downstream's reference."""
        return self._note(await self._client.record_confirmed(self.claim.target, self.fence, remote_ref))

    async def renew(self, lease: float | None = None) -> Record:
        """Extends the lease (the middleware also renews on its own while the handler runs)."""
        return self._note(await self._client.renew(self.claim.target, self.fence, lease))

    def _note(self, record: Record) -> Record:
        self.stage = record.stage
        return record
