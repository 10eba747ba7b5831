"""What is stored for a handler's answer, and how a retry is answered from it.

Only what answers a retry is stored, never the whole body (it may hold one-time secrets or
personal data): the status; the resource the answer refers to (id, version and a few stable
fields, set by the handler with ``handle.set_resource(...)`` or taken from the JSON body's
``id`` and the policy's ``body_fields``); and the route's allow-listed response headers. The
replayed body is re-rendered from that: by the policy's ``render`` hook, else as the JSON object
``{"id", "version", "operation_id", ...fields}``.

The stored form is the Rust ``idem-http`` layer's, so a record written by one middleware is
replayed identically by the other: headers are result fields named ``hdr.<name>``, other fields
are the resource's; a terminal failure is the error code ``http-<status>.<code>`` (``code``
defaults to ``error``), and a failure stored in another form replays as 422.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from ..types import ErrorSummary, State, StoredResult
from .problem import Problem

HEADER_FIELD = "hdr."
"""Prefix of the result fields that hold replayed headers."""
REPLAYED = (b"idempotent-replayed", b"true")
MAX_FIELD = 1024
"""Longest stored field value (idem's limit)."""
MAX_ID = 255

Renderer = Callable[[StoredResult, str], Awaitable[tuple[bytes, str]]]
"""``render(result, operation_id) -> (body, content type)`` of a replayed success."""


@dataclass
class Resource:
    """The resource a handler's answer refers to (``handle.set_resource``)."""

    id: str
    version: str = ""
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Failure:
    """The code and message of a terminal 4xx answer (``handle.set_failure``), replayed."""

    code: str = "error"
    message: str = ""


@dataclass
class Response:
    """A handler's answer as captured: status, headers, body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        """The first value of header `name` (lower-case)."""
        return next((v for k, v in self.headers if k.lower() == name), None)


def capture(
    response: Response,
    resource: Resource | None,
    replay_headers: tuple[str, ...],
    body_fields: tuple[str, ...],
    resource_id_field: str,
) -> StoredResult:
    """The result to store for a successful answer."""
    found = resource or from_body(response, body_fields, resource_id_field)
    fields = {name: value for name, value in found.fields.items() if fits(name, value)}
    for name in replay_headers:
        value = response.header(name.lower().encode())
        if value is not None and len(value) <= MAX_FIELD:
            fields[HEADER_FIELD + name.lower()] = value.decode("latin-1")
    return StoredResult(response.status, resource_id=found.id[:MAX_ID], resource_version=found.version, fields=fields)


def from_body(response: Response, body_fields: tuple[str, ...], resource_id_field: str) -> Resource:
    """The resource named by a JSON response body: its id member and the chosen members."""
    document = json_object(response)
    member = document.get(resource_id_field)
    resource = Resource(str(member) if isinstance(member, (str, int)) and not isinstance(member, bool) else "")
    for name in body_fields:
        if name != resource_id_field and name in document:
            value = document[name]
            resource.fields[name] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return resource


def fits(name: str, value: str) -> bool:
    """True for a storable resource field: ``[A-Za-z0-9._-]{1,64}``, not ``hdr.``, value ≤ 1 KiB."""
    valid = 0 < len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    return valid and not name.startswith(HEADER_FIELD) and len(value.encode()) <= MAX_FIELD


def json_object(response: Response) -> dict[str, Any]:
    """The response body as a JSON object, or empty when it is not one."""
    if b"json" not in (response.header(b"content-type") or b""):
        return {}
    try:
        document = json.loads(response.body)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def failure_summary(status: int, failure: Failure | None) -> ErrorSummary:
    """The error to store for a terminal failure: ``http-<status>.<code>`` and the message."""
    failure = failure or Failure()
    return ErrorSummary(f"http-{status}.{failure.code}", failure.message)


def parse_failure(error: ErrorSummary) -> tuple[int, Failure]:
    """Reads back :func:`failure_summary` (any other code: 422 with the code as is)."""
    head, dot, code = error.code.partition(".")
    status_text = head.removeprefix("http-")
    if head.startswith("http-") and dot and status_text.isdigit():
        status = int(status_text)
        if 100 <= status <= 599:
            return status, Failure(code, error.message)
    return 422, Failure(error.code, error.message)


def failed_problem(state: State, error: ErrorSummary | None) -> Problem:
    """The replay of a terminal failure (its status) or of a cancelled operation (409)."""
    if state is State.CANCELLED or error is None:
        return Problem(
            409, "cancelled", "The operation was cancelled", "a request with this key was cancelled", "CANCELLED"
        )
    status, failure = parse_failure(error)
    detail = f"{failure.code}: {failure.message}" if failure.message else failure.code
    title = "The first request with this key failed"
    return Problem(status, "replayed-failure", title, detail, "FAILED", headers=[REPLAYED])


async def render_default(result: StoredResult, operation_id: str) -> tuple[bytes, str]:
    """``{"id", "version", "operation_id", ...fields}`` as JSON."""
    document: dict[str, str] = {"id": result.resource_id, "version": result.resource_version}
    document["operation_id"] = operation_id
    for name, value in sorted(result.fields.items()):
        if not name.startswith(HEADER_FIELD):
            document.setdefault(name, value)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode(), "application/json"


async def replay(send: Any, result: StoredResult, operation_id: str, render: Renderer | None) -> None:
    """Answers a retry from a stored result, with ``Idempotent-Replayed: true``."""
    headers = [REPLAYED]
    for name, value in sorted(result.fields.items()):
        if name.startswith(HEADER_FIELD):
            headers.append((name.removeprefix(HEADER_FIELD).encode(), value.encode("latin-1")))
    body = b""
    if result.status_code not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED):
        body, content_type = await (render or render_default)(result, operation_id)
        headers.append((b"content-type", content_type.encode("latin-1")))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": result.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
