"""The owner-side helper: claim, run the body, and finish the record by how the body ended.

Finishing by hand is where services get idempotency wrong: an exception path that forgets to
fail the record leaves it leased until the lease expires, a release after an external call
began is refused, a failure message copies personal data. The helper does it in one place::

    with client.operation(target, request) as op:
        if not op.owns:
            return replay(op.claim)          # COMPLETED, IN_PROGRESS, mismatch, ...
        op.record_calling()                  # before the downstream call, key = op.operation_id
        charge = psp.charge(..., idempotency_key=op.operation_id)
        op.record_confirmed(charge.id)
        op.result = StoredResult(201, resource_id=charge.id)

On exit, for an owned record not finished explicitly (``op.complete(...)``, ``op.fail(...)``…):

=====================================  =======================================================
how the body ended                     what the helper does
=====================================  =======================================================
normally, ``op.result`` set            ``complete(result)``
normally, no result                    ``release`` (nothing irreversible began), else
                                       ``fail(retryable, "no_result")``
raised :class:`TerminalFailure`        ``fail(terminal, its summary)`` — replayed to retries
raised anything else                   ``fail(retryable, <exception class name>)``; the
                                       exception propagates
=====================================  =======================================================

The exception's text is never stored (it may hold personal data): only its class name.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from .types import Claim, ErrorSummary, Record, Stage, StoredResult

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client


class TerminalFailure(Exception):
    """Raise inside an operation to fail it for good: its summary is replayed to retries."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.summary = ErrorSummary(code, message)


class _Owner:
    """What both flavours share: the claim, the fence, the stage reached, the exit decision."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        """The claim's answer: check :attr:`owns` before doing the work."""
        self.result: StoredResult | None = None
        """Set by the body: stored with ``complete`` on a normal exit."""
        self.finished = False
        self._stage = claim.stage

    @property
    def owns(self) -> bool:
        """True when this caller owns the record and must run the operation."""
        return self.claim.owns

    @property
    def operation_id(self) -> str:
        """The operation id: the downstream's idempotency key."""
        return self.claim.operation_id

    @property
    def fence(self) -> int:
        """The fence of the owned record."""
        if self.claim.fence is None:
            raise RuntimeError(f"the claim was {self.claim.outcome.value}: this caller does not own the record")
        return self.claim.fence

    def _note(self, record: Record, finished: bool = False) -> Record:
        self._stage = record.stage
        self.finished = self.finished or finished
        return record

    def _exit_plan(self, exc: BaseException | None) -> tuple[str, object] | None:
        """What to do on exit: ``(command, argument)`` or ``None``."""
        if not self.owns or self.finished:
            return None
        if isinstance(exc, TerminalFailure):
            return "fail_terminal", exc.summary
        if exc is not None:
            return "fail_retryable", ErrorSummary(type(exc).__name__)
        if self.result is not None:
            return "complete", self.result
        if self._stage is Stage.NOT_CALLED:
            return "release", None
        return "fail_retryable", ErrorSummary("no_result", "the operation ended without a result")


class Operation(_Owner):
    """The sync helper returned by :meth:`Client.operation`; a context manager."""

    def __init__(self, client: Client, claim: Claim) -> None:
        super().__init__(claim)
        self._client = client

    def start(self) -> Record:
        """PENDING → IN_PROGRESS."""
        return self._note(self._client.start(self.claim.target, self.fence))

    def record_calling(self, remote_ref: str | None = None) -> Record:
        """Records CALLING before the downstream call."""
        return self._note(self._client.record_calling(self.claim.target, self.fence, remote_ref))

    def record_confirmed(self, remote_ref: str) -> Record:
        """Records REMOTE_CONFIRMED with the downstream's reference."""
        return self._note(self._client.record_confirmed(self.claim.target, self.fence, remote_ref))

    def renew(self, lease: float | None = None) -> Record:
        """Extends the lease."""
        return self._note(self._client.renew(self.claim.target, self.fence, lease))

    def complete(self, result: StoredResult) -> Record:
        """Stores the result now."""
        return self._note(self._client.complete(self.claim.target, self.fence, result), True)

    def fail(self, error: ErrorSummary, *, retryable: bool) -> Record:
        """Records a failure now."""
        return self._note(self._client.fail(self.claim.target, self.fence, error, retryable=retryable), True)

    def release(self) -> Record:
        """Gives the record up now."""
        return self._note(self._client.release(self.claim.target, self.fence), True)

    def cancel(self) -> Record:
        """Cancels the operation now."""
        return self._note(self._client.cancel(self.claim.target, self.fence), True)

    def __enter__(self) -> Operation:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        plan = self._exit_plan(exc)
        if plan is None:
            return
        command, argument = plan
        if command == "complete":
            assert isinstance(argument, StoredResult)
            self.complete(argument)
        elif command == "release":
            self.release()
        else:
            assert isinstance(argument, ErrorSummary)
            self.fail(argument, retryable=command == "fail_retryable")


class AsyncOperation(_Owner):
    """The asyncio helper returned by :meth:`AsyncClient.operation`; an async context manager."""

    def __init__(self, client: AsyncClient, claim: Claim) -> None:
        super().__init__(claim)
        self._client = client

    async def start(self) -> Record:
        """PENDING → IN_PROGRESS."""
        return self._note(await self._client.start(self.claim.target, self.fence))

    async def record_calling(self, remote_ref: str | None = None) -> Record:
        """Records CALLING before the downstream call."""
        return self._note(await self._client.record_calling(self.claim.target, self.fence, remote_ref))

    async def record_confirmed(self, remote_ref: str) -> Record:
        """Records REMOTE_CONFIRMED with the downstream's reference."""
        return self._note(await self._client.record_confirmed(self.claim.target, self.fence, remote_ref))

    async def renew(self, lease: float | None = None) -> Record:
        """Extends the lease."""
        return self._note(await self._client.renew(self.claim.target, self.fence, lease))

    async def complete(self, result: StoredResult) -> Record:
        """Stores the result now."""
        return self._note(await self._client.complete(self.claim.target, self.fence, result), True)

    async def fail(self, error: ErrorSummary, *, retryable: bool) -> Record:
        """Records a failure now."""
        record = await self._client.fail(self.claim.target, self.fence, error, retryable=retryable)
        return self._note(record, True)

    async def release(self) -> Record:
        """Gives the record up now."""
        return self._note(await self._client.release(self.claim.target, self.fence), True)

    async def cancel(self) -> Record:
        """Cancels the operation now."""
        return self._note(await self._client.cancel(self.claim.target, self.fence), True)

    async def __aenter__(self) -> AsyncOperation:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        plan = self._exit_plan(exc)
        if plan is None:
            return
        command, argument = plan
        if command == "complete":
            assert isinstance(argument, StoredResult)
            await self.complete(argument)
        elif command == "release":
            await self.release()
        else:
            assert isinstance(argument, ErrorSummary)
            await self.fail(argument, retryable=command == "fail_retryable")
