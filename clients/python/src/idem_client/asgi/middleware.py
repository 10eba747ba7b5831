"""A pure ASGI ``Idempotency-Key`` middleware (Starlette, FastAPI, any ASGI 3 app).

It follows draft-ietf-httpapi-idempotency-key-header with idem as the store: the first
request with a key runs the handler; a retry gets the stored answer; a concurrent duplicate
never runs the handler a second time; a key reused for another request is refused. It fails
closed: without a record (idem unreachable, region failover) the handler never runs.

=======================================  ====================================================
situation                                answer
=======================================  ====================================================
no key on a covered route (``required``)  400 ``missing-key``
key not an sf-string / not a valid key    400 ``invalid-key``
idem refuses the input (``INVALID_*``)    400 ``invalid-request`` (413 ``body-too-large``)
first request (ACQUIRED, TAKEN_OVER)      the handler runs; its answer is stored, then sent
in flight (IN_PROGRESS)                   held up to ``wait_budget`` (then answered as the
                                          first was), else 409 ``in-flight`` +
                                          ``Retry-After``
replay (COMPLETED)                        the stored status and headers, the body rendered from
                                          the stored resource, ``Idempotent-Replayed: true``
replayed failure (terminal 4xx)           its status, ``replayed-failure``, replayed
cancelled                                 409 ``cancelled``
other request, same key (MISMATCH)        422 ``fingerprint-mismatch``
FINGERPRINT_UNVERIFIABLE                  422 ``fingerprint-unverifiable`` (algorithm named)
NEEDS_RECONCILIATION                      409 (or 503) ``needs-reconciliation``
REGION_FAILOVER                           503 ``region-failover`` + ``Retry-After``
idem unavailable / outcome unknown        503 ``store-unavailable`` + ``Retry-After``
other refusal of idem (``INTERNAL``...)   500 ``store-error``
rate limited                              429 ``rate-limited`` + ``Retry-After``
=======================================  ====================================================

The handler's answer decides the record: 2xx and 3xx (and ``complete_statuses``) complete it;
429, 5xx and an exception fail it retryable (the next retry runs again); other 4xx fail it for
good (replayed). The response is held until the record is written, so a retry sent the moment
the response arrives is a replay, never a 409. What is stored is bounded and chosen (see
:mod:`.replay`): never the whole body.

The fingerprint is the request's method, route template, path parameters, decoded query and
JSON body, sent as a ``CanonicalRequest`` for the server to hash. Keys are never logged, only a
short hash of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import grpc

from .. import errors
from ..aio import AsyncClient
from ..fingerprint import CanonicalRequest
from ..types import Claim, ClaimOutcome, ErrorSummary, Lookup, Scope, State, StoredResult, Target
from .handle import IdempotencyHandle
from .key_header import MalformedKey, parse_key
from .policy import IdempotencyPolicy
from .problem import Problem
from .replay import Response, capture, failed_problem, failure_summary, replay

ASGIScope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[ASGIScope, Receive, Send], Awaitable[None]]
RouteResolver = Callable[[ASGIScope], tuple[str, dict[str, str]]]

log = logging.getLogger("idem_client.asgi")

HEADER = b"idempotency-key"
MAX_BODY = 1 << 20
"""Largest request body fingerprinted (idem's default limit)."""
UNAVAILABLE_RETRY = 1.0
"""``Retry-After`` for a store that could not be reached, in seconds."""


class IdempotencyMiddleware:
    """Wraps an ASGI app; ``app.add_middleware(IdempotencyMiddleware, client=..., tenant=...)``.

    ``tenant`` and ``actor`` are strings or callables of the ASGI scope (e.g. reading the
    authenticated principal); ``environment`` separates test from live. ``methods`` are the
    covered methods. ``route`` overrides how the route template is found (default: the
    Starlette router's matching route, else the concrete path).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: AsyncClient,
        tenant: str | Callable[[ASGIScope], str],
        environment: str,
        actor: str | Callable[[ASGIScope], str] = "anonymous",
        methods: tuple[str, ...] = ("POST", "PATCH"),
        policy: IdempotencyPolicy | None = None,
        routes: Mapping[str, IdempotencyPolicy] | None = None,
        route: RouteResolver | None = None,
    ) -> None:
        self.app = app
        self.client = client
        self.tenant = tenant
        self.environment = environment
        self.actor = actor
        self.methods = frozenset(m.upper() for m in methods)
        self.policy = policy or IdempotencyPolicy()
        self.routes = dict(routes or {})
        self.route = route or starlette_route

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        """Protects a covered request (see the module table); passes anything else through."""
        if scope["type"] != "http" or scope["method"] not in self.methods:
            await self.app(scope, receive, send)
            return
        route, path_params = self.route(scope)
        endpoint = f"{scope['method']} {route}"
        policy = self.routes.get(endpoint, self.policy)
        values = [v for k, v in scope.get("headers", []) if k.lower() == HEADER]
        if not values:
            if policy.required:
                await respond(
                    send,
                    Problem(
                        400,
                        "missing-key",
                        "Idempotency-Key is required",
                        "send an Idempotency-Key header on this route",
                        "MISSING_KEY",
                    ),
                )
            else:
                await self.app(scope, receive, send)
            return
        try:
            key = parse_key(values)
        except MalformedKey as e:
            await respond(send, Problem(400, "invalid-key", "Idempotency-Key is malformed", str(e), "INVALID_KEY"))
            return
        body = await read_body(receive)
        if body is None:
            await respond(
                send,
                Problem(
                    413,
                    "body-too-large",
                    "Request body too large",
                    f"bodies above {MAX_BODY} bytes are not accepted",
                    "BODY_TOO_LARGE",
                ),
            )
            return
        target = Target(Scope(self._tenant(scope), self.environment, self._actor(scope), endpoint), key)
        request = CanonicalRequest(
            scope["method"],
            route,
            path_params=path_params,
            query=parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True),
            body_json=body or None,
            schema_version=policy.schema_version,
        )
        await Exchange(self, scope, receive, send, policy, target, request, body).run()

    def _tenant(self, scope: ASGIScope) -> str:
        return self.tenant(scope) if callable(self.tenant) else self.tenant

    def _actor(self, scope: ASGIScope) -> str:
        return self.actor(scope) if callable(self.actor) else self.actor


class Exchange:
    """One protected request: claim, then run, replay or refuse."""

    def __init__(
        self,
        middleware: IdempotencyMiddleware,
        scope: ASGIScope,
        receive: Receive,
        send: Send,
        policy: IdempotencyPolicy,
        target: Target,
        request: CanonicalRequest,
        body: bytes,
    ) -> None:
        self.m = middleware
        self.scope, self.receive, self.send = scope, receive, send
        self.policy, self.target, self.request, self.body = policy, target, request, body
        self.key_hash = hashlib.sha256(target.key.encode()).hexdigest()[:12]

    async def run(self) -> None:
        """Claims the key and answers by the outcome; a takeover after a wait is tried once."""
        claim = await self._claim()
        if claim is None:
            return
        if claim.outcome is ClaimOutcome.IN_PROGRESS and self.policy.wait_budget > 0:
            lookup = await self._wait()
            if lookup is None:
                return
            if lookup.terminal or not lookup.outcome.owns:
                await self._answer_settled(lookup, claim)
                return
            claim = await self._claim()
            if claim is None:
                return
        await self._answer(claim)

    async def _claim(self) -> Claim | None:
        try:
            return await self.m.client.claim(
                self.target,
                self.request,
                risk=self.policy.risk,
                lease=self.policy.lease,
                retention=self.policy.retention,
            )
        except errors.IdemError as e:
            await respond(self.send, store_problem(e))
            return None

    async def _wait(self) -> Lookup | None:
        try:
            return await self.m.client.wait(self.target, timeout=self.policy.wait_budget)
        except errors.IdemError as e:
            await respond(self.send, store_problem(e))
            return None

    async def _answer(self, claim: Claim) -> None:
        outcome = claim.outcome
        if outcome.owns:
            await self._run_handler(claim)
        elif outcome is ClaimOutcome.COMPLETED and claim.result is not None:
            await replay(self.send, claim.result, claim.operation_id, self.policy.render)
        elif outcome is ClaimOutcome.FAILED:
            await respond(self.send, failed_problem(claim.state, claim.error))
        else:
            await respond(self.send, refusal(claim, self.policy))

    async def _answer_settled(self, lookup: Lookup, claim: Claim) -> None:
        """Answers a duplicate after waiting: as the first request was answered, or 409."""
        record = lookup.record
        if record.state is State.COMPLETED and record.result is not None:
            await replay(self.send, record.result, record.operation_id, self.policy.render)
        elif record.state in (State.TERMINAL_FAILURE, State.CANCELLED):
            await respond(self.send, failed_problem(record.state, record.error))
        elif lookup.outcome is ClaimOutcome.NEEDS_RECONCILIATION:
            await respond(self.send, refusal_of(ClaimOutcome.NEEDS_RECONCILIATION, self.policy, None))
        else:
            await respond(self.send, in_progress(claim.retry_after))

    async def _run_handler(self, claim: Claim) -> None:
        handle = IdempotencyHandle(self.m.client, claim)
        self.scope.setdefault("state", {})["idempotency"] = handle
        captured = Captured()
        renewer = asyncio.create_task(self._renew(handle))
        log.info("idempotency key %s: running (%s, attempt %d)", self.key_hash, claim.outcome.value, claim.attempts)
        try:
            await self.m.app(self.scope, replaying(self.body, self.receive), captured.send)
        except asyncio.CancelledError:
            await self._abandon(handle)
            raise
        except Exception as e:
            await self._finish(handle, ("fail", ErrorSummary(type(e).__name__), True))
            raise
        finally:
            renewer.cancel()
        if captured.status is None:
            await self._finish(handle, ("fail", ErrorSummary("no_response"), True))
            raise RuntimeError("the application returned without a response")
        await self._finish(handle, self._decision(captured, handle))
        await captured.replay_to(self.send)

    def _decision(self, captured: Captured, handle: IdempotencyHandle) -> tuple[str, Any, bool]:
        status = captured.status or 500
        if status < 400 or status in self.policy.complete_statuses:
            p = self.policy
            result = capture(captured.response(), handle.resource, p.replay_headers, p.body_fields, p.resource_id_field)
            return "complete", result, False
        if status == 429 or status >= 500:
            return "fail", ErrorSummary(f"http-{status}.error"), True
        return "fail", failure_summary(status, handle.failure), False

    async def _finish(self, handle: IdempotencyHandle, decision: tuple[str, Any, bool]) -> None:
        """Writes the handler's outcome; a failure to write is logged, the response still goes
        out (the work was done; a retry is answered from the record once it settles)."""
        command, argument, retryable = decision
        try:
            if command == "complete":
                try:
                    await self.m.client.complete(self.target, handle.fence, argument)
                except (errors.ResultTooLarge, errors.InvalidResult):
                    # The chosen headers or fields do not fit: store the status and resource only.
                    bare = StoredResult(argument.status_code, argument.resource_id, argument.resource_version)
                    await self.m.client.complete(self.target, handle.fence, bare)
            else:
                await self.m.client.fail(self.target, handle.fence, argument, retryable=retryable)
        except errors.IdemError as e:
            log.warning("idempotency key %s: could not record the outcome: %s", self.key_hash, e.reason)

    async def _abandon(self, handle: IdempotencyHandle) -> None:
        """The request was cancelled (client gone): give the record back unless an external
        call began, in which case the lease runs out and the next attempt checks the remote."""
        if handle.stage.value != "NOT_CALLED":
            return
        try:
            await asyncio.shield(self.m.client.release(self.target, handle.fence))
        except (errors.IdemError, asyncio.CancelledError):
            log.warning("idempotency key %s: could not release after cancellation", self.key_hash)

    async def _renew(self, handle: IdempotencyHandle) -> None:
        """Renews the lease every third of it while the handler runs."""
        every = (self.policy.lease or 30.0) / 3
        while True:
            await asyncio.sleep(every)
            try:
                await handle.renew(self.policy.lease)
            except errors.StaleFence:
                log.warning("idempotency key %s: lease taken over while running", self.key_hash)
                return
            except errors.IdemError as e:
                log.warning("idempotency key %s: renewal failed: %s", self.key_hash, e.reason)


class Captured:
    """The handler's response, held until the record is written."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.trailers: list[Message] = []

    async def send(self, message: Message) -> None:
        """The ``send`` given to the handler."""
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = list(message.get("headers", []))
            self.start = message
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
        else:
            self.trailers.append(message)

    def body(self) -> bytes:
        """The whole response body."""
        return b"".join(self.chunks)

    def response(self) -> Response:
        """The captured answer."""
        return Response(self.status or 500, self.headers, self.body())

    async def replay_to(self, send: Send) -> None:
        """Sends the held response as the handler produced it."""
        await send(self.start)
        await send({"type": "http.response.body", "body": self.body(), "more_body": False})
        for message in self.trailers:
            await send(message)


async def respond(send: Send, problem: Problem) -> None:
    """Answers with a problem document."""
    await send({"type": "http.response.start", "status": problem.status, "headers": problem.header_list()})
    await send({"type": "http.response.body", "body": problem.body(), "more_body": False})


def in_progress(retry_after: float | None) -> Problem:
    """409: another request with this key is being processed."""
    return Problem(
        409,
        "in-flight",
        "A request with this key is in progress",
        "retry after the first request finished",
        "IN_PROGRESS",
        retry_after=retry_after or 1.0,
    )


def refusal(claim: Claim, policy: IdempotencyPolicy) -> Problem:
    """The answer to an outcome that neither runs nor replays."""
    return refusal_of(claim.outcome, policy, claim)


def refusal_of(outcome: ClaimOutcome, policy: IdempotencyPolicy, claim: Claim | None) -> Problem:
    """409 in progress, 422 mismatch or unverifiable, 409/503 needs reconciliation."""
    if outcome is ClaimOutcome.IN_PROGRESS:
        return in_progress(claim.retry_after if claim else None)
    if outcome is ClaimOutcome.FINGERPRINT_MISMATCH:
        return Problem(
            422,
            "fingerprint-mismatch",
            "Idempotency-Key reused for another request",
            "this key was used with a different request",
            "FINGERPRINT_MISMATCH",
        )
    if outcome is ClaimOutcome.FINGERPRINT_UNVERIFIABLE:
        algorithm = (claim.required_algorithm if claim else None) or ""
        return Problem(
            422,
            "fingerprint-unverifiable",
            "The request cannot be compared",
            f"this key's request was fingerprinted with {algorithm}",
            "FINGERPRINT_UNVERIFIABLE",
            extra={"required_algorithm": algorithm},
        )
    status = policy.reconciliation_status
    return Problem(
        status,
        "needs-reconciliation",
        "The outcome of this request is being reconciled",
        "an operator is deciding the outcome of the first request",
        "NEEDS_RECONCILIATION",
        retry_after=UNAVAILABLE_RETRY if status == 503 else None,
    )


def store_problem(error: errors.IdemError) -> Problem:
    """The answer when idem refused or could not answer the claim: fail closed."""
    if isinstance(error, errors.BodyTooLarge):
        return Problem(413, "body-too-large", "Request body too large", error.message, error.reason)
    if isinstance(error, errors.InvalidArgument):
        return Problem(400, "invalid-request", "The request cannot be protected", error.message, error.reason)
    if isinstance(error, errors.RegionFailover):
        return Problem(
            503,
            "region-failover",
            "The home region is failing over",
            "retry later",
            error.reason,
            retry_after=error.retry_after or UNAVAILABLE_RETRY,
        )
    if isinstance(error, errors.LimitExceeded):
        return Problem(
            429,
            "rate-limited",
            "Too many requests",
            "retry later",
            error.reason,
            retry_after=error.retry_after or UNAVAILABLE_RETRY,
        )
    log.warning("idempotency store failed: %s", error.reason)
    unavailable = isinstance(error, (errors.Unavailable, errors.OutcomeUnknown))
    if unavailable or error.code == grpc.StatusCode.UNAVAILABLE:
        return Problem(
            503,
            "store-unavailable",
            "The idempotency store is unavailable",
            "retry later",
            error.reason,
            retry_after=error.retry_after or UNAVAILABLE_RETRY,
        )
    # A definite refusal the middleware did not expect (INTERNAL, PERMISSION_DENIED...).
    return Problem(500, "store-error", "The idempotency store failed", "the request was not run", error.reason)


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None above :data:`MAX_BODY`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body to the app, then the real channel."""
    sent = False

    async def wrapped() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return wrapped


def starlette_route(scope: ASGIScope) -> tuple[str, dict[str, str]]:
    """The route template and path parameters of the Starlette route that will serve the
    request (``scope["app"].routes``), else the concrete path and none."""
    app = scope.get("app")
    for route in getattr(app, "routes", ()):
        matches = getattr(route, "matches", None)
        path = getattr(route, "path", None)
        if matches is None or path is None:
            continue
        match, child = matches(scope)
        if match.name == "FULL":
            params = {k: str(v) for k, v in child.get("path_params", {}).items()}
            return path, params
    return scope.get("path", "/") or "/", {}
