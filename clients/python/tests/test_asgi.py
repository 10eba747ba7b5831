"""The ASGI middleware beyond the conformance cases: FastAPI, the ledger handle, takeovers,
lease renewal, and the key header parser."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from conftest import FAST
from idem_client import AsyncClient, CanonicalRequest, Risk, Scope, Stage, State, StoredResult, Target
from idem_client.asgi import IdempotencyMiddleware, IdempotencyPolicy, MalformedKey, parse_key
from support import Node


def fastapi_app(node: Node, policy: IdempotencyPolicy, calls: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/charges")
    async def charge(body: dict[str, Any], request: Request) -> dict[str, Any]:
        handle = request.state.idempotency
        calls.append({"previous_stage": handle.previous_stage, "taken_over": handle.taken_over})
        await handle.record_calling()
        if body.get("crash") and len(calls) == 1:
            raise RuntimeError("crashed after calling the provider")
        await asyncio.sleep(body.get("sleep", 0))
        await handle.record_confirmed(f"psp-{handle.operation_id}")
        return {"id": f"ch_{len(calls)}", "amount": body["amount"]}

    app.add_middleware(
        IdempotencyMiddleware,
        client=AsyncClient([node.endpoint], options=FAST),
        tenant="acme",
        environment="test",
        actor="user-1",
        policy=policy,
    )
    return app


async def post(app: FastAPI, key: str, body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.post("/v1/charges", json=body, headers={"Idempotency-Key": f'"{key}"'})


async def once_running(calls: list[dict[str, Any]], request: Awaitable[httpx.Response]) -> httpx.Response:
    """Sends `request` once the handler is running for the first one (so the order is sure)."""
    runs = len(calls)
    while len(calls) == runs:
        await asyncio.sleep(0.01)
    return await request


async def test_fastapi_retry_and_concurrent_duplicate(node: Node) -> None:
    calls: list[dict[str, Any]] = []
    app = fastapi_app(node, IdempotencyPolicy(), calls)
    key = uuid.uuid4().hex
    first, duplicate = await asyncio.gather(
        post(app, key, {"amount": 10, "sleep": 0.5}), once_running(calls, post(app, key, {"amount": 10, "sleep": 0.5}))
    )
    assert first.status_code == 200 and first.json() == {"id": "ch_1", "amount": 10}
    assert duplicate.status_code == 409 and int(duplicate.headers["retry-after"]) >= 1
    assert duplicate.json()["type"] == "urn:idem:problem:in-flight"
    retry = await post(app, key, {"amount": 10, "sleep": 0.5})
    assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == "ch_1" and "amount" not in retry.json(), "only the resource is replayed"
    assert len(calls) == 1

    # With a wait budget the duplicate is held and answered as the first request was.
    held = fastapi_app(node, IdempotencyPolicy(wait_budget=5), calls)
    key = uuid.uuid4().hex
    first, duplicate = await asyncio.gather(
        post(held, key, {"amount": 3, "sleep": 0.5}), once_running(calls, post(held, key, {"amount": 3, "sleep": 0.5}))
    )
    assert first.status_code == duplicate.status_code == 200
    assert "idempotent-replayed" not in first.headers and duplicate.headers["idempotent-replayed"] == "true"
    assert duplicate.json()["id"] == "ch_2"
    assert len(calls) == 2


async def test_takeover_after_a_crash_during_the_call(node: Node) -> None:
    calls: list[dict[str, Any]] = []
    app = fastapi_app(node, IdempotencyPolicy(), calls)
    key = uuid.uuid4().hex
    crashed = await post(app, key, {"amount": 4, "crash": True})
    assert crashed.status_code == 500
    retried = await post(app, key, {"amount": 4, "crash": True})
    assert retried.status_code == 200 and "idempotent-replayed" not in retried.headers
    assert calls[1] == {"previous_stage": Stage.CALLING, "taken_over": True}, "the retry learns to check the PSP"
    async with AsyncClient([node.endpoint], options=FAST) as client:
        target = Target(Scope("acme", "test", "user-1", "POST /v1/charges"), key)
        record = (await client.get(target)).record
        assert record.state is State.COMPLETED and record.fence == 2 and record.remote_ref.startswith("psp-")


async def test_lease_is_renewed_while_the_handler_runs(node: Node) -> None:
    calls: list[dict[str, Any]] = []
    app = fastapi_app(node, IdempotencyPolicy(lease=0.6), calls)
    key = uuid.uuid4().hex
    slow = asyncio.create_task(post(app, key, {"amount": 1, "sleep": 2.0}))
    await asyncio.sleep(1.4)  # more than twice the first lease
    duplicate = await post(app, key, {"amount": 1, "sleep": 2.0})
    assert duplicate.status_code == 409, "the renewed lease is still live: no takeover"
    assert (await slow).status_code == 200
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("header", "key"),
    [(b'"abc"', "abc"), (b' "a-b_c.d:e~f" ', "a-b_c.d:e~f"), (b'"k";a=1;b="x";c=?0;d=tok;e=:AQ==:', "k")],
)
def test_key_header_parses(header: bytes, key: str) -> None:
    assert parse_key([header]) == key


@pytest.mark.parametrize(
    "header",
    [b"abc", b'"abc', b'""', b'"a b"', b'"a\\"b"', b'"\xc3\xa9"', b'"k";', b'"k";A=1', b'"k" x',
     b'"' + b"k" * 256 + b'"', b'"k\x01"', b"x" * 2000],
)  # fmt: skip
def test_malformed_key_headers(header: bytes) -> None:
    with pytest.raises(MalformedKey):
        parse_key([header])
    with pytest.raises(MalformedKey):
        parse_key([b'"a"', b'"b"'])


@pytest.mark.parametrize("status", [409, 503])
async def test_needs_reconciliation_is_not_run_again(node: Node, status: int) -> None:
    """A HIGH-risk charge whose worker died during the PSP call waits for an operator: the
    middleware answers 409 (or 503) and never runs the handler."""
    calls: list[dict[str, Any]] = []
    app = fastapi_app(node, IdempotencyPolicy(reconciliation_status=status), calls)
    key = uuid.uuid4().hex
    body = b'{"amount":6}'
    target = Target(Scope("acme", "test", "user-1", "POST /v1/charges"), key)
    async with AsyncClient([node.endpoint], options=FAST) as client:
        request = CanonicalRequest("POST", "/v1/charges", body_json=body)
        claim = await client.claim(target, request, risk=Risk.HIGH, lease=0.2)
        await client.record_calling(target, claim.fence or 0)
        await asyncio.sleep(0.4)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        headers = {"Idempotency-Key": f'"{key}"', "content-type": "application/json"}
        response = await http.post("/v1/charges", content=body, headers=headers)
    assert response.status_code == status and calls == []
    assert response.json()["type"] == "urn:idem:problem:needs-reconciliation"
    assert ("retry-after" in response.headers) == (status == 503)


async def test_cancelled_request_releases_unless_a_call_began(node: Node) -> None:
    """A request cancelled mid-handler (the client went away) gives its record back when no
    external call began, so the client's retry runs at once; after CALLING it does not."""
    started = asyncio.Event()

    async def handler(scope: dict[str, Any], receive: Any, send: Any) -> None:
        handle = scope["state"]["idempotency"]
        if scope["path"] == "/calling":
            await handle.record_calling()
        started.set()
        await asyncio.sleep(30)

    middleware = IdempotencyMiddleware(
        handler, client=AsyncClient([node.endpoint], options=FAST), tenant="acme", environment="test"
    )
    async with AsyncClient([node.endpoint], options=FAST) as client:
        for path, state, leased in (("/released", State.PENDING, False), ("/calling", State.IN_PROGRESS, True)):
            key = uuid.uuid4().hex
            scope = {"type": "http", "method": "POST", "path": path, "query_string": b"",
                     "headers": [(b"idempotency-key", f'"{key}"'.encode())]}  # fmt: skip
            messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

            async def receive(messages: list[dict[str, Any]] = messages) -> dict[str, Any]:
                return messages.pop(0) if messages else {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                raise AssertionError(f"nothing is sent for a cancelled request: {message}")

            started.clear()
            task = asyncio.create_task(middleware(scope, receive, send))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            record = (await client.get(Target(Scope("acme", "test", "anonymous", f"POST {path}"), key))).record
            assert record.state is state and (record.lease is not None) == leased, path


async def test_handler_names_its_resource_and_failure(node: Node) -> None:
    """``set_resource`` / ``set_failure`` decide what is stored; ``render`` re-renders a replay.
    The stored form is idem-http's (``hdr.`` headers, ``http-<status>.<code>`` failures)."""
    from starlette.applications import Starlette
    from starlette.requests import Request as StarletteRequest
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def create(request: StarletteRequest) -> JSONResponse:
        body = await request.json()
        handle = request.state.idempotency
        if body["amount"] < 0:
            handle.set_failure("negative_amount", "amount must be positive")
            return JSONResponse({"error": "negative"}, status_code=422)
        handle.set_resource("ch_9", "v3", last4="4242")
        return JSONResponse({"id": "ignored", "secret": "s3cr3t"}, status_code=201, headers={"Location": "/c/ch_9"})

    async def render(result: StoredResult, operation_id: str) -> tuple[bytes, str]:
        return f"{result.resource_id}@{result.resource_version}".encode(), "text/plain"

    async with AsyncClient([node.endpoint], options=FAST) as client:
        for policy, expected in ((IdempotencyPolicy(), None), (IdempotencyPolicy(render=render), b"ch_9@v3")):
            app = Starlette(routes=[Route("/c", create, methods=["POST"])])
            app.add_middleware(IdempotencyMiddleware, client=client, tenant="acme", environment="test", policy=policy)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                key, bad = uuid.uuid4().hex, uuid.uuid4().hex
                for _ in range(2):
                    ok = await http.post("/c", json={"amount": 1}, headers={"Idempotency-Key": f'"{key}"'})
                    no = await http.post("/c", json={"amount": -1}, headers={"Idempotency-Key": f'"{bad}"'})
            assert ok.status_code == 201 and ok.headers["location"] == "/c/ch_9"
            if expected is None:
                assert ok.json()["id"] == "ch_9" and ok.json()["version"] == "v3" and ok.json()["last4"] == "4242"
                assert "secret" not in ok.text and ok.json()["operation_id"]
            else:
                assert ok.content == expected and ok.headers["content-type"] == "text/plain"
            assert no.status_code == 422 and no.headers["idempotent-replayed"] == "true"
            assert no.json()["detail"] == "negative_amount: amount must be positive"
            endpoint = Target(Scope("acme", "test", "anonymous", "POST /c"), key)
            record = (await client.get(endpoint)).record
            assert record.result is not None and record.result.fields == {"last4": "4242", "hdr.location": "/c/ch_9"}
            failed = (await client.get(Target(endpoint.scope, bad))).record
            assert failed.error is not None and failed.error.code == "http-422.negative_amount"


def test_failures_stored_by_other_writers_replay_as_422() -> None:
    from idem_client import ErrorSummary
    from idem_client.asgi.replay import parse_failure

    assert parse_failure(ErrorSummary("http-404.error")) == (404, replay_failure("error"))
    assert parse_failure(ErrorSummary("card_declined", "no")) == (422, replay_failure("card_declined", "no"))
    assert parse_failure(ErrorSummary("http-999.x"))[0] == 422


def replay_failure(code: str, message: str = "") -> object:
    from idem_client.asgi.replay import Failure

    return Failure(code, message)


def test_store_errors_fail_closed() -> None:
    import grpc

    from idem_client import errors
    from idem_client.asgi.middleware import store_problem

    unavailable = grpc.StatusCode.UNAVAILABLE
    cases = [
        (errors.Unavailable("UNAVAILABLE", "down"), 503, "store-unavailable", 1.0),
        (errors.OutcomeUnknown("UNAVAILABLE_OUTCOME_UNKNOWN", "timeout"), 503, "store-unavailable", 1.0),
        (errors.WrongGroup("WRONG_GROUP", "moving", code=unavailable, retry_after=2.5), 503, "store-unavailable", 2.5),
        (errors.RegionFailover("REGION_FAILOVER", "x", code=unavailable, retry_after=3), 503, "region-failover", 3),
        (errors.RateLimited("RATE_LIMITED", "x", retry_after=0.2), 429, "rate-limited", 0.2),
        (errors.Internal("INTERNAL", "x", code=grpc.StatusCode.INTERNAL), 500, "store-error", None),
        (errors.Overloaded("OVERLOADED", "x", retry_after=0.1), 429, "rate-limited", 0.1),
        (errors.QuotaExceeded("QUOTA_EXCEEDED", "x"), 429, "rate-limited", 1.0),
        (errors.TenantForbidden("TENANT_FORBIDDEN", "x"), 500, "store-error", None),
        (errors.Unauthenticated("UNAUTHENTICATED", "x"), 500, "store-error", None),
        (errors.BodyTooLarge("BODY_TOO_LARGE", "x"), 413, "body-too-large", None),
        (errors.InvalidScope("INVALID_SCOPE", "x"), 400, "invalid-request", None),
    ]
    for error, status, slug, retry_after in cases:
        problem = store_problem(error)
        assert (problem.status, problem.slug, problem.retry_after) == (status, slug, retry_after), error
        assert problem.reason == error.reason
