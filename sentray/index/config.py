"""`IndexConfig`: the index job (an embedding output -> a LanceDB table with an ANN index), and
`SearchConfig`: the search job (queries -> the nearest rows of such a table). Validated on
construction, before anything is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from sentray.kit.output_folder import OutputFolder
from sentray.kit.validation import check_at_least, check_choices

IndexType = Literal["IVF_PQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "flat"]
WriteMode = Literal["auto", "local", "ray"]
SearchMode = Literal["auto", "memory", "exact", "table"]  # how a table is searched: index/resident.py


@dataclass(frozen=True)
class IndexConfig:
    """The index job: every embedded row of an output once in a LanceDB table, an ANN index."""

    # the embedding output folder (local or s3://) that jobs/embed.py wrote
    embeddings: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="EMBEDDINGS")] = \
        "out/embeddings"
    # where the table goes, a path or s3:// URI ending in .lance (default: EMBEDDINGS/_index.lance)
    index_uri: str | None = None
    # the embedding job's --input: each row's text joined to it by source and row
    text_from: str | None = None
    # --text-from Parquet: the column holding the text (default: the embedding job's
    # --text-column, as its output records it)
    text_column: str | None = None
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)
    # IVF_HNSW_SQ (default: recall@10 >= 0.95 at the search defaults on 50,000 and 1,000,000
    # rows, bench/bench_index.py), IVF_PQ (smaller, faster to build, 0.88 at 1,000,000),
    # IVF_HNSW_PQ, or flat (no ANN index: exact search)
    index_type: IndexType = "IVF_HNSW_SQ"
    partitions: int | None = None  # IVF partitions (default: rows / 4,096, at least 1)
    sub_vectors: int | None = None  # IVF_PQ / IVF_HNSW_PQ sub-vectors (default: dimension / 8)
    # a table of fewer rows gets no ANN index: an exact scan of it takes milliseconds
    min_index_rows: int = 10_000
    # a rerun that grows the table by more than this fraction of the rows the index was trained
    # on trains it again; less: the new rows are added to the trained index's partitions
    retrain_growth: float = 0.5
    rows_per_commit: int = 500_000  # rows per table version: a killed run loses at most these
    # local: rows appended by this process, streamed; ray: through Ray Data's write_lance on the
    # cluster; auto: ray when --address or $RAY_ADDRESS names a cluster, or past --ray-rows new rows
    write: WriteMode = "auto"
    ray_rows: int = 5_000_000  # --write auto: new rows past which the rows are written by ray
    address: str | None = None  # Ray cluster for --write ray (default: $RAY_ADDRESS, else local)
    # delete the table first and index afresh (after embed --overwrite, or another embedding)
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_choices(self)
        if not self.embeddings:
            raise ValueError("no embedding output given")
        if self.index_uri is not None and not self.index_uri.rstrip("/").endswith(".lance"):
            raise ValueError(f"--index-uri must end with .lance (a LanceDB table), got "
                             f"{self.index_uri!r}")
        check_at_least(1, partitions=self.partitions, sub_vectors=self.sub_vectors,
                       min_index_rows=self.min_index_rows, rows_per_commit=self.rows_per_commit)
        check_at_least(0, ray_rows=self.ray_rows)
        if self.retrain_growth <= 0:
            raise ValueError(f"retrain_growth must be > 0, got {self.retrain_growth}")

    @property
    def table_uri(self) -> str:
        return self.index_uri or OutputFolder.index_table(self.embeddings)


@dataclass(frozen=True)
class SearchConfig:
    """The search job: each query encoded as the table's rows were, its k nearest rows."""

    # the embedding output folder (its EMBEDDINGS/_index.lance) that jobs/embed.py wrote, or a
    # table (.lance)
    embeddings: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="EMBEDDINGS")] = \
        "out/embeddings"
    # a query (repeat the flag for several)
    query: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    queries: str | None = None  # a text file of queries, one per line
    k: Annotated[int, tyro.conf.arg(aliases=("-k",))] = 10  # results per query
    json: bool = False  # one JSON object per query instead of a table
    # IVF partitions searched per query (default: a sixth of the index's, at least 20; chosen
    # for recall@10 >= 0.95 on real and constructed rows, docs/index-and-search.md)
    nprobes: int | None = None
    # candidates re-ranked by their exact distance: k x this (IVF_PQ; 0: none); binary tables:
    # candidates re-ranked by the float query against their bits (0: hamming order only)
    refine_factor: int = 10
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)
    device: str = "auto"  # where the query encoder runs: auto, cpu, cuda
    # memory: the vectors held in memory (from 20,000 rows a 128-d projection first, from
    # 200,000 in k-means lists, the best rows re-ranked exactly); exact: held in memory, every
    # row compared at full dimension; table: the table's ANN index (or its exact scan); auto:
    # memory where their float32 copy takes <= 2 GiB
    search_mode: SearchMode = "auto"

    def __post_init__(self) -> None:
        if not self.embeddings:
            raise ValueError("no embeddings given: an embedding output folder or a .lance table")
        check_choices(self)
        check_at_least(1, k=self.k, nprobes=self.nprobes)
        check_at_least(0, refine_factor=self.refine_factor)
        empty = [i for i, q in enumerate(self.query) if not q.strip()]
        if empty:
            raise ValueError(f"--query number {empty[0] + 1} is empty: give the text to search "
                             "for")
