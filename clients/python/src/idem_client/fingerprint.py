"""``jcs-sha256/v1`` computed locally: RFC 8785 (JCS) canonical JSON and the canonical request.

By default the client sends the parsed request (:class:`CanonicalRequest`) and the server
computes the fingerprint, so client and server can never disagree. Callers that send
digests instead (to keep request bodies off the wire, or to send two algorithms during an
upgrade) compute them here with :meth:`CanonicalRequest.fingerprint`; the test suite checks
that this digest equals the server's for the same request.

The canonical form is SHA-256 over the RFC 8785 serialisation of
``{"method", "route", "path_params", "query", "body"}`` (``body`` omitted when the request has
none; ``query`` maps each name to the list of its values in order). RFC 8785 in short: no
whitespace; numbers are IEEE-754 doubles written as ECMAScript's ``Number.prototype.toString``
writes them (``1.0`` → ``1``, ``1E30`` → ``1e+30``, integers above 2**53 rounded); strings
escape only ``"``, ``\\`` and controls; object members sorted by their UTF-16 code units.
Raw JSON bodies are parsed strictly (I-JSON): no duplicate member names, no lone surrogates,
no NaN or infinities, nesting and size bounded.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .errors import IdemError, invalid

JCS_SHA256_V1 = "jcs-sha256/v1"
"""The only fingerprint algorithm defined so far."""
MAX_BYTES = 1 << 20
"""Default limit on a raw JSON body and on the canonical form, as the server's default."""
MAX_DEPTH = 128
"""Nesting limit of arrays and objects in a body."""
MAX_METHOD = 16
MAX_ROUTE = 2048

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class FingerprintError(ValueError):
    """A request that cannot be fingerprinted; :attr:`reason` is ``BODY_TOO_LARGE`` for a size
    limit, else ``INVALID_ARGUMENT``."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.reason = "BODY_TOO_LARGE" if too_large else "INVALID_ARGUMENT"

    def to_idem_error(self) -> IdemError:
        """The same problem as the client's :class:`~idem_client.errors.InvalidArgument`."""
        return invalid(self.reason, str(self))


@dataclass(frozen=True)
class Fingerprint:
    """A request fingerprint as sent in ``ClaimRequest.fingerprints``."""

    algorithm: str
    schema_version: int
    digest: bytes

    def hex(self) -> str:
        """The digest in lower-case hex."""
        return self.digest.hex()


@dataclass(frozen=True)
class CanonicalRequest:
    """The identifying parts of an HTTP request.

    ``query`` holds decoded ``(name, value)`` pairs in the order they appeared: the order of
    different names does not matter, the order of one name's values does. ``body_json`` is
    the raw JSON body; ``None`` means "no body", which differs from the JSON literal ``null``.
    Use :meth:`with_json` to build one from a Python value.
    """

    method: str
    route: str
    path_params: dict[str, str] = field(default_factory=dict)
    query: list[tuple[str, str]] = field(default_factory=list)
    body_json: bytes | None = None
    schema_version: int = 1

    @staticmethod
    def with_json(method: str, route: str, body: Any, **kwargs: Any) -> CanonicalRequest:
        """A request whose body is the JSON serialisation of `body` (dict, list, str, ...)."""
        text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return CanonicalRequest(method, route, body_json=text.encode(), **kwargs)

    def canonical_bytes(self, max_bytes: int = MAX_BYTES) -> bytes:
        """The RFC 8785 canonical JSON of this request."""
        if not (
            1 <= len(self.method) <= MAX_METHOD
            and self.method.isascii()
            and self.method.isalpha()
            and self.method.isupper()
        ):
            raise FingerprintError(f"method {self.method[:64]!r} must be 1 to 16 upper-case letters A-Z")
        if not 1 <= len(self.route.encode()) <= MAX_ROUTE:
            raise FingerprintError(f"route must be 1 to {MAX_ROUTE} bytes")
        members: dict[str, Any] = {
            "method": self.method,
            "route": self.route,
            "path_params": dict(self.path_params),
            "query": _group_query(self.query),
        }
        if self.body_json is not None:
            members["body"] = parse_strict(self.body_json, max_bytes)
        out = canonicalize(members)
        if len(out) > max_bytes:
            raise FingerprintError(f"canonical request is {len(out)} bytes, above {max_bytes}", too_large=True)
        return out

    def fingerprint(self) -> Fingerprint:
        """The ``jcs-sha256/v1`` fingerprint, tagged with :attr:`schema_version`."""
        digest = hashlib.sha256(self.canonical_bytes()).digest()
        return Fingerprint(JCS_SHA256_V1, self.schema_version, digest)


def _group_query(query: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in query:
        grouped.setdefault(name, []).append(value)
    return grouped


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 bytes of a Python JSON value (dict, list, str, int, float, bool, None)."""
    parts: list[str] = []
    _write(value, parts, 0)
    return "".join(parts).encode("utf-8")


def _write(value: Any, out: list[str], depth: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, (int, float)):
        out.append(number(value))
    elif isinstance(value, str):
        out.append(string(value))
    elif isinstance(value, (list, tuple)):
        _enter(depth)
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        _enter(depth)
        out.append("{")
        names = sorted(value, key=_utf16)
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise FingerprintError("object member names must be strings")
            if i:
                out.append(",")
            out.append(string(name))
            out.append(":")
            _write(value[name], out, depth + 1)
        out.append("}")
    else:
        raise FingerprintError(f"{type(value).__name__} is not a JSON value")


def _enter(depth: int) -> None:
    if depth >= MAX_DEPTH:
        raise FingerprintError(f"JSON nesting is deeper than the limit of {MAX_DEPTH} levels")


def _utf16(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like the sequence of UTF-16 code units.
    return name.encode("utf-16-be", "surrogatepass")


def string(text: str) -> str:
    """A JSON string in RFC 8785 form."""
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        elif "\ud800" <= char <= "\udfff":
            raise FingerprintError("lone UTF-16 surrogate in a string")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def number(value: int | float) -> str:
    """A number as ECMAScript's ``Number.prototype.toString`` writes the nearest double."""
    try:
        x = float(value)
    except OverflowError:
        raise FingerprintError("number is out of the IEEE-754 double range") from None
    if not math.isfinite(x):
        raise FingerprintError("number is NaN or infinite, which JSON cannot represent")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr() is the shortest text that round-trips, as ECMAScript requires.
    _, digits_tuple, exponent = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple))
    k = len(digits)
    n = int(exponent) + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def parse_strict(raw: bytes, max_bytes: int = MAX_BYTES) -> Any:
    """Parses RFC 8259 JSON in UTF-8 as RFC 8785 requires (I-JSON), numbers as doubles."""
    if len(raw) > max_bytes:
        raise FingerprintError(f"JSON is {len(raw)} bytes, above the limit of {max_bytes}", too_large=True)
    try:
        text = raw.decode("utf-8")
        value = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_constant=_reject_constant,
            parse_int=_as_double,
            parse_float=_as_double,
        )
    except FingerprintError:
        raise
    except RecursionError:
        raise FingerprintError(f"JSON nesting is deeper than the limit of {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise FingerprintError(f"not valid JSON: {e}") from None
    _check(value, 0)
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise FingerprintError(f"duplicate object member name {name[:64]!r}")
        members[name] = value
    return members


def _reject_constant(name: str) -> Any:
    raise FingerprintError(f"{name} is not JSON")


def _as_double(text: str) -> float:
    try:
        x = float(text)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise FingerprintError("number is out of the IEEE-754 double range")
    return x


def _check(value: Any, depth: int) -> None:
    """Bounds the depth and refuses lone surrogates (json.loads accepts both)."""
    if isinstance(value, str):
        if any("\ud800" <= c <= "\udfff" for c in value):
            raise FingerprintError("lone UTF-16 surrogate escape")
    elif isinstance(value, list):
        _enter(depth)
        for item in value:
            _check(item, depth + 1)
    elif isinstance(value, dict):
        _enter(depth)
        for name, item in value.items():
            _check(name, depth + 1)
            _check(item, depth + 1)
