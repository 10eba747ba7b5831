"""RFC 9457 problem details: every answer the middleware makes itself is ``application/problem+json``.

Each case has its own ``type`` URI (:data:`PROBLEM_BASE` + slug), so a client can branch on it
without parsing prose, and carries the idem reason or claim outcome in ``reason``. The slugs are
the ones the conformance cases (``tests/conformance/cases.json``) check.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

PROBLEM_BASE = "urn:idem:problem:"
"""Prefix of every problem ``type`` URI the middleware answers with."""


@dataclass(frozen=True)
class Problem:
    """One problem answer: status, slug, title, and the extra members and headers."""

    status: int
    slug: str
    title: str
    detail: str
    reason: str
    retry_after: float | None = None
    extra: dict[str, str] = field(default_factory=dict)
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def body(self) -> bytes:
        """The problem+json document."""
        document = {
            "type": PROBLEM_BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "reason": self.reason,
            **self.extra,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    def header_list(self) -> list[tuple[bytes, bytes]]:
        """The response headers: content type, length, Retry-After when set, extras."""
        body = self.body()
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            *self.headers,
        ]
        if self.retry_after is not None:
            headers.append((b"retry-after", retry_after_header(self.retry_after)))
        return headers


def retry_after_header(seconds: float) -> bytes:
    """A ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(seconds))).encode()
