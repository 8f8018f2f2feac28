"""A real Redis Cluster for the tests: 3 masters and 3 replicas on loopback.

Six ``redis-server --cluster-enabled yes`` processes on free ports (each port p
with its bus port p + 10000 free too), each in its own directory, joined by
``redis-cli --cluster create --cluster-replicas 1``: the 16384 slots split over
three masters, each with one replica. A low ``cluster-node-timeout`` makes a
replica take over within a few seconds of its master's death. Every wait is
bounded; ``close`` kills every process.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support import free_port

NODE_TIMEOUT_MS = 1000


def _cluster_port(taken: set[int]) -> int:
    """A free port p whose cluster bus port p + 10000 is free too (so p <= 55535)."""
    for _ in range(500):
        port = free_port()
        if port > 55535 or port in taken or port + 10000 in taken:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@dataclass
class Node:
    port: int
    directory: Path
    extra: tuple[str, ...] = ()
    durable: bool = True
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    _client: redis.Redis | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed (apt-get install redis-server)"
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "yes" if self.durable else "no",
            "--appendfsync",
            "always",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(NODE_TIMEOUT_MS),
            # A replica may always take over, however long its link was down.
            "--cluster-replica-validity-factor",
            "0",
            "--logfile",
            "redis.log",
            *self.extra,
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.stopped = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except (redis.RedisError, OSError):
                time.sleep(0.05)
        raise RuntimeError(f"cluster node {self.port} did not start")

    def client(self) -> redis.Redis:
        """A plain client of this node (one per node, closed when it is killed)."""
        if self._client is None:
            self._client = redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=1)
        return self._client

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync beyond what appendfsync always did."""
        if self.process is not None:
            if self.stopped:
                self.process.send_signal(signal.SIGCONT)
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None
        self.stopped = False
        if self._client is not None:
            self._client.close()
            self._client = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.stopped = False


def _info(client: redis.Redis, section: str) -> dict[str, object]:
    return dict(client.info(section))


@dataclass
class Cluster:
    """Three masters, three replicas; see the module docstring."""

    directory: Path
    nodes: list[Node] = field(default_factory=list)

    @classmethod
    def start(cls, size: int = 6, extra: tuple[str, ...] = (), durable: bool = True) -> Cluster:
        """``durable``: AOF with ``appendfsync always`` (else no persistence at all)."""
        directory = Path(tempfile.mkdtemp(prefix="fs-cluster-"))
        cluster = cls(directory)
        try:
            taken: set[int] = set()
            for i in range(size):
                port = _cluster_port(taken)
                taken |= {port, port + 10000}
                node = Node(port, directory / f"node-{i}", extra, durable=durable)
                cluster.nodes.append(node)
                node.start()
            cli = shutil.which("redis-cli")
            assert cli, "redis-cli is not installed"
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{n.port}" for n in cluster.nodes),
                    "--cluster-replicas",
                    "1",
                    "--cluster-yes",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
            cluster.wait_healthy()
        except BaseException:
            cluster.close()
            raise
        return cluster

    @property
    def url(self) -> str:
        """The store URL: every node as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def node(self, port: int) -> Node:
        return next(n for n in self.nodes if n.port == port)

    def owner(self, key: str) -> Node:
        """The master that serves ``key``'s slot now (asked of a live node)."""
        slot = redis.cluster.key_slot(key.encode())
        for n in self.nodes:
            if not n.alive or n.stopped:
                continue
            try:
                for start, end, master, *_ in n.client().execute_command("CLUSTER", "SLOTS"):  # type: ignore[no-untyped-call]
                    if start <= slot <= end:
                        return self.node(int(master[1]))
            except (redis.RedisError, OSError):
                continue
        raise RuntimeError(f"no live node knows who serves slot {slot}")

    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.alive and self.role(n) == "master"]

    def replica_of(self, master: Node) -> Node:
        replicas = master.client().info("replication")
        for key, value in replicas.items():
            if key.startswith("slave") and isinstance(value, dict):
                return self.node(int(value["port"]))
        raise RuntimeError(f"master {master.port} has no replica")

    def role(self, node: Node) -> str | None:
        try:
            return str(_info(node.client(), "replication")["role"])
        except (redis.RedisError, OSError):
            return None

    def wait_healthy(self, timeout: float = 40.0) -> None:
        """Every node up and seeing the cluster ok; three masters, each with a replica
        whose link is up and caught up."""
        deadline = time.monotonic() + timeout
        problem = ""
        while time.monotonic() < deadline:
            problem = self._problem()
            if not problem:
                return
            time.sleep(0.1)
        raise RuntimeError(f"cluster not healthy after {timeout} s: {problem}")

    def _problem(self) -> str:
        masters = 0
        for n in self.nodes:
            if not n.alive:
                return f"node {n.port} is down"
            try:
                client = n.client()
                state = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
                if b"cluster_state:ok" not in state:
                    return f"node {n.port} does not see the cluster ok"
                repl = _info(client, "replication")
            except (redis.RedisError, OSError) as exc:
                return f"node {n.port}: {exc!r}"
            if repl["role"] == "master":
                masters += 1
                if int(str(repl["connected_slaves"])) < 1:
                    return f"master {n.port} has no replica"
                replica = next(
                    v for k, v in repl.items() if k.startswith("slave") and isinstance(v, dict)
                )
                if replica["state"] != "online":
                    return f"replica of {n.port} is {replica['state']}"
            elif repl.get("master_link_status") != "up":
                return f"replica {n.port} has its link down"
        if masters != len(self.nodes) // 2:
            return f"{masters} masters"
        return ""

    def wait_failover(self, dead: Node, timeout: float = 20.0) -> Node:
        """After ``dead``'s death: the replica that took over its slots."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self.nodes:
                if n is dead or not n.alive or n.stopped:
                    continue
                try:
                    client = n.client()
                    if (
                        _info(client, "replication")["role"] == "master"
                        and b"cluster_state:ok" in client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
                        and n not in self._masters_before
                    ):
                        return n
                except (redis.RedisError, OSError):
                    continue
            time.sleep(0.1)
        raise RuntimeError(f"no replica took over from {dead.port} within {timeout} s")

    _masters_before: tuple[Node, ...] = ()

    def remember_masters(self) -> None:
        self._masters_before = tuple(self.masters())

    def heal(self) -> None:
        """Restart dead nodes (they rejoin as replicas) and wait until healthy."""
        for n in self.nodes:
            if n.stopped:
                n.resume()
            if not n.alive:
                n.start()
        self.wait_healthy()

    def close(self) -> None:
        for n in self.nodes:
            n.kill()
        shutil.rmtree(self.directory, ignore_errors=True)
