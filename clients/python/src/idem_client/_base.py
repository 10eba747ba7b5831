"""What the sync and asyncio clients share besides their calls: settings, the router, the
credentials every call carries and how a channel to a node is set up.

The two flavours differ only in how they wait (threads or the event loop), so everything that
does not wait lives here once; the flavours keep one method per rpc, each a line long.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import grpc

from ._router import Node, Router
from ._status import LEADER_ADDR_KEY
from .options import ClientOptions, TlsConfig


def leader_hint(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """The ``leader-addr`` a forwarding follower put in its answer's metadata."""
    for key, value in metadata or ():
        if key == LEADER_ADDR_KEY and isinstance(value, str):
            return value
    return None


class ClientBase:
    """Settings, routes and credentials of a client of either flavour."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        tls: TlsConfig | None = None,
        token: str | None = None,
        options: ClientOptions | None = None,
    ) -> None:
        self.options = options or ClientOptions()
        self._router = Router.of(endpoints, self.options, secure=tls is not None)
        self._tls = tls or TlsConfig()
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def endpoints(self) -> list[str]:
        """Every known endpoint: the configured ones, then leaders learned from hints."""
        return self._router.endpoints()

    def preferred_endpoint(self) -> str:
        """Where calls that name no tenant start (the last leader learned)."""
        return self._router.node(self._router.preferred)[1].uri

    def tenant_endpoint(self, tenant: str) -> str | None:
        """Where `tenant`'s next call starts, once the client learned it."""
        return self._router.route_of(tenant)

    def _channel_settings(self, node: Node) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
        """The credentials (None for plaintext) and channel arguments of a channel to `node`."""
        options: list[tuple[str, Any]] = list(self.options.channel_options())
        if not node.secure:
            return None, options
        if self._tls.server_name:
            options.append(("grpc.ssl_target_name_override", self._tls.server_name))
        return grpc.ssl_channel_credentials(*self._tls.read()), options
