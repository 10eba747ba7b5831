"""Runs tests/conformance/cases.json against the ASGI middleware on a Starlette reference app and
a real idem node. The file is language-neutral (its ``schema_doc`` says how to read it), so the
Rust middleware's tests can play the same cases."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conftest import FAST
from idem_client import AsyncClient, ClientOptions, RetryPolicy
from idem_client.asgi import PROBLEM_BASE, IdempotencyMiddleware, IdempotencyPolicy
from support import Node

CASES = json.loads((Path(__file__).parent / "conformance" / "cases.json").read_text())
UNREACHABLE = ClientOptions(connect_timeout=0.2, request_timeout=1.0, retry=RetryPolicy(2, 0.01, 0.05, 2.0))


class ReferenceApp:
    """The app of ``cases.json``: routes answer as the current step's ``handler`` says."""

    def __init__(self) -> None:
        self.spec: dict[str, Any] = {}
        self.runs = 0

    async def handle(self, request: Request) -> Response:
        self.runs += 1
        spec = self.spec
        if spec.get("delay_ms"):
            await asyncio.sleep(spec["delay_ms"] / 1000)
        if spec.get("raise"):
            raise RuntimeError("the handler failed")
        status = spec.get("status", 200)
        headers = spec.get("headers", {})
        if "json" in spec or status not in (204, 303, 304):
            return JSONResponse(spec.get("json", {}), status_code=status, headers=headers)
        return Response(status_code=status, headers=headers)

    def build(self, endpoint: str, policy: dict[str, Any], options: ClientOptions) -> Starlette:
        app = Starlette(
            routes=[
                Route("/v1/charges", self.handle, methods=["POST", "GET"]),
                Route("/v1/accounts/{account}/charges", self.handle, methods=["POST"]),
            ]
        )
        app.add_middleware(
            IdempotencyMiddleware,
            client=AsyncClient([endpoint], options=options),
            tenant=lambda scope: header(scope, b"x-tenant", "acme"),
            actor=lambda scope: header(scope, b"x-actor", "user-1"),
            environment="test",
            policy=IdempotencyPolicy(
                required=policy.get("required", True),
                wait_budget=policy.get("wait_budget_ms", 0) / 1000,
                reconciliation_status=policy.get("reconciliation_status", 409),
            ),
        )
        return app


def header(scope: dict[str, Any], name: bytes, default: str) -> str:
    return next((v.decode() for k, v in scope["headers"] if k == name), default)


def substitute(headers: dict[str, str], keys: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        for placeholder, key in keys.items():
            value = value.replace(placeholder, key)
        out[name] = value
    return out


async def send(http: httpx.AsyncClient, request: dict[str, Any], keys: dict[str, str]) -> httpx.Response:
    kwargs: dict[str, Any] = {"headers": substitute(request.get("headers", {}), keys)}
    if "json" in request:
        kwargs["json"] = request["json"]
    elif "body" in request:
        kwargs["content"] = request["body"].encode()
    return await http.request(request["method"], request["path"], **kwargs)


def check(response: httpx.Response, expect: dict[str, Any], where: str) -> None:
    if "status" in expect:
        assert response.status_code == expect["status"], f"{where}: {response.status_code} {response.text}"
    for name, value in expect.get("headers", {}).items():
        assert response.headers.get(name) == value, f"{where}: header {name}: {response.headers}"
    for name in expect.get("headers_present", []):
        assert name in response.headers, f"{where}: no {name} header"
    for name in expect.get("headers_absent", []):
        assert name not in response.headers, f"{where}: unexpected {name} header"
    if "problem" in expect:
        assert response.headers["content-type"] == "application/problem+json", where
        document = response.json()
        assert document["type"] == PROBLEM_BASE + expect["problem"], f"{where}: {document}"
        assert document["status"] == response.status_code and document["title"] and document["reason"]
    if "json" in expect:
        assert response.json() == expect["json"], f"{where}: {response.text}"
    if "json_includes" in expect:
        document = response.json()
        assert {k: document.get(k) for k in expect["json_includes"]} == expect["json_includes"], f"{where}: {document}"


async def play_step(http: httpx.AsyncClient, step: dict[str, Any], keys: dict[str, str], where: str) -> None:
    repeat = step.get("repeat", 1)
    if step.get("concurrent"):
        responses = await asyncio.gather(*(send(http, step["request"], keys) for _ in range(repeat)))
    else:
        responses = [await send(http, step["request"], keys) for _ in range(repeat)]
    if "expect_statuses" in step:
        counts = Counter(str(r.status_code) for r in responses)
        assert dict(counts) == step["expect_statuses"], f"{where}: {[(r.status_code, r.text) for r in responses]}"
    for response in responses:
        check(response, step.get("expect", {}), where)
        check(response, step.get(f"expect_{response.status_code}", {}), where)


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["name"] for c in CASES["cases"]])
async def test_case(node: Node, case: dict[str, Any]) -> None:
    reference = ReferenceApp()
    unreachable = case.get("store") == "unreachable"
    endpoint = "127.0.0.1:1" if unreachable else node.endpoint
    app = reference.build(endpoint, case.get("policy", {}), UNREACHABLE if unreachable else FAST)
    keys = {"$KEY2": f"k-{uuid.uuid4().hex}", "$KEY": f"k-{uuid.uuid4().hex}"}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        for i, step in enumerate(case["steps"]):
            reference.spec = step.get("handler", {"status": 200, "json": {}})
            where = f"{case['name']} step {i + 1}"
            await play_step(http, step, keys, where)
            if "handler_runs" in step:
                assert reference.runs == step["handler_runs"], f"{where}: handler ran {reference.runs} times"
