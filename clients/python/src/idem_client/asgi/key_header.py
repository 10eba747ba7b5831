"""The ``Idempotency-Key`` header: an RFC 8941 Structured Field Item whose value is a String.

draft-ietf-httpapi-idempotency-key-header defines the header as an sf-string
(``Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"``); a token, a number, a missing
quote or a second header is malformed. Parameters are allowed by the Item grammar and ignored.
On top of the grammar, the key must be one idem accepts: 1 to 255 bytes of
``[A-Za-z0-9._:~-]``. The parser is a single bounded pass: no regex backtracking, no
recursion, input longer than :data:`MAX_HEADER` refused before it is looked at.
"""

from __future__ import annotations

import string

MAX_HEADER = 1024
"""Longest header value looked at, in bytes."""
MAX_KEY = 255
"""Longest idempotency key idem accepts, in bytes."""
KEY_CHARS = frozenset(string.ascii_letters + string.digits + "._:~-")
_KEY_START = frozenset(string.ascii_lowercase + "*")
_KEY_REST = frozenset(string.ascii_lowercase + string.digits + "_-.*")
_TOKEN = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~:/")


class MalformedKey(ValueError):
    """The header is not an sf-string holding a valid idem key."""


def parse_key(values: list[bytes]) -> str:
    """The idempotency key of the request's ``Idempotency-Key`` header values (exactly one)."""
    if len(values) != 1:
        raise MalformedKey("exactly one Idempotency-Key header is allowed")
    raw = values[0]
    if len(raw) > MAX_HEADER:
        raise MalformedKey(f"the header is longer than {MAX_HEADER} bytes")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedKey("the header is not ASCII") from None
    key = parse_item_string(text)
    if not 1 <= len(key) <= MAX_KEY or not set(key) <= KEY_CHARS:
        raise MalformedKey(f"the key must be 1 to {MAX_KEY} characters of [A-Za-z0-9._:~-]")
    return key


def parse_item_string(text: str) -> str:
    """Parses an sf-item whose bare item is a String; returns the string."""
    pos = _skip_sp(text, 0)
    value, pos = _string(text, pos)
    pos = _parameters(text, pos)
    if _skip_sp(text, pos) != len(text):
        raise MalformedKey("unexpected characters after the key")
    return value


def _skip_sp(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _string(text: str, pos: int) -> tuple[str, int]:
    if pos >= len(text) or text[pos] != '"':
        raise MalformedKey("the key must be a quoted Structured Field string")
    out: list[str] = []
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            if pos + 1 >= len(text) or text[pos + 1] not in '"\\':
                raise MalformedKey("bad escape in the key")
            out.append(text[pos + 1])
            pos += 2
        elif char == '"':
            return "".join(out), pos + 1
        elif " " <= char <= "~":
            out.append(char)
            pos += 1
        else:
            raise MalformedKey("control character in the key")
    raise MalformedKey("unterminated string")


def _parameters(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == ";":
        pos = _skip_sp(text, pos + 1)
        if pos >= len(text) or text[pos] not in _KEY_START:
            raise MalformedKey("bad parameter name")
        while pos < len(text) and text[pos] in _KEY_REST:
            pos += 1
        if pos < len(text) and text[pos] == "=":
            pos = _bare_item(text, pos + 1)
    return pos


def _bare_item(text: str, pos: int) -> int:
    """Skips a parameter value: string, token, number, byte sequence or boolean."""
    if pos >= len(text):
        raise MalformedKey("missing parameter value")
    char = text[pos]
    if char == '"':
        return _string(text, pos)[1]
    if char == "?":
        if pos + 1 < len(text) and text[pos + 1] in "01":
            return pos + 2
        raise MalformedKey("bad boolean parameter")
    if char == ":":
        end = text.find(":", pos + 1)
        if end < 0:
            raise MalformedKey("unterminated byte sequence")
        return end + 1
    if char == "-" or char.isdigit():
        end = pos + 1
        while end < len(text) and (text[end].isdigit() or text[end] == "."):
            end += 1
        return end
    if char.isalpha() or char == "*":
        end = pos + 1
        while end < len(text) and text[end] in _TOKEN:
            end += 1
        return end
    raise MalformedKey("bad parameter value")
