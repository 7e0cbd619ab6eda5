"""`ServeConfig`: the search service (`sentray serve EMBEDDINGS`). Validated on construction, before
Ray starts or the table is opened."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Annotated

import tyro

from sentray.bulk_embedding.query_precision import QueryPrecision
from sentray.corpus.actor_pool import ActorCount
from sentray.index.config import SearchMode
from sentray.kit.validation import check_at_least, check_choices

TOKEN_ENV = "SENTRAY_SERVE_TOKEN"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ReplicaCount(ActorCount):
    """--replicas: N replicas, or MIN-MAX autoscaled, spelled as the embedding job's --actors."""

    @classmethod
    def parse(cls, spec: str | int) -> ReplicaCount:
        try:
            count = ActorCount.parse(spec)
        except ValueError:
            raise ValueError(f"--replicas must be N or MIN-MAX with 1 <= MIN <= MAX (e.g. 1 or "
                             f"1-4), got {spec!r}") from None
        return cls(count.minimum, count.maximum)


@dataclass(frozen=True)
class ServeConfig:
    """The search service: a table's queries answered over HTTP by Ray Serve replicas."""

    # the embedding output folder (its EMBEDDINGS/_index.lance) that jobs/embed.py wrote, local
    # or s3://
    embeddings: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="EMBEDDINGS")] = \
        "out/embeddings"
    # the table to serve instead of EMBEDDINGS/_index.lance (a .lance path or s3:// URI)
    index_uri: str | None = None
    # the address the service listens on: 127.0.0.1 (this machine only) unless named
    host: str = LOOPBACK
    port: int = 8000  # the TCP port it listens on
    # a second port on which the one replica answers itself, with no proxy between (Ray
    # Serve's direct ingress; the same API): a lone query ~5 ms sooner and no proxy's CPU, but
    # no failover: while the replica is replaced that port refuses connections and requests in
    # flight on it are cut (--port keeps both). One replica, a cluster this job starts
    direct_port: int | None = None
    # every request but /healthz must carry it (header `Authorization: Bearer TOKEN`, the
    # OpenAI client's api_key, or `?token=TOKEN`), else 401; default: $SENTRAY_SERVE_TOKEN,
    # else no token
    token: str | None = None
    # replicas answering queries: N, or MIN-MAX to autoscale on the requests in flight
    replicas: ReplicaCount = field(default_factory=lambda: ReplicaCount(1, 1))
    cpus_per_replica: float = 1.0  # CPUs per replica (its torch threads follow it)
    # queries encoded and searched together, at most: those that arrived while the last batch
    # ran (a lone query runs at once)
    max_batch_size: int = 32
    # requests waiting for a replica beyond its in-flight ones; more get a 503 at once
    max_queued_requests: int = 256
    # a search not answered within this many seconds gets a 503 (overloaded), never a hang
    request_timeout_s: float = 10.0
    max_k: int = 100  # the largest k a request may ask for
    max_queries: int = 64  # the most queries one request may carry
    max_body_bytes: int = 65_536  # a larger request body gets a 400
    # memory: each replica holds the vectors (from 20,000 rows a 128-d projection first, from
    # 200,000 in k-means lists, the best rows re-ranked exactly); exact: held, every row
    # compared at full dimension; table: the table's ANN index (or its exact scan); auto:
    # memory where their float32 copy takes <= 2 GiB
    search_mode: SearchMode = "auto"
    # IVF partitions searched per query (default: the index's, as `sentray search`)
    nprobes: int | None = None
    refine_factor: int = 10  # the top k x this candidates re-ranked exactly (`sentray search`)
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)
    device: str = "cpu"  # where each replica's query encoder runs: cpu, cuda, auto
    # what searches encode their queries in: exact (the rows' own plan), bf16 (refused at
    # start-up unless native on this CPU and each probe row's cosine to the rows' plan is at
    # least 0.999), auto (bf16 where it passes that and runs faster, else exact);
    # /v1/embeddings always answers the rows' own vectors
    query_precision: QueryPrecision = "auto"
    # Ray cluster to run on (default: $RAY_ADDRESS, else a local one on 127.0.0.1, stopped with
    # the service)
    address: str | None = None

    def __post_init__(self) -> None:
        if not self.embeddings and not self.index_uri:
            raise ValueError("no embeddings given: an embedding output folder or --index-uri")
        if self.index_uri is not None and not self.index_uri.rstrip("/").endswith(".lance"):
            raise ValueError(f"--index-uri must end with .lance (a LanceDB table), got "
                             f"{self.index_uri!r}")
        check_choices(self)
        if not isinstance(self.replicas, ActorCount):  # 2, "2" or "1-4", as code writes them
            object.__setattr__(self, "replicas", ReplicaCount.parse(self.replicas))
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be 1-65535, got {self.port}")
        if self.direct_port is not None:
            self._check_direct_port()
        check_at_least(1, max_batch_size=self.max_batch_size, max_k=self.max_k,
                       max_queries=self.max_queries, max_body_bytes=self.max_body_bytes,
                       nprobes=self.nprobes, max_queued_requests=self.max_queued_requests)
        check_at_least(0, refine_factor=self.refine_factor)
        if self.request_timeout_s <= 0 or self.cpus_per_replica <= 0:
            raise ValueError("request_timeout_s and cpus_per_replica must be > 0, got "
                             f"{self.request_timeout_s} and {self.cpus_per_replica}")
        if self.token is not None and not self.token.strip():
            raise ValueError("--token is empty: give a secret, or leave it out")

    def _check_direct_port(self) -> None:
        if not 0 < self.direct_port < 65536 or self.direct_port == self.port:
            raise ValueError(f"--direct-port must be 1-65535 and not --port ({self.port}), got "
                             f"{self.direct_port}")
        if (self.replicas.minimum, self.replicas.maximum) != (1, 1):
            raise ValueError(f"--direct-port is one replica's own port: it needs --replicas 1, "
                             f"got {self.replicas.spec()} (more replicas: --port alone)")
        if self.address or os.environ.get("RAY_ADDRESS"):
            raise ValueError("--direct-port needs the local cluster this job starts (its Serve "
                             "controller gives the replica the port): leave out --address "
                             "and RAY_ADDRESS, or use --port alone")

    @property
    def table(self) -> str:
        """The table served: --index-uri, else the output folder (EMBEDDINGS/_index.lance)."""
        return self.index_uri or self.embeddings

    @property
    def secret(self) -> str | None:
        """The token every request must carry: --token, else $SENTRAY_SERVE_TOKEN."""
        return self.token or os.environ.get(TOKEN_ENV) or None
