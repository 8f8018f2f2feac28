"""Service settings, from arguments or the environment (prefix ``FEATURESTREAM_``)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


@dataclass(frozen=True)
class ClusterTarget:
    """A Redis Cluster store URL, parsed: the seed nodes and the credentials."""

    nodes: list[tuple[str, int]]
    username: str | None
    password: str | None
    ssl: bool


def parse_cluster_url(url: str) -> ClusterTarget:
    """The seed nodes and credentials of a ``redis+cluster://`` (or ``rediss+cluster://``,
    TLS) store URL: ``redis+cluster://[user:password@]host:port[,host:port...]``.

    >>> parse_cluster_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7001").nodes
    [('10.0.0.1', 7000), ('10.0.0.2', 7001)]
    >>> t = parse_cluster_url("rediss+cluster://app:s%40cret@[::1]:7000/")
    >>> t.ssl, t.username, t.password, t.nodes
    (True, 'app', 's@cret', [('::1', 7000)])
    """
    scheme, _, rest = url.partition("://")
    if scheme not in ("redis+cluster", "rediss+cluster"):
        raise ValueError("a cluster store URL starts with redis+cluster:// or rediss+cluster://")
    rest = rest.split("?", 1)[0].rstrip("/")
    if "/" in rest:
        db = rest.split("/", 1)[1]
        if db not in ("", "0"):
            raise ValueError("Redis Cluster has database 0 only: leave the /db out")
        rest = rest.split("/", 1)[0]
    username = password = None
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes: list[tuple[str, int]] = []
    for part in rest.split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{part!r} is not host:port (a cluster store URL lists seed nodes)")
        nodes.append((host.strip("[]"), int(port)))
    return ClusterTarget(nodes, username, password, scheme == "rediss+cluster")


class Settings(BaseSettings):
    """Every option of ``featurestream serve``; each also reads ``FEATURESTREAM_<NAME>``.

    >>> Settings(store_url="memory://").store_kind
    'memory'
    """

    model_config = SettingsConfigDict(env_prefix="FEATURESTREAM_", extra="ignore")

    store_url: str = Field(
        "memory://",
        description="memory:// (embedded, single process), redis://host:port/db "
        "(rediss:// for TLS) or, for a Redis Cluster, "
        "redis+cluster://host:port[,host:port...] (rediss+cluster:// for TLS).",
    )
    host: str = Field("127.0.0.1", description="Address to bind (0.0.0.0 in containers).")
    port: int = Field(8000, ge=0, le=65535, description="TCP port of the HTTP/WebSocket API.")
    workers: int = Field(1, ge=1, description="uvicorn worker processes (Redis store only).")
    key_prefix: str = Field(
        "fs",
        min_length=1,
        max_length=64,
        description="Prefix of every Redis key.",
        pattern=r"^[A-Za-z0-9._:-]+$",
    )
    max_request_bytes: int = Field(256 * 1024 * 1024, ge=1024, description="413 beyond this.")
    max_columns_per_request: int = Field(
        200_000, ge=1, description="Feature columns in one request (413 beyond)."
    )
    max_instances_per_request: int = Field(
        100_000, ge=1, description="Instances in one HTTP batch or WebSocket frame (413 beyond)."
    )
    max_name_length: int = Field(
        1024, ge=1, le=65536, description="Characters of a feature name (422 beyond)."
    )
    max_streams_per_tenant: int = Field(
        10_000,
        ge=1,
        description="Streams one tenant may hold (429 beyond); without API "
        "keys, the streams of the whole server.",
    )
    body_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds to receive a whole request body, from its first read "
        "(408 when it has not all arrived: a client trickling bytes gets it too).",
    )
    request_time_budget: float = Field(
        30.0,
        ge=0,
        description="Seconds of selector work one write request (or one WebSocket frame) "
        "may take; beyond it nothing of it is applied and it is answered 413 "
        "request-too-expensive, saying how many of its columns or instances were done "
        "(the client splits it). 0 turns the budget off.",
    )
    replay_window: int = Field(
        1000, ge=1000, description="Stored responses kept per producer for seq replays."
    )
    replay_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024 * 1024,
        description="Bytes of stored responses kept per stream for seq replays, over all "
        "its producers, as stored (responses of 64 KiB or more are kept compressed, "
        "about a seventh of their size); beyond it the oldest go first (a replay of one "
        "of them is refused as older than the replay window).",
    )
    producer_retention: float = Field(
        7 * 24 * 3600.0,
        gt=0,
        description="Seconds a producer may stay idle before its records (last seq, stored "
        "responses) are dropped by the stream's next write of another producer; its next "
        "write then starts a sequence afresh at seq 1. A log's partitions (featurestream "
        "consume) are never dropped.",
    )
    max_producers: int = Field(
        1000,
        ge=1,
        description="Producers recorded per stream; a write by another one drops the least "
        "recently seen beyond it (as past producer_retention).",
    )
    event_retention: int = Field(
        10_000,
        ge=100,
        description="Entries (commits) of each stream's event log kept in the store; the "
        "oldest are trimmed beyond it (exactly: XADD MAXLEN =).",
    )
    commit_retries: int = Field(
        50, ge=1, description="Re-applies after a concurrent update before answering 409."
    )
    compute_workers: int | None = Field(
        None,
        ge=0,
        description="Compute worker processes beside each serving process: every selector "
        "update runs in one, each stream always in the same one, which keeps its state "
        "decoded. Default (unset): the number of cores. 0: in threads of the serving "
        "process (for debugging).",
    )
    cache_streams: int = Field(
        256, ge=0, description="Streams whose decoded state a process keeps in memory."
    )
    cache_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Bytes of memory the decoded states of the streams a process keeps "
        "in memory may take (their arrays, names and numbers, as measured); the least "
        "recently used go first beyond it or cache_streams.",
    )
    names_cache: int = Field(
        2_000_000,
        ge=0,
        description="Feature names a process keeps in memory (Redis store), of the feature "
        "streams it writes, to look a write's new names up without asking Redis (about 80 "
        "bytes each); beyond it the names of the streams written least recently go first "
        "(read again from Redis at their next write). The stream being written keeps its "
        "names whatever their number.",
    )
    api_keys_file: str | None = Field(
        None,
        description="File of 'tenant:<sha256 hex of key>' lines; when set, every /v1 route "
        "and the WebSocket need Authorization: Bearer <key>. Re-read on change or SIGHUP.",
    )
    ws_allowed_origins: str = Field(
        "",
        description="Comma-separated origins (scheme://host[:port]) of web pages that may "
        "open WebSockets besides the server's own pages; '*' allows any. A browser names "
        "the page's origin in every WebSocket handshake: others are refused (403). "
        "Clients that are not browsers send no Origin and are not affected.",
    )
    ws_max_inflight: int = Field(
        64,
        ge=1,
        description="WebSocket frames read but not yet answered, per connection "
        "(backpressure: beyond it the server stops reading).",
    )
    ws_group_max_frames: int = Field(
        64, ge=1, description="Most WebSocket frames committed together (group commit)."
    )
    ws_selection_max_features: int = Field(
        1_000,
        ge=0,
        description="Most features a WebSocket selection message lists; a larger selection "
        "is announced by a notice (its version and size, 'truncated': true) and read with "
        "GET /selected.",
    )
    ws_send_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds a WebSocket message may wait for a client that does not read "
        "what the server sent; beyond it the connection is closed (1013, 'slow reader').",
    )
    ws_ping_interval: float = Field(
        20.0,
        gt=0,
        description="Seconds between the server's WebSocket keepalive pings.",
    )
    ws_ping_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds without a pong before a WebSocket is closed (1011). A pong "
        "queues behind the frames the server has not read yet (backpressure), so this "
        "must exceed the time to apply ws_max_inflight frames.",
    )
    ws_compression: bool = Field(
        False,
        description="Offer permessage-deflate to WebSocket clients that ask for it. Off: "
        "frames of numbers barely compress, and zlib would cost most of a frame's time.",
    )
    warm_kernels: bool = Field(
        True,
        description="Load the compiled kernels (OFS) in the background at start-up, "
        "so that the first batches of instance streams do not wait for them (a second or "
        "more; longer where numba's on-disk cache is not writable). /readyz answers 503 "
        "warming-up until they are loaded.",
    )
    store_timeout: float = Field(
        2.0,
        gt=0,
        description="Seconds any one call to the store may take end to end, retries "
        "included; beyond it the request fails with 503 store-unavailable (outcome "
        "unknown for a write) and /readyz fails.",
    )
    redis_socket_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds one socket read or write may take on the Redis connections "
        "that carry selection notifications before they are opened again. Store calls "
        "are bounded as a whole by store_timeout instead.",
    )
    redis_connect_timeout: float = Field(
        5.0, gt=0, description="Seconds to establish a Redis connection."
    )
    replicas_ack: int = Field(
        0,
        ge=0,
        description="Replicas every create, commit and delete must reach before it is "
        "acknowledged (Redis WAIT on the connection that wrote, to the master of the "
        "stream's slot); fewer within replicas_ack_timeout answer 503 store-unavailable, "
        "outcome unknown. 0: the master's reply is enough (replication stays asynchronous).",
    )
    replicas_ack_timeout: float = Field(
        1.0,
        gt=0,
        description="Seconds a write waits for replicas_ack replicas (WAIT's timeout); "
        "keep it below store_timeout.",
    )
    redis_max_connections: int = Field(
        64, ge=1, description="Size of each process's Redis connection pool."
    )
    log_level: str = Field(
        "info",
        pattern="^(critical|error|warning|info|debug)$",
        description="critical, error, warning, info or debug.",
    )

    @property
    def store_kind(self) -> str:
        return self.store_url.split("://", 1)[0]

    @property
    def store_cluster(self) -> bool:
        """Whether the store is a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``).

        >>> Settings(store_url="redis+cluster://127.0.0.1:7000,127.0.0.1:7001").store_cluster
        True
        """
        return self.store_kind in ("redis+cluster", "rediss+cluster")

    @field_validator("store_url")
    @classmethod
    def _known_store(cls, v: str) -> str:
        scheme = v.split("://", 1)[0] if "://" in v else ""
        if scheme not in ("memory", "redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
            raise ValueError(
                "store_url must start with memory://, redis://, rediss://, unix://, "
                "redis+cluster:// or rediss+cluster://"
            )
        if scheme in ("redis+cluster", "rediss+cluster"):
            parse_cluster_url(v)  # a bad list of nodes fails at start, saying why
        return v

    @model_validator(mode="after")
    def _memory_is_single_process(self) -> Settings:
        if self.store_kind == "memory" and self.workers > 1:
            raise ValueError(
                "The memory:// store lives inside one process; use a redis:// store "
                "for workers > 1."
            )
        return self

    @model_validator(mode="after")
    def _replicas_need_redis(self) -> Settings:
        """``replicas_ack`` waits for Redis replicas: a Redis store, and a wait that ends
        before the store call does.

        >>> Settings(store_url="memory://", replicas_ack=1)
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Settings
        ...
        """
        if self.replicas_ack and self.store_kind == "memory":
            raise ValueError("replicas_ack waits for Redis replicas: it needs a Redis store.")
        if self.replicas_ack and self.replicas_ack_timeout >= self.store_timeout:
            raise ValueError(
                "replicas_ack_timeout must be below store_timeout (a store call ends there)."
            )
        return self


__all__ = ["ClusterTarget", "Settings", "parse_cluster_url"]
