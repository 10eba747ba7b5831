"""Idempotency keys for callers that have none.

Generate a key once per business intent, *before* the first attempt, and send it unchanged on
every retry of that intent: a key generated inside a retry loop makes every attempt a new
operation (docs/troubleshooting.md, "missed hits"). Both forms are unpredictable (at least 74
random bits from the operating system's generator), so another caller cannot guess one.
"""

import os
import time
import uuid

__all__ = ["new_key", "new_key_v4"]


def new_key() -> str:
    """A new key: a UUIDv7 (RFC 9562) in its hyphenated form, 36 characters.

    The first 48 bits are the current Unix time in milliseconds, so one client's keys sort by
    creation; the other 74 bits (besides version and variant) are random.
    """
    millis = time.time_ns() // 1_000_000
    random = int.from_bytes(os.urandom(10), "big")
    rand_a = random >> 68  # 12 bits
    rand_b = random & ((1 << 62) - 1)  # 62 bits
    value = (millis & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def new_key_v4() -> str:
    """A new key: a UUIDv4 (122 random bits, no time component) in its hyphenated form."""
    return str(uuid.uuid4())
