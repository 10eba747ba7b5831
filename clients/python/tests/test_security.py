"""TLS, client certificates and bearer tokens against a real secured idemd.

Two nodes for the module serve their API on TLS (``idemctl cert``: a CA, a node certificate for
localhost/127.0.0.1), one asking for client certificates (``client_auth = "optional"``), one
requiring them, both with authentication on and one credentials file (``idemctl auth token
create`` plus a certificate principal). The flags are explicit, so the tests hold whatever
idemd's default is.

What a client must see: with the cluster CA it is served; a plaintext client, a client that
trusts another CA, or a client certificate of another CA never reaches a handler; no token or
an unknown one is :class:`~idem_client.errors.Unauthenticated`; a worker of tenant A naming
tenant B's scope or record is :class:`~idem_client.errors.TenantForbidden` and nothing is
written; an Admin call of a worker is :class:`~idem_client.errors.RoleForbidden`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from conftest import FAST, new_target
from idem_client import (
    AsyncClient,
    CanonicalRequest,
    Client,
    ClientOptions,
    RetryPolicy,
    StoredResult,
    TlsConfig,
    errors,
)
from idem_client._pb.idem.v1 import admin_pb2, admin_pb2_grpc
from idem_client._status import classify
from support import Node, idemctl

BODY = CanonicalRequest.with_json("POST", "/v1/charges", {"amount": 1})
REFUSED = ClientOptions(connect_timeout=1.0, request_timeout=2.0, retry=RetryPolicy(2, 0.01, 0.05, 5.0))
"""A handshake that fails fails again: two attempts are enough to see it."""


@dataclass(frozen=True)
class Secured:
    """The secured node and the credentials the tests use."""

    node: Node
    """Client certificates optional."""
    strict: Node
    """Client certificates required."""
    certs: Path
    foreign: Path
    acme: str
    """Token of a worker of tenant ``acme``."""
    globex: str
    """Token of a worker of tenant ``globex``."""

    def tls(self, cert: str | None = None, *, trust: Path | None = None, issuer: Path | None = None) -> TlsConfig:
        """TLS settings trusting the cluster CA (or the CA of directory `trust`), presenting
        client certificate `cert` issued by the cluster CA (or by the CA of `issuer`)."""
        directory = issuer or self.certs
        return TlsConfig(
            cacert=(trust or self.certs) / "ca.pem",
            cert=directory / f"{cert}.pem" if cert else None,
            key=directory / f"{cert}-key.pem" if cert else None,
        )


def token(credentials: Path, name: str, tenant: str) -> str:
    """A new worker token of `tenant` in the credentials file, as ``idemctl`` prints it."""
    out = idemctl("-w", "json", "auth", "token", "create", "--credentials", str(credentials),
                  "--name", name, "--role", "worker", "--tenant", tenant)  # fmt: skip
    value = json.loads(out)["token"]
    assert isinstance(value, str) and value.startswith("idem_")
    return value


@pytest.fixture(scope="module")
def secured() -> Iterator[Secured]:
    """Nodes on TLS with client certificates and authentication on, and their credentials."""
    root = Path(tempfile.mkdtemp(prefix="idem-py-sec-"))
    certs, foreign = root / "certs", root / "foreign"
    certs.mkdir()
    foreign.mkdir()
    idemctl("cert", "create-ca", "--dir", str(certs))
    idemctl("cert", "node", "--dir", str(certs), "--name", "node1", "--dns", "localhost", "--ip", "127.0.0.1")
    idemctl("cert", "client", "--dir", str(certs), "--name", "svc-acme")
    idemctl("cert", "create-ca", "--dir", str(foreign))
    idemctl("cert", "client", "--dir", str(foreign), "--name", "svc-acme")  # same name, other CA
    credentials = root / "credentials.toml"
    acme, globex = token(credentials, "acme-worker", "acme"), token(credentials, "globex-worker", "globex")
    with credentials.open("a") as f:
        f.write('\n[[certificate]]\nname = "svc-acme"\nrole = "worker"\ntenants = ["acme"]\n')
    nodes = [secured_node(certs, credentials, "optional"), secured_node(certs, credentials, "require")]
    try:
        for node in nodes:
            node.wait_healthy()
        yield Secured(nodes[0], nodes[1], certs, foreign, acme, globex)
    finally:
        for node in nodes:
            node.remove()
        shutil.rmtree(root, ignore_errors=True)


def secured_node(certs: Path, credentials: Path, client_auth: str) -> Node:
    """A started node on TLS (client certificates `client_auth`) with authentication on."""
    node = Node(security=[
        "--tls-cert", str(certs / "node1.pem"), "--tls-key", str(certs / "node1-key.pem"),
        "--tls-ca", str(certs / "ca.pem"), "--tls-client-auth", client_auth,
        "--auth", "on", "--auth-credentials", str(credentials),
    ])  # fmt: skip
    node.spawn()
    return node


def test_client_accepts_tls_and_token_settings() -> None:
    client = Client(["idem.example:7400"], tls=TlsConfig(cacert=None), token="t0k3n")
    assert client.endpoints() == ["https://idem.example:7400"]
    plain = Client(["http://127.0.0.1:7400", "127.0.0.1:7401"])
    assert plain.endpoints() == ["http://127.0.0.1:7400", "http://127.0.0.1:7401"]


def test_tls_with_the_cluster_ca_and_a_token(secured: Secured) -> None:
    target = new_target()
    with Client([secured.node.endpoint], tls=secured.tls(), token=secured.acme, options=FAST) as client:
        assert client.endpoints() == [f"https://{secured.node.endpoint}"]
        with client.operation(target, BODY) as op:
            assert op.owns
            op.result = StoredResult(201, resource_id="ch_tls")
        assert client.claim(target, BODY).result == StoredResult(201, resource_id="ch_tls")


def test_client_certificate_is_the_identity(secured: Secured) -> None:
    """Mutual TLS without a token: the certificate's name is the principal (worker of acme)."""
    with Client([secured.node.endpoint], tls=secured.tls("svc-acme"), options=FAST) as client:
        assert client.claim(new_target(), BODY).owns
        with pytest.raises(errors.TenantForbidden):
            client.claim(new_target(tenant="globex"), BODY)


@pytest.mark.parametrize("case", ["plaintext", "foreign-ca", "foreign-client-cert"])
def test_handshake_failures_never_reach_a_handler(secured: Secured, case: str) -> None:
    """A plaintext client, one trusting another CA, and one presenting a certificate of another
    CA (with the principal's very name) fail the handshake: Unavailable, never served."""
    endpoint, tls = secured.node.endpoint, None
    if case == "plaintext":
        endpoint = f"http://{endpoint}"
    elif case == "foreign-ca":
        tls = secured.tls(trust=secured.foreign)
    else:
        tls = secured.tls("svc-acme", issuer=secured.foreign)
    with Client([endpoint], tls=tls, token=secured.acme, options=REFUSED) as client:
        with pytest.raises(errors.Unavailable) as refused:
            client.claim(new_target(), BODY)  # a write: Unavailable says it was never sent
        assert refused.value.reason == "UNAVAILABLE"


def test_required_client_certificate(secured: Secured) -> None:
    """With ``client_auth = "require"`` a token alone does not get past the handshake."""
    endpoint = [secured.strict.endpoint]
    with Client(endpoint, tls=secured.tls(), token=secured.acme, options=REFUSED) as client:
        with pytest.raises(errors.Unavailable):
            client.claim(new_target(), BODY)
    with Client(endpoint, tls=secured.tls("svc-acme"), options=FAST) as client:
        assert client.claim(new_target(), BODY).owns


def test_missing_or_unknown_token_is_unauthenticated(secured: Secured) -> None:
    for credential in (None, "idem_" + "0" * 64, "not a token"):
        with Client([secured.node.endpoint], tls=secured.tls(), token=credential, options=FAST) as client:
            with pytest.raises(errors.Unauthenticated) as refused:
                client.claim(new_target(), BODY)
            assert refused.value.reason == "UNAUTHENTICATED"
            assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_worker_of_one_tenant_cannot_touch_another(secured: Secured) -> None:
    theirs = new_target(tenant="globex")
    endpoint = [secured.node.endpoint]
    with (
        Client(endpoint, tls=secured.tls(), token=secured.acme, options=FAST) as acme,
        Client(endpoint, tls=secured.tls(), token=secured.globex, options=FAST) as globex,
    ):
        with pytest.raises(errors.TenantForbidden) as forbidden:
            acme.claim(theirs, BODY)
        assert forbidden.value.reason == "TENANT_FORBIDDEN" and isinstance(forbidden.value, errors.PermissionDenied)
        with pytest.raises(errors.NotFound):
            globex.get(theirs)  # the refused claim wrote nothing
        claim = globex.claim(theirs, BODY)
        assert claim.fence is not None
        with pytest.raises(errors.TenantForbidden):
            acme.complete(theirs, claim.fence, StoredResult(201, resource_id="planted"))
        for read in (lambda: acme.get(theirs), lambda: acme.get_operation(claim.operation_id)):
            with pytest.raises(errors.TenantForbidden):
                read()
        record = globex.get(theirs).record
        assert record.version == claim.version and record.result is None


def test_admin_calls_need_a_role(secured: Secured) -> None:
    """An Admin rpc with a worker's token: ROLE_FORBIDDEN, mapped to its class."""
    credentials = grpc.ssl_channel_credentials(*secured.tls().read())
    with grpc.secure_channel(secured.node.endpoint, credentials) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            admin_pb2_grpc.AdminStub(channel).ListMembers(
                admin_pb2.ListMembersRequest(), timeout=5, metadata=(("authorization", f"Bearer {secured.acme}"),)
            )
    failure = classify(refused.value.code(), refused.value.details() or "", refused.value.trailing_metadata() or ())
    assert isinstance(failure.error, errors.RoleForbidden) and failure.error.reason == "ROLE_FORBIDDEN"


async def test_async_client_on_tls_with_tokens(secured: Secured) -> None:
    endpoint = [secured.node.endpoint]
    mine, theirs = new_target(), new_target(tenant="globex")
    async with AsyncClient(endpoint, tls=secured.tls(), token=secured.acme, options=FAST) as client:
        async with await client.operation(mine, BODY) as op:
            assert op.owns
            op.result = StoredResult(201, resource_id=f"ch_{uuid.uuid4().hex[:8]}")
        with pytest.raises(errors.TenantForbidden):
            await client.claim(theirs, BODY)
    async with AsyncClient(endpoint, tls=secured.tls("svc-acme"), options=FAST) as client:
        assert (await client.get(mine)).record.result is not None
    async with AsyncClient(endpoint, tls=secured.tls(), options=FAST) as client:
        with pytest.raises(errors.Unauthenticated):
            await client.get(mine)
    async with AsyncClient(endpoint, tls=secured.tls(), token=secured.globex, options=FAST) as client:
        with pytest.raises(errors.NotFound):
            await client.get(theirs)
