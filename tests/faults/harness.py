"""Shared machinery of the fault-injection suite.

Everything here drives real processes: ``featurestream serve`` children
(:class:`ServerProcess`) on private ``redis-server`` processes with AOF
``appendfsync always`` (``tests.conftest.RedisServer``). A run is:

* a seeded workload (:func:`feature_workload`, :func:`instance_workload`): the
  requests or frames a producer sends, numbered 1, 2, 3, ...;
* a producer thread that keeps sending and retries until every seq is
  acknowledged (:class:`FeatureProducer` over HTTP with ``seq``,
  :class:`FrameProducer` over the WebSocket, resuming at last ack + 1);
* a :class:`FaultInjector` thread that, after a seeded delay, SIGKILLs the
  server (and restarts it on the same Redis) or SIGKILLs Redis (and restarts it
  on the same port and data directory), and checks the stored stream right
  after each fault;
* the final checks (:func:`verify_run`): the stored state equals the serial
  application of the batches the event log shows, each (producer, seq) is
  applied exactly once and in order, and every acknowledged update is there.

Timing makes the interleavings vary from run to run; the data, the fault
plan and the delays come from the seed, which every failure message names.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import redis
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from featurestream import codec
from featurestream.engine.idempotency import unseal
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector
from featurestream.store.keys import stream_keys
from tests.conftest import RedisServer, free_port

STORE_UNAVAILABLE = "/problems/store-unavailable"
CONCURRENT_UPDATE = "/problems/concurrent-update"
CLOSE_TRY_AGAIN_LATER = 1013
# A SIGKILLed server closes no WebSocket: the client sees the TCP connection drop.
CLOSE_DROPPED: int | None = None


# --------------------------------------------------------------------------- processes


class ServerProcess:
    """``featurestream serve`` in a child process, restarted on the same port.

    Parameters
    ----------
    store_url : str
        The Redis the server uses (the same one across restarts).
    prefix : str
        ``FEATURESTREAM_KEY_PREFIX`` of the server.
    log_path : Path
        The server's output, appended over restarts (shown when a test fails).
    env : mapping, optional
        Further ``FEATURESTREAM_*`` settings.
    """

    def __init__(
        self,
        store_url: str,
        prefix: str,
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.store_url = store_url
        self.prefix = prefix
        self.log_path = log_path
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws_url(self, stream_id: str, **query: Any) -> str:
        qs = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
        return f"ws://127.0.0.1:{self.port}/v1/streams/{stream_id}/ws" + (f"?{qs}" if qs else "")

    def spawn(self) -> None:
        """Start the process without waiting for it to answer."""
        assert self.proc is None, "already running"
        cmd = [sys.executable, "-m", "featurestream", "serve", "--port", str(self.port)]
        cmd += ["--store", self.store_url, "--log-level", "warning"]
        # Settings left in this process's environment by other tests must not leak in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("FEATURESTREAM_")}
        # One compute worker (the worker path), unless the test asks for others.
        # and no kernel warm-up, as every server the tests start (tests/conftest.py).
        env |= {"FEATURESTREAM_KEY_PREFIX": self.prefix, "FEATURESTREAM_COMPUTE_WORKERS": "1"}
        env |= {"FEATURESTREAM_WARM_KERNELS": "false"}
        env |= self.env
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self.starts += 1

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until ``/healthz`` answers."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"server did not answer /healthz:\n{self.log_tail()}")

    def start(self) -> ServerProcess:
        self.spawn()
        self.wait_ready()
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no drain, connections dropped."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
                self.kills += 1
            self.proc.wait(10)
        self.proc = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Processes:
    """Servers started by a test; every one is killed at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.servers: list[ServerProcess] = []

    def server(
        self, store_url: str, prefix: str, *, env: Mapping[str, str] | None = None
    ) -> ServerProcess:
        s = ServerProcess(
            store_url, prefix, self.directory / f"server-{len(self.servers)}.log", env=env
        )
        self.servers.append(s)
        return s

    def start(self, count: int, store_url: str, prefix: str, **kwargs: Any) -> list[ServerProcess]:
        """Start ``count`` servers side by side (their imports overlap)."""
        started = [self.server(store_url, prefix, **kwargs) for _ in range(count)]
        for s in started:
            s.spawn()
        for s in started:
            s.wait_ready()
        return started

    def close(self) -> None:
        for s in self.servers:
            s.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {s.url}\n{s.log_tail()}" for s in self.servers)


class Service:
    """The server a producer talks to: killed, then replaced by a fresh process on the same Redis.

    ``warm=False`` restarts the killed process on its own port and waits for
    it (a cold restart). ``warm=True`` keeps a spare process already started
    on the same Redis (it has served nothing, so it holds no state: like a
    restarted process it loads the stream from Redis on the first request)
    and switches to it, then starts the next spare in the background: the
    client sees the same failure and resumes the same way, but the
    interpreter's start-up overlaps the run instead of adding to it.
    """

    def __init__(self, processes: Processes, store_url: str, prefix: str, *, warm: bool) -> None:
        self._processes = processes
        self._store_url = store_url
        self.prefix = prefix
        self.warm = warm
        self.current = processes.server(store_url, prefix)
        self._spare: ServerProcess | None = None
        self.current.spawn()
        if warm:
            self._spare = processes.server(store_url, prefix)
            self._spare.spawn()
        self.current.wait_ready()

    @property
    def url(self) -> str:
        return self.current.url

    def kill(self) -> None:
        self.current.kill()

    def restart(self) -> None:
        """Bring a server up after :meth:`kill` (see the class notes)."""
        if self._spare is None:
            self.current.start()
            return
        self.current, self._spare = (
            self._spare,
            self._processes.server(self._store_url, self.prefix),
        )
        self._spare.spawn()
        self.current.wait_ready()


# --------------------------------------------------------------------------- workloads


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype=np.float64))
    return buf.getvalue()


@dataclass(frozen=True)
class FeatureRequest:
    """One POST of feature columns: ``X`` is ``(b, n)``, one row per column."""

    names: tuple[str, ...]
    X: np.ndarray
    encoding: str  # "json" (seq in the body) or "npy" (seq in X-Seq)

    def http(self, producer: str, seq: int) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.post`` for this request as ``seq``."""
        if self.encoding == "npy":
            return {
                "content": npy(self.X.T),
                "headers": {
                    "Content-Type": "application/x-npy",
                    "X-Feature-Names": ",".join(self.names),
                    "X-Seq": str(seq),
                    "X-Producer": producer,
                },
            }
        pairs = zip(self.names, self.X, strict=True)
        features = [{"name": n, "values": x.tolist()} for n, x in pairs]
        return {"json": {"producer": producer, "seq": seq, "features": features}}


@dataclass(frozen=True)
class FeatureWorkload:
    """A feature stream: its target and each producer's numbered requests."""

    algorithm: str
    params: dict[str, Any]
    y: np.ndarray
    requests: dict[str, list[FeatureRequest]]
    columns: dict[str, np.ndarray]

    kind = "features"

    def create_body(self, stream_id: str) -> dict[str, Any]:
        return {
            "id": stream_id,
            "algorithm": self.algorithm,
            "params": self.params,
            "target": self.y.tolist(),
        }

    def batch(self, producer: str, seq: int) -> tuple[str, ...]:
        return self.requests[producer][seq - 1].names

    def reference(self, batches: Sequence[tuple[str, ...]]) -> bytes:
        """Codec bytes of a fresh selector fed these batches of names, in order."""
        cls = REGISTRY[self.algorithm]
        assert issubclass(cls, FeatureSelector)
        params = cls.params_type.from_mapping(self.params)
        sel = cls.start(params, self.y)
        for names in batches:
            sel.learn_features(list(names), np.stack([self.columns[n] for n in names]))
        return codec.encode(cls.name, params.to_dict(), sel.snapshot())

    def uninterrupted(self) -> bytes:
        """The state after every producer's requests, one producer after the other."""
        return self.reference([r.names for rs in self.requests.values() for r in rs])


def feature_workload(
    seed: int,
    *,
    producers: Sequence[str] = ("p",),
    n: int = 60,
    requests: int = 50,
    columns: tuple[int, int] = (2, 5),
) -> FeatureWorkload:
    """SAOLA columns: some relevant to y, some redundant copies of those, the rest noise."""
    rng = np.random.default_rng([seed, 17])
    y = rng.normal(size=n)
    made: list[np.ndarray] = []
    out: dict[str, list[FeatureRequest]] = {}
    cols: dict[str, np.ndarray] = {}
    for producer in producers:
        reqs = []
        for _ in range(requests):
            names = []
            for _ in range(int(rng.integers(columns[0], columns[1] + 1))):
                roll = rng.random()
                if roll < 0.3:
                    x = rng.uniform(0.3, 1.0) * y + rng.normal(size=n)
                elif roll < 0.45 and made:
                    x = made[int(rng.integers(len(made)))] + 0.1 * rng.normal(size=n)
                else:
                    x = rng.normal(size=n)
                name = f"c{len(cols)}"
                cols[name] = x
                made.append(x)
                names.append(name)
            X = np.stack([cols[name] for name in names])
            encoding = "npy" if rng.random() < 0.5 else "json"
            reqs.append(FeatureRequest(tuple(names), X, encoding))
        out[producer] = reqs
    return FeatureWorkload("saola", {"alpha": 0.05}, y, out, cols)


@dataclass(frozen=True)
class InstanceWorkload:
    """An instance stream: one producer's numbered frames (labels last when supervised)."""

    algorithm: str
    params: dict[str, Any]
    feature_names: list[str]
    frames: list[np.ndarray]
    supervised: bool

    kind = "instances"

    def create_body(self, stream_id: str) -> dict[str, Any]:
        return {
            "id": stream_id,
            "algorithm": self.algorithm,
            "params": self.params,
            "feature_names": self.feature_names,
        }

    def reference(self, seqs: Sequence[int]) -> bytes:
        """Codec bytes of a fresh selector fed these frames, each as its own batch."""
        cls = REGISTRY[self.algorithm]
        assert issubclass(cls, InstanceSelector)
        params = cls.params_type.from_mapping(self.params)
        sel = cls.start(params, self.feature_names)
        for seq in seqs:
            frame = self.frames[seq - 1]
            if self.supervised:
                sel.learn_instances(frame[:, :-1], frame[:, -1])
            else:
                sel.learn_instances(frame)
        return codec.encode(cls.name, params.to_dict(), sel.snapshot())

    def uninterrupted(self) -> bytes:
        return self.reference(range(1, len(self.frames) + 1))


def instance_workload(
    seed: int, algorithm: str, *, d: int = 12, frames: int = 600, rows: int = 4
) -> InstanceWorkload:
    """OFS (labelled) or FSDS (unlabelled) frames of ``rows`` instances over ``d`` features."""
    rng = np.random.default_rng([seed, 29])
    m = frames * rows
    if algorithm == "ofs":
        X = rng.normal(size=(m, d))
        y = (X[:, 1] - X[:, 4] + 0.3 * rng.normal(size=m) > 0).astype(np.float64)
        A = np.column_stack([X, y])
        mode = "partial" if rng.random() < 0.5 else "full"
        params: dict[str, Any] = {"num_features": 4, "mode": mode, "seed": seed}
        supervised = True
    elif algorithm == "fsds":
        # A few strong directions plus noise, so the sketch has something to keep.
        basis = rng.normal(size=(3, d))
        A = rng.normal(size=(m, 3)) @ basis + 0.2 * rng.normal(size=(m, d))
        params = {"num_features": 4}
        supervised = False
    else:
        raise ValueError(algorithm)
    split = [np.ascontiguousarray(A[i * rows : (i + 1) * rows]) for i in range(frames)]
    return InstanceWorkload(algorithm, params, [f"x{i}" for i in range(d)], split, supervised)


Workload = FeatureWorkload | InstanceWorkload


# --------------------------------------------------------------------------- producers


@dataclass(frozen=True)
class Ack:
    """A producer's acknowledged update, as the client saw it."""

    seq: int
    version: int
    body: bytes = b""  # HTTP: the response body (the stored response)
    instances_seen: int | None = None  # WebSocket: what the ack says
    replayed: bool = False


@dataclass
class ProducerLog:
    """What one producer did and saw."""

    name: str
    total: int
    sent: int = 0  # requests (frames) that reached a server, retries included
    refused_connections: int = 0  # attempts that found no server listening
    acks: dict[int, Ack] = field(default_factory=dict)
    replays: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    store_errors: int = 0  # 503 store-unavailable answers, or WebSocket error + 1013
    close_codes: Counter[int | None] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    done: bool = False
    # Seconds from sending a request (frame) to its answer: a response, an ack or
    # error message, or the close that ends the connection it was sent on.
    latencies: list[float] = field(default_factory=list)

    @property
    def last_ack(self) -> int:
        """Acknowledged seqs are contiguous from 1: the highest of them."""
        return len(self.acks)


class _Abort(Exception):
    pass


class Pacer:
    """Spaces the first sends of a producer's updates at least ``interval`` apart.

    So that the stream of a fast selector on a fast machine still lasts long
    enough, after each fault too, for the next fault to land in the middle of it.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = -float("inf")

    def wait(self) -> None:
        """Before the first send of an update: wait until ``interval`` has passed."""
        wait = self._last + self.interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last = time.monotonic()


class _Producer(threading.Thread):
    """A producer thread: its ``log``, a deadline, failures recorded, not raised,
    and a :class:`Pacer` for the first send of each update."""

    def __init__(
        self,
        stream_id: str,
        name: str,
        total: int,
        deadline: float,
        pause: float,
        interval: float,
    ):
        super().__init__(name=f"producer-{name}", daemon=True)
        self.stream_id = stream_id
        self.deadline = deadline
        self.pause = pause
        self.pacer = Pacer(interval)
        self.log = ProducerLog(name, total)

    def run(self) -> None:
        log = self.log
        try:
            self._produce(time.monotonic() + self.deadline)
        except _Abort:
            pass
        except Exception as exc:  # surfaced by the test
            log.failures.append(f"{log.name}: {exc!r}")
        finally:
            log.done = True

    def _produce(self, end: float) -> None:
        raise NotImplementedError

    def _fail(self, message: str) -> None:
        self.log.failures.append(f"{self.log.name}: {message}")
        raise _Abort


class FeatureProducer(_Producer):
    """Posts its requests with seq 1, 2, ...; retries each until it is answered 200.

    Retried: connection failures (the server is down or was killed mid-request),
    ``503 store-unavailable`` and ``409 concurrent-update``. Anything else is a
    failure. A request answered as a replay (``Idempotent-Replay``) is fine
    only if an earlier try may have been applied (a dropped connection or a
    503): the first try of a seq must never find it applied.
    """

    def __init__(
        self,
        stream_id: str,
        name: str,
        requests: Sequence[FeatureRequest],
        route: Callable[[], str],
        *,
        deadline: float = 90.0,
        pause: float = 0.02,
        interval: float = 0.0,
    ) -> None:
        super().__init__(stream_id, name, len(requests), deadline, pause, interval)
        self.requests = list(requests)
        self.route = route

    def _produce(self, end: float) -> None:
        path = f"/v1/streams/{self.stream_id}/features"
        with httpx.Client(timeout=20) as client:
            for seq, request in enumerate(self.requests, 1):
                self.pacer.wait()
                self._send(client, path, seq, request, end)

    def _send(
        self, client: httpx.Client, path: str, seq: int, request: FeatureRequest, end: float
    ) -> None:
        log = self.log
        maybe_applied = False
        while True:
            if time.monotonic() > end:
                self._fail(f"seq {seq} not acknowledged within {self.deadline}s")
            sent = time.monotonic()
            try:
                r = client.post(self.route() + path, **request.http(log.name, seq))
                log.latencies.append(time.monotonic() - sent)
            except httpx.ConnectError:
                log.refused_connections += 1
                time.sleep(self.pause)
                continue
            except httpx.TransportError:
                # Sent, and the connection dropped: it may or may not have been applied.
                log.sent += 1
                maybe_applied = True
                time.sleep(self.pause)
                continue
            log.sent += 1
            log.statuses[r.status_code] += 1
            if r.status_code == 200:
                replayed = r.headers.get("idempotent-replay") == "true"
                if replayed and not maybe_applied:
                    self._fail(f"seq {seq} was answered as a replay before it was ever applied")
                body = r.json()
                if body.get("seq") != seq or body.get("producer", log.name) != log.name:
                    self._fail(f"seq {seq} was answered with {r.text[:200]}")
                log.replays += replayed
                log.acks[seq] = Ack(seq, int(body["version"]), r.content, replayed=replayed)
                return
            kind = _problem_type(r)
            if r.status_code == 503 and kind == STORE_UNAVAILABLE:
                log.store_errors += 1
                maybe_applied = True
                time.sleep(self.pause)
                continue
            if r.status_code == 409 and kind == CONCURRENT_UPDATE:
                continue
            self._fail(f"seq {seq}: unexpected {r.status_code} {r.text[:300]}")


def instances_http(A: np.ndarray, producer: str, seq: int) -> dict[str, Any]:
    """Keyword arguments of ``httpx.post`` for labelled instances (label last) as ``seq``."""
    return {
        "content": npy(A),
        "headers": {
            "Content-Type": "application/x-npy",
            "X-Label-Column": "last",
            "X-Producer": producer,
            "X-Seq": str(seq),
        },
    }


def metric(base_url: str, name: str) -> float:
    """The value of an unlabelled metric of a server's ``/metrics``."""
    for line in httpx.get(base_url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def fixed_route(url: str) -> Callable[[], str]:
    """A producer's route to one server."""
    return lambda: url


def random_route(urls: Sequence[str], rng: np.random.Generator) -> Callable[[], str]:
    """A producer's route to any of ``urls``, drawn per request (a load balancer)."""
    return lambda: urls[int(rng.integers(len(urls)))]


def _problem_type(r: httpx.Response) -> str | None:
    try:
        body = r.json()
    except ValueError:
        return None
    return body.get("type") if isinstance(body, dict) else None


class FrameProducer(_Producer):
    """Streams binary .npy frames over the WebSocket, ``window`` unacknowledged at most.

    After a dropped connection (server killed) or a 1013 close (store
    unavailable) it reconnects with ``seq`` = last ack + 1 and sends every
    frame from there again; the server acknowledges the ones it had already
    applied without applying them again. Acks must arrive in seq order.
    """

    def __init__(
        self,
        stream_id: str,
        name: str,
        frames: Sequence[np.ndarray],
        server: Callable[[], ServerProcess],
        *,
        window: int = 16,
        deadline: float = 90.0,
        pause: float = 0.02,
        interval: float = 0.0,
    ) -> None:
        super().__init__(stream_id, name, len(frames), deadline, pause, interval)
        self.payloads = [npy(f) for f in frames]
        self._first_sent = 0  # frames sent once: resends after a reconnect are not paced
        self._sent_at: dict[int, float] = {}  # frames sent on this connection, unanswered
        self.server = server
        self.window = window

    def _produce(self, end: float) -> None:
        log = self.log
        while log.last_ack < log.total:
            if time.monotonic() > end:
                self._fail(f"frames acknowledged up to {log.last_ack} in {self.deadline}s")
            url = self.server().ws_url(self.stream_id, producer=log.name, seq=log.last_ack + 1)
            try:
                conn = connect(url, max_size=None, open_timeout=5, close_timeout=1)
            except (OSError, TimeoutError, InvalidHandshake):
                log.refused_connections += 1
                time.sleep(self.pause)
                continue
            with conn:
                self._session(conn)
            if log.last_ack < log.total:
                time.sleep(self.pause)

    def _session(self, conn: ClientConnection) -> None:
        log = self.log
        next_send = log.last_ack + 1
        try:
            while log.last_ack < log.total:
                while next_send <= log.total and next_send - log.last_ack <= self.window:
                    if next_send > self._first_sent:
                        self.pacer.wait()
                        self._first_sent = next_send
                    conn.send(self.payloads[next_send - 1])
                    self._sent_at[next_send] = time.monotonic()
                    log.sent += 1
                    next_send += 1
                try:
                    raw = conn.recv(timeout=30)
                except TimeoutError:
                    self._fail(f"no answer for 30 s after ack {log.last_ack}")
                self._take(raw)
        except ConnectionClosed as exc:
            # What the server said before the connection ended (acks, or why) first.
            for raw in _drain(conn):
                self._take(raw)
            log.close_codes[exc.rcvd.code if exc.rcvd else CLOSE_DROPPED] += 1
            # The close answers the frames still unacknowledged: they are sent again.
            now = time.monotonic()
            log.latencies += [now - t for t in self._sent_at.values()]
        finally:
            self._sent_at.clear()

    def _take(self, raw: str | bytes) -> None:
        log = self.log
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "ack":
            seq = int(msg["ack"])
            if seq != log.last_ack + 1:
                self._fail(f"ack {seq} arrived after ack {log.last_ack}")
            log.acks[seq] = Ack(seq, int(msg["version"]), instances_seen=msg["instances_seen"])
            sent = self._sent_at.pop(seq, None)
            if sent is not None:
                log.latencies.append(time.monotonic() - sent)
        elif kind == "selection":
            return
        elif (
            kind == "error" and msg.get("seq") is None and msg["error"]["type"] == STORE_UNAVAILABLE
        ):
            log.store_errors += 1
        else:
            self._fail(f"unexpected message {str(msg)[:300]}")


def _drain(conn: ClientConnection) -> list[str | bytes]:
    out: list[str | bytes] = []
    while True:
        try:
            out.append(conn.recv(timeout=0))
        except Exception:  # closed and empty, or nothing more
            return out


# --------------------------------------------------------------------------- stored stream


@dataclass(frozen=True)
class Batch:
    """One batch event of the log: who sent it, its seq, what it held."""

    version: int
    producer: str
    seq: int
    names: tuple[str, ...] = ()  # feature streams
    instances_seen: int | None = None  # instance streams


@dataclass(frozen=True)
class Stored:
    """A stream as Redis holds it, read in one transaction (a consistent cut)."""

    version: int
    blob: bytes
    producers: dict[str, int]
    versions: list[int]  # of the event-log entries, in order
    batches: list[Batch]
    responses: dict[tuple[str, int], bytes]


def read_stored(redis_url: str, prefix: str, stream_id: str) -> Stored:
    k = stream_keys(prefix, stream_id)
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    try:
        with client.pipeline(transaction=True) as pipe:
            pipe.hget(k.meta, "version")
            pipe.get(k.state)
            pipe.hgetall(k.producers)
            pipe.xrange(k.events)
            pipe.hgetall(k.responses)
            version, blob, producers, entries, responses = pipe.execute()
    finally:
        client.close()
    assert version is not None and blob is not None, f"stream {stream_id!r} is not stored"
    versions: list[int] = []
    batches: list[Batch] = []
    for eid, fields in entries:
        v = int(eid.split(b"-")[0])
        versions.append(v)
        payload = json.loads(fields[b"e"])
        for ev in payload["events"]:
            if ev["type"] == "batch":
                batches.append(_batch(v, payload, ev))
    stored_responses = {}
    for key, value in responses.items():
        producer, seq = key.decode().rsplit("\n", 1)
        # The response as sent: without the digest of the content it was stored with.
        stored_responses[(producer, int(seq))] = unseal(bytes(value))[1]
    return Stored(
        int(version),
        bytes(blob),
        {p.decode(): int(s) for p, s in producers.items()},
        versions,
        batches,
        stored_responses,
    )


def _batch(version: int, payload: Mapping[str, Any], ev: Mapping[str, Any]) -> Batch:
    seq = ev.get("seq", payload.get("seq"))
    return Batch(
        version,
        str(ev.get("producer", payload.get("producer"))),
        int(seq),
        tuple(ev.get("names") or ()),
        ev.get("instances_seen"),
    )


def read_event_log(base_url: str, stream_id: str) -> list[Batch]:
    """The batch events of ``GET /events``, every page."""
    out: list[Batch] = []
    after: str | None = None
    with httpx.Client(base_url=base_url, timeout=20) as c:
        while True:
            params: dict[str, Any] = {"limit": 10_000}
            if after is not None:
                params["after"] = after
            r = c.get(f"/v1/streams/{stream_id}/events", params=params)
            assert r.status_code == 200, r.text
            page = r.json()
            for ev in page["events"]:
                if ev["type"] == "batch":
                    out.append(_batch(ev["version"], ev, ev))
            if not page["events"]:
                return out
            after = page["next"]


def consistency_problems(stored: Stored, workload: Workload) -> list[str]:
    """Why ``stored`` is not a serial application of whole requests (empty when it is).

    The state, the event log, the producers' last seqs and their stored
    responses must agree: versions 1..V with no hole, each producer's seqs
    1..last exactly once and in order, a stored response for each, and the
    state blob equal to a fresh selector fed the logged batches in log order.
    """
    problems: list[str] = []
    if stored.versions != list(range(1, stored.version + 1)):
        problems.append(f"event-log versions {stored.versions[:5]}... for version {stored.version}")
    seen: dict[str, list[int]] = {}
    for b in stored.batches:
        seen.setdefault(b.producer, []).append(b.seq)
    for producer in set(seen) | set(stored.producers):
        seqs = seen.get(producer, [])
        last = stored.producers.get(producer, 0)
        if seqs != list(range(1, last + 1)):
            problems.append(f"producer {producer!r}: logged seqs {_short(seqs)}, last seq {last}")
        missing = [
            s for s in range(max(1, last - 999), last + 1) if (producer, s) not in stored.responses
        ]
        if missing:
            problems.append(f"producer {producer!r}: no stored response for seqs {_short(missing)}")
    if isinstance(workload, FeatureWorkload):
        for b in stored.batches:
            if b.names != workload.batch(b.producer, b.seq):
                problems.append(f"batch {b.producer}:{b.seq} holds {b.names}")
        expected = workload.reference([b.names for b in stored.batches])
    else:
        expected = workload.reference([b.seq for b in stored.batches])
    if stored.blob != expected:
        problems.append(
            f"state at version {stored.version} differs from the serial application of "
            f"its {len(stored.batches)} logged batches ({state_difference(stored.blob, expected)})"
        )
    return problems


def state_difference(got: bytes, expected: bytes) -> str:
    """Which fields of two encoded states differ, and by how much (for failure messages)."""
    a, b = codec.decode(got), codec.decode(expected)
    if (a.selector, a.params) != (b.selector, b.params):
        return f"{a.selector} {a.params} vs {b.selector} {b.params}"
    out = []
    for f in dataclasses.fields(a.state):
        x, y = getattr(a.state, f.name), getattr(b.state, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape:
                out.append(f"{f.name}: shape {x.shape} vs {y.shape}")
            elif not np.array_equal(x, y):
                diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
                out.append(
                    f"{f.name}: {int((diff > 0).sum())} entries differ, max {diff.max():.3g}"
                )
        elif x != y:
            out.append(f"{f.name}: {str(x)[:60]} vs {str(y)[:60]}")
    return "; ".join(out) or "same fields, different bytes"


def _short(seqs: Sequence[int]) -> str:
    return str(list(seqs)) if len(seqs) <= 12 else f"{list(seqs[:6])}...{list(seqs[-6:])}"


def lost_acks(stored: Stored, log: ProducerLog) -> list[int]:
    """Acknowledged seqs of ``log`` the stored stream does not hold as acknowledged."""
    logged = {(b.producer, b.seq): b for b in stored.batches}
    lost = []
    for seq, ack in log.acks.items():
        batch = logged.get((log.name, seq))
        if batch is None or batch.version != ack.version:
            lost.append(seq)
        elif ack.instances_seen is not None:
            if batch.instances_seen != ack.instances_seen:
                lost.append(seq)
        elif stored.responses.get((log.name, seq)) != ack.body:
            # HTTP: the stored response is the very body the client was given.
            lost.append(seq)
    return sorted(lost)


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    """SIGKILL of ``target`` ("server" or "redis") ``delay`` s after progress resumed."""

    target: str
    delay: float
    outage: float = 0.0  # redis: seconds down before the restart

    def __str__(self) -> str:
        down = f", down {self.outage * 1000:.0f} ms" if self.target == "redis" else ""
        return f"{self.target} kill after {self.delay * 1000:.0f} ms{down}"


@dataclass(frozen=True)
class Scenario:
    """A seeded run: which stream, which faults, when."""

    seed: int
    algorithm: str
    faults: tuple[Fault, ...]

    @classmethod
    def draw(
        cls,
        seed: int,
        *,
        algorithms: Sequence[str] = ("saola", "ofs", "fsds"),
        targets: Sequence[str] = ("server", "redis"),
        faults: tuple[int, int] = (1, 2),
        delay: tuple[float, float] = (0.01, 0.1),
        outage: tuple[float, float] = (0.05, 1.2),
    ) -> Scenario:
        rng = np.random.default_rng([seed, 3])
        algorithm = algorithms[seed % len(algorithms)]
        count = int(rng.integers(faults[0], faults[1] + 1))
        plan = tuple(
            Fault(
                str(targets[int(rng.integers(len(targets)))]),
                float(rng.uniform(*delay)),
                float(rng.uniform(*outage)),
            )
            for _ in range(count)
        )
        return cls(seed, algorithm, plan)

    @property
    def producer(self) -> str:
        return f"p{self.seed}"

    def workload(self) -> Workload:
        if self.algorithm == "saola":
            return feature_workload(self.seed, producers=(self.producer,))
        return instance_workload(self.seed, self.algorithm)

    def __str__(self) -> str:
        faults = "; ".join(str(f) for f in self.faults)
        return f"seed {self.seed}: {self.algorithm}, {faults}"


class FaultInjector(threading.Thread):
    """Applies a fault plan while a producer runs, checking the store after each fault.

    Each fault waits for the producer to make progress (a new ack) since the
    previous one, then sleeps its delay, then strikes, unless the producer is
    done by then (a fault that never lands mid-stream is skipped). After a
    server kill it checks the stored stream (every ack seen before the kill is
    there, whole) and restarts the server; after a Redis kill it restarts
    Redis after the outage and makes the same check on what the AOF restored.
    """

    def __init__(
        self,
        faults: Sequence[Fault],
        log: ProducerLog,
        check: Callable[[str, int], None],
        *,
        service: Service | None,
        store: RedisServer,
    ) -> None:
        super().__init__(name="faults", daemon=True)
        self.faults = list(faults)
        self.log = log
        self.check = check
        self.service = service
        self.store = store
        self.applied: list[Fault] = []
        self.errors: list[BaseException] = []

    def run(self) -> None:
        log = self.log
        try:
            mark = 0
            for fault in self.faults:
                while log.last_ack <= mark and not log.done:
                    time.sleep(0.002)
                time.sleep(fault.delay)
                if log.done:
                    return
                acked = log.last_ack
                if fault.target == "server":
                    assert self.service is not None
                    self.service.kill()
                    self.applied.append(fault)
                    try:
                        self.check(f"after {fault}", acked)
                    finally:
                        self.service.restart()
                else:
                    self.store.kill()
                    self.applied.append(fault)
                    try:
                        time.sleep(fault.outage)
                    finally:
                        self.store.start()
                    self.check(f"after {fault}", acked)
                mark = log.last_ack
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)


# --------------------------------------------------------------------------- runs


@dataclass
class Figures:
    """What a set of runs did."""

    runs: int = 0
    server_kills: int = 0
    redis_kills: int = 0
    requests: int = 0  # requests or frames sent, retries and resends included
    acked: int = 0  # distinct acknowledged updates
    lost: int = 0  # acknowledged updates missing afterwards (must be 0)
    store_errors: int = 0  # 503 answers, and WebSocket errors before a 1013 close
    close_codes: Counter[int | None] = field(default_factory=Counter)  # WebSocket ends

    @property
    def kills(self) -> int:
        return self.server_kills + self.redis_kills

    def __iadd__(self, other: Figures) -> Figures:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def __str__(self) -> str:
        return (
            f"runs={self.runs} kills={self.kills} (server {self.server_kills}, "
            f"redis {self.redis_kills}) requests={self.requests} acked={self.acked} "
            f"lost={self.lost} store_errors={self.store_errors}"
            + (f" closes={dict(self.close_codes)}" if self.close_codes else "")
        )


@contextmanager
def seed_note(seed: int, rerun: str, servers: Sequence[ServerProcess] = ()) -> Iterator[None]:
    """Name the seed, and the command that runs it alone, on any failure inside; with
    ``servers``, their log lines that say what went wrong (a CI run keeps no logs)."""
    print(f"[faults] seed {seed}")
    try:
        yield
    except BaseException as exc:
        exc.add_note(f"fault-injection seed {seed}; run it alone with: {rerun}")
        for server in servers:
            lines = server_problems(server)
            if lines:
                exc.add_note(f"--- {server.url} said:\n" + "\n".join(lines))
        raise


# What a server logs when something went wrong (errors) or it turned not ready.
PROBLEM_LINE = re.compile(r'"level": "(error|critical)"|"msg": "not ready')


def server_problems(server: ServerProcess, most: int = 8, chars: int = 3000) -> list[str]:
    """The last ``most`` problem lines of a server's log, each cut to ``chars``."""
    try:
        text = server.log_path.read_text(errors="replace")
    except OSError:
        return []
    found = [line[:chars] for line in text.splitlines() if PROBLEM_LINE.search(line)]
    return found[-most:]


def create_stream(base_url: str, workload: Workload, stream_id: str) -> None:
    """Create the stream, retrying while the store is unavailable."""
    deadline = time.monotonic() + 30
    while True:
        r = httpx.post(base_url + "/v1/streams", json=workload.create_body(stream_id), timeout=20)
        if r.status_code == 201:
            return
        assert r.status_code == 503 and time.monotonic() < deadline, r.text
        time.sleep(0.05)


def run_scenario(
    scenario: Scenario,
    *,
    service: Service,
    store: RedisServer,
    stream_id: str,
) -> Figures:
    """One seeded run on a running server; raises AssertionError on any broken promise.

    Checks: the producer got every seq acknowledged with nothing unexpected;
    after each fault the stored stream was a serial application of whole
    requests holding every ack seen before the fault; at the end the state
    blob equals an uninterrupted run, the event log (``GET /events``) shows
    each seq exactly once, in order, and every acknowledged update is stored
    as acknowledged.
    """
    workload = scenario.workload()
    create_stream(service.url, workload, stream_id)
    producer_name = scenario.producer
    producer: FeatureProducer | FrameProducer
    if isinstance(workload, FeatureWorkload):
        requests = workload.requests[producer_name]
        producer = FeatureProducer(
            stream_id, producer_name, requests, lambda: service.url, interval=0.01
        )
    else:
        producer = FrameProducer(
            stream_id, producer_name, workload.frames, lambda: service.current, interval=0.002
        )
    checks: list[str] = []

    def check(when: str, acked: int) -> None:
        stored = read_stored(store.url, service.prefix, stream_id)
        problems = consistency_problems(stored, workload)
        held = stored.producers.get(producer_name, 0)
        if held < acked:
            problems.append(f"acks up to seq {acked} were given, the store holds {held}")
        checks.extend(f"{when}: {p}" for p in problems)

    injector = FaultInjector(scenario.faults, producer.log, check, service=service, store=store)
    producer.start()
    injector.start()
    producer.join(120)
    injector.join(60)
    log = producer.log
    assert not injector.errors, f"{scenario}: fault injection failed: {injector.errors!r}"
    assert not checks, f"{scenario}: {checks}"
    assert not log.failures, f"{scenario}: {log.failures}"
    assert log.done and log.last_ack == log.total, f"{scenario}: acked {log.last_ack}/{log.total}"
    figures = verify_run(service.url, store.url, service.prefix, stream_id, workload, [log])
    figures.server_kills = sum(f.target == "server" for f in injector.applied)
    figures.redis_kills = sum(f.target == "redis" for f in injector.applied)
    return figures


def verify_run(
    base_url: str,
    redis_url: str,
    prefix: str,
    stream_id: str,
    workload: Workload,
    logs: Sequence[ProducerLog],
    *,
    serial: bool = True,
) -> Figures:
    """The final checks of a run (see :func:`run_scenario`); returns its figures."""
    stored = read_stored(redis_url, prefix, stream_id)
    problems = consistency_problems(stored, workload)
    assert not problems, problems
    shown = read_event_log(base_url, stream_id)
    assert shown == stored.batches, "GET /events differs from the stored event log"
    for log in logs:
        seqs = [b.seq for b in shown if b.producer == log.name]
        assert seqs == list(range(1, log.total + 1)), f"{log.name}: logged seqs {_short(seqs)}"
    if serial:
        # One producer: the order is the producer's, so the state is the uninterrupted run's.
        assert stored.blob == workload.uninterrupted(), "state differs from an uninterrupted run"
    lost = [(log.name, s) for log in logs for s in lost_acks(stored, log)]
    figures = Figures(
        runs=1,
        requests=sum(log.sent for log in logs),
        acked=sum(len(log.acks) for log in logs),
        lost=len(lost),
        store_errors=sum(log.store_errors for log in logs),
        close_codes=sum((log.close_codes for log in logs), Counter()),
    )
    assert not lost, f"acknowledged updates lost: {lost[:20]}"
    return figures


def seeds_from_env(default: Sequence[int]) -> list[int]:
    """``FAULTS_SEEDS`` ("7" or "3,5" or "0-19") overrides the seeds of a randomised test."""
    raw = os.environ.get("FAULTS_SEEDS")
    if not raw:
        return list(default)
    out: list[int] = []
    for part in raw.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


__all__ = [
    "Ack",
    "Batch",
    "Fault",
    "FaultInjector",
    "FeatureProducer",
    "FeatureRequest",
    "FeatureWorkload",
    "Figures",
    "FrameProducer",
    "InstanceWorkload",
    "Processes",
    "ProducerLog",
    "Scenario",
    "ServerProcess",
    "Service",
    "Stored",
    "consistency_problems",
    "create_stream",
    "feature_workload",
    "fixed_route",
    "instance_workload",
    "instances_http",
    "lost_acks",
    "metric",
    "npy",
    "random_route",
    "read_event_log",
    "read_stored",
    "run_scenario",
    "seed_note",
    "seeds_from_env",
    "verify_run",
]
