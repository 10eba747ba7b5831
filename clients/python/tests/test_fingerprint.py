"""The local ``jcs-sha256/v1``: RFC 8785 vectors, and the server's digest for the same request."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import new_target
from idem_client import JCS_SHA256_V1, CanonicalRequest, ClaimOutcome, Client
from idem_client.fingerprint import FingerprintError, canonicalize, number, parse_strict


def jcs(raw: bytes) -> str:
    return canonicalize(parse_strict(raw)).decode()


def test_rfc8785_sample() -> None:
    raw = (
        b'{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        b' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        b' "literals": [null, true, false]}'
    )
    assert jcs(raw) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_members_sort_by_utf16_code_units() -> None:
    members = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "\u00f6": 7}
    raw = json.dumps(members, ensure_ascii=False).encode()
    order = [k for k in parse_strict(jcs(raw).encode())]
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (4.50, "4.5"), (0.002, "0.002"),
        (1e21, "1e+21"), (1e20, "100000000000000000000"), (123456789012345680000.0, "123456789012345680000"),
        (0.000001, "0.000001"), (1e-7, "1e-7"), (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"), (9007199254740993, "9007199254740992"),
        (333333333.33333329, "333333333.3333333"), (1e30, "1e+30"), (2**53, "9007199254740992"),
    ],
)  # fmt: skip
def test_numbers_are_written_as_ecmascript_does(value: float, text: str) -> None:
    assert number(value) == text


def test_strict_parsing() -> None:
    for bad in (b'{"a":1,"a":2}', b"[NaN]", b"[Infinity]", b'"\\udc00"', b"1e400", b"[1,]", b"\xef\xbb\xbf{}", b"\xff"):
        with pytest.raises(FingerprintError):
            parse_strict(bad)
    with pytest.raises(FingerprintError):
        parse_strict(b"[" * 200 + b"]" * 200)
    with pytest.raises(FingerprintError) as large:
        parse_strict(b" " * 10, max_bytes=5)
    assert large.value.reason == "BODY_TOO_LARGE"
    assert parse_strict(b'"\\ud83d\\ude00"') == "\U0001f600"


def test_canonical_request_form() -> None:
    request = CanonicalRequest(
        "POST",
        "/v1/accounts/{id}/charges",
        path_params={"id": "42"},
        query=[("expand", "customer"), ("a", "1"), ("expand", "invoice")],
        body_json=b'{"b": 2, "a": [1.0, "x"]}',
    )
    canonical = request.canonical_bytes()
    assert canonical == (
        b'{"body":{"a":[1,"x"],"b":2},"method":"POST","path_params":{"id":"42"},'
        b'"query":{"a":["1"],"expand":["customer","invoice"]},"route":"/v1/accounts/{id}/charges"}'
    )
    fingerprint = request.fingerprint()
    assert fingerprint.algorithm == JCS_SHA256_V1 and fingerprint.schema_version == 1
    assert fingerprint.digest == hashlib.sha256(canonical).digest()
    no_body = CanonicalRequest("GET", "/x").canonical_bytes()
    null_body = CanonicalRequest("GET", "/x", body_json=b"null").canonical_bytes()
    assert no_body != null_body and b'"body":null' in null_body
    with pytest.raises(FingerprintError):
        CanonicalRequest("get", "/x").fingerprint()


REQUESTS = [
    CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 1000, "currency": "EUR"}),
    CanonicalRequest(
        "PUT",
        "/v1/accounts/{account}/items/{item}",
        path_params={"item": "é-9", "account": "acct_42"},
        query=[("z", ""), ("expand", "b"), ("expand", "a"), ("ключ", "значение")],
        body_json='{"n":[1E2,-0,0.1,1e-9,12345678901234567890],"s":"\\u00e9\\n\\u001f","€":{"\U0001f600":true,"\ufb33":null}}'.encode(),
        schema_version=3,
    ),
    CanonicalRequest("DELETE", "/v1/things/{id}", path_params={"id": "7"}),
    CanonicalRequest("POST", "/v1/null", body_json=b"null"),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=["charge", "unicode", "no-body", "null-body"])
def test_local_fingerprint_equals_the_servers_digest(client: Client, request_: CanonicalRequest) -> None:
    server_side = new_target()
    client.claim(server_side, request_)
    stored = client.get(server_side).record.fingerprint
    assert stored is not None and stored.algorithm == JCS_SHA256_V1
    local = request_.fingerprint()
    assert stored.digest == local.digest, "the server hashed the same canonical request differently"
    assert stored.schema_version == request_.schema_version

    # A digest sent by one caller and a request sent by another are the same request.
    client_side = new_target()
    assert client.claim(client_side, request_, local_fingerprint=True).outcome is ClaimOutcome.ACQUIRED
    assert client.claim(client_side, request_).outcome is ClaimOutcome.IN_PROGRESS
