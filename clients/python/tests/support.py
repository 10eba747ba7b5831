"""Real idemd processes for the tests: a single node, and a 3-node cluster on loopback.

Nodes are started the way the Rust black-box tests start them (tests/support in the
repository): free loopback ports, a temporary data directory, a log file per node, and
``/healthz`` polled until the node knows a leader. A cluster member gets an ``idemd.toml``
with short Raft timings and the ``[cluster] initial_members`` list.

The binary is ``$IDEMD``, else ``$CARGO_TARGET_DIR/release/idemd`` (default target directory
``/var/cache/idem-target``), and ``idemctl`` (certificates and tokens for the security tests)
the one beside it; ``make python-test`` builds both first. Every node gets its TLS and auth
flags explicitly (``--auth off`` unless a test secures it), whatever idemd's default.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from idem_client._pb.idem.v1 import admin_pb2, admin_pb2_grpc

READY_TIMEOUT = 30.0


def binary() -> Path:
    """The idemd binary under test; fails loudly when it was not built."""
    explicit = os.environ.get("IDEMD")
    target = os.environ.get("CARGO_TARGET_DIR", "/var/cache/idem-target")
    path = Path(explicit) if explicit else Path(target) / "release" / "idemd"
    if not path.is_file():
        raise RuntimeError(f"{path} not found: run `cargo build --release --bin idemd` (or set IDEMD)")
    return path


def idemctl(*args: str) -> str:
    """Runs the ``idemctl`` built beside idemd; its standard output (fails with its errors)."""
    done = subprocess.run([str(binary().with_name("idemctl")), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"idemctl {' '.join(args[:3])} failed: {done.stderr}")
    return done.stdout


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port that was free a moment ago, never one this process handed out before.

    The kernel may give a just-closed ephemeral port again, so two nodes started back to back
    could otherwise be handed the same port and one fail with "address already in use".
    """
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class Node:
    """One idemd process: ports, data directory, log, lifecycle."""

    def __init__(
        self,
        node_id: int = 1,
        config: str | None = None,
        ports: tuple[int, int, int] | None = None,
        security: Sequence[str] = ("--auth", "off"),
    ) -> None:
        self.id = node_id
        self.security = list(security)
        """TLS and auth flags; explicit, so the tests do not depend on idemd's default."""
        self.api, self.raft, self.http = ports or (free_port(), free_port(), free_port())
        self.dir = Path(tempfile.mkdtemp(prefix=f"idem-py-n{node_id}-"))
        self.config = None
        if config is not None:
            self.config = self.dir / "idemd.toml"
            self.config.write_text(config)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def endpoint(self) -> str:
        """The API endpoint, ``127.0.0.1:port``."""
        return f"127.0.0.1:{self.api}"

    def spawn(self) -> None:
        """Starts the process (no wait)."""
        self.starts += 1
        log = open(self.dir / f"idemd.{self.starts}.log", "wb")
        args = [str(binary())]
        if self.config is not None:
            args += ["--config", str(self.config)]
        args += [
            "--node-id", str(self.id),
            "--data-dir", str(self.dir / "data"),
            "--api-addr", f"127.0.0.1:{self.api}",
            "--raft-addr", f"127.0.0.1:{self.raft}",
            "--http-addr", f"127.0.0.1:{self.http}",
            *self.security,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()

    def healthy(self) -> bool:
        """True when ``/healthz`` answers 200 (the node knows a leader)."""
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=1)
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def wait_healthy(self, timeout: float = READY_TIMEOUT) -> None:
        """Polls ``/healthz`` until 200; fails with the log on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return
            time.sleep(0.05)
        raise AssertionError(f"node {self.id} not healthy in time; log:\n{self.log()[-4000:]}")

    def running(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> None:
        """``kill -9``."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def remove(self) -> None:
        """Kills the process and deletes its directory (data and logs)."""
        self.kill9()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        """Everything the node logged."""
        return "\n".join((self.dir / f"idemd.{n}.log").read_text(errors="replace") for n in range(1, self.starts + 1))

    def status(self, timeout: float = 1.0) -> admin_pb2.StatusResponse | None:
        """This node's own ``Admin.Status``, or None when it does not answer."""
        with grpc.insecure_channel(self.endpoint) as channel:
            try:
                return admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=timeout)
            except grpc.RpcError:
                return None


def single_node() -> Node:
    """A started, healthy single-node cluster."""
    node = Node()
    node.spawn()
    node.wait_healthy()
    return node


class Cluster:
    """``n`` nodes listing each other as initial members; node N in region ``r{N}``."""

    def __init__(self, n: int = 3) -> None:
        ports = [(free_port(), free_port(), free_port()) for _ in range(n)]
        members = "".join(
            f'  {{ id = {i + 1}, raft_addr = "127.0.0.1:{p[1]}", api_addr = "127.0.0.1:{p[0]}", '
            f'region = "r{i + 1}", zone = "r{i + 1}-a" }},\n'
            for i, p in enumerate(ports)
        )
        self.nodes = []
        for i, p in enumerate(ports):
            config = (
                f'region = "r{i + 1}"\nzone = "r{i + 1}-a"\nwrite_timeout = "2000ms"\nread_timeout = "2000ms"\n'
                '\n[raft]\nheartbeat_interval = "100ms"\nelection_timeout = "500ms"\n'
                f"\n[cluster]\ninitial_members = [\n{members}]\n"
            )
            self.nodes.append(Node(i + 1, config, p))
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_healthy()

    def endpoints(self) -> list[str]:
        """Every node's API endpoint."""
        return [n.endpoint for n in self.nodes]

    def node(self, node_id: int) -> Node:
        """Node `node_id`."""
        return self.nodes[node_id - 1]

    def leader(self, timeout: float = READY_TIMEOUT, excluded: tuple[int, ...] = ()) -> int:
        """A running node (not excluded) that reports itself leader, highest term first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            best: tuple[int, int] | None = None
            for node in self.nodes:
                if node.id in excluded or not node.running():
                    continue
                status = node.status()
                if status is not None and status.leader_id == node.id and (best is None or status.term > best[0]):
                    best = (status.term, node.id)
            if best is not None:
                return best[1]
            time.sleep(0.05)
        raise AssertionError("no leader in time")

    def stop(self) -> None:
        """Kills every node and deletes their directories."""
        for node in self.nodes:
            node.remove()
