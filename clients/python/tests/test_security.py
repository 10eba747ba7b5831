"""TLS and bearer tokens against a secured node.

idemd has no TLS or authentication yet (issue #17). The client already accepts
``Client(endpoints, tls=TlsConfig(cacert=..., cert=..., key=...), token=...)``; these tests are
the place for the end-to-end checks once the server side lands, and are skipped until then.
"""

from __future__ import annotations

import pytest

from idem_client import Client, TlsConfig

PENDING = "idemd has no TLS or token authentication yet (issue #17, security); enable once it lands"


def test_client_accepts_tls_and_token_settings() -> None:
    client = Client(["idem.example:7400"], tls=TlsConfig(cacert=None), token="t0k3n")
    assert client.endpoints() == ["https://idem.example:7400"]
    plain = Client(["http://127.0.0.1:7400", "127.0.0.1:7401"])
    assert plain.endpoints() == ["http://127.0.0.1:7400", "http://127.0.0.1:7401"]


@pytest.mark.skip(reason=PENDING)
def test_tls_with_the_cluster_ca() -> None:
    """A client with the cluster CA (and a client certificate under mutual TLS) is served; a
    plaintext client and a client certificate of another CA are refused."""


@pytest.mark.skip(reason=PENDING)
def test_worker_token_is_limited_to_its_tenants() -> None:
    """A worker token claims its own tenant's keys; another tenant's claim, owner command or
    lookup is PermissionDenied (TENANT_FORBIDDEN) and writes nothing; no token is
    Unauthenticated."""
