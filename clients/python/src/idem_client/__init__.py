"""idem-client: the Python client of idem, sync (:class:`Client`) and asyncio (:class:`AsyncClient`).

A service calls idem before a side effect; the answer decides whether it runs. The client is
part of that correctness story, as the Rust SDK is:

- **Same request on every retry.** A call whose answer was lost (reset connection, timeout,
  ``UNAVAILABLE_OUTCOME_UNKNOWN``) is re-sent unchanged: same key, holder, fence and
  fingerprint, so the server answers it as the first attempt instead of acting twice. A claim
  gets its ownership back (``redelivered``). Definite answers are never retried.
- **Routing.** Leader hints (``leader-addr``) are followed, per tenant; unreachable nodes are
  skipped; ``retry-after-ms`` is honoured; backoff is bounded and jittered; a region preference
  starts a tenant's first call in the client's region.
- **Typed answers and errors.** :class:`Claim` carries its outcome's fields; every failure is an
  :class:`~idem_client.errors.IdemError` subclass per idem reason.
- **Fingerprints** are computed by the server from the :class:`CanonicalRequest`, or locally
  (RFC 8785, ``jcs-sha256/v1``) for callers that send digests.

Quick start::

    from idem_client import CanonicalRequest, Client, Scope, StoredResult, Target

    client = Client(["127.0.0.1:7400"])
    target = Target(Scope("acme", "prod", "user-42", "POST /v1/charges"), "order-7f3a")
    with client.operation(target, CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 100})) as op:
        if op.owns:
            op.result = StoredResult(201, resource_id="ch_1")
"""

from ._calls import MAX_WAIT
from .aio import AsyncClient
from .client import Client
from .errors import IdemError
from .fingerprint import JCS_SHA256_V1, CanonicalRequest, Fingerprint, FingerprintError
from .keys import new_key, new_key_v4
from .operation import AsyncOperation, Operation, TerminalFailure
from .options import ClientOptions, RetryPolicy, TlsConfig
from .types import (
    Claim,
    ClaimOutcome,
    ErrorSummary,
    FingerprintInfo,
    KeyWarning,
    Lease,
    Lookup,
    Record,
    Risk,
    Scope,
    Stage,
    State,
    StoredResult,
    Target,
)

__all__ = [
    "MAX_WAIT",
    "JCS_SHA256_V1",
    "AsyncClient",
    "AsyncOperation",
    "CanonicalRequest",
    "Claim",
    "ClaimOutcome",
    "Client",
    "ClientOptions",
    "ErrorSummary",
    "Fingerprint",
    "FingerprintError",
    "FingerprintInfo",
    "IdemError",
    "KeyWarning",
    "Lease",
    "Lookup",
    "Operation",
    "Record",
    "RetryPolicy",
    "Risk",
    "Scope",
    "Stage",
    "State",
    "StoredResult",
    "Target",
    "TerminalFailure",
    "TlsConfig",
    "new_key",
    "new_key_v4",
]
