"""Searching a table the index job wrote: `VectorIndex` (open once, search many times, for
notebooks), `search` (the same in one call) and `run_search`, the job behind `jobs/search.py`.

A query is embedded by `QueryEncoder`, from the description the table stores, so
it goes through what made the rows. Float tables: cosine distance (score: cosine similarity),
over the vectors held in memory where they fit (`resident`: --search-mode), else through
the ANN index with the top k x refine_factor candidates re-ranked exactly. Binary tables:
hamming distance over the packed bits, exact (score: 1 - hamming / dimension), then, with
refine_factor > 0, the top k x refine_factor re-ranked by the float query against the
candidates' bits as +-1 vectors (score: their cosine)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np

from sentray.bulk_embedding.output import EmbeddingDescription
from sentray.bulk_embedding.query import QueryEncoder
from sentray.bulk_embedding.query_precision import QueryPrecision, query_encoders
from sentray.index.ann import default_nprobes
from sentray.index.config import SearchConfig
from sentray.index.index_state import IndexState
from sentray.index.resident import ResidentVectors, search_mode
from sentray.index.table_writing import connect, open_table
from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder

# a query as the table stores its rows (Q,) and, for binary tables, as floats (D,)
EncodedQuery = tuple[np.ndarray, "np.ndarray | None"]


def table_uri(output_or_index: str) -> str:
    """The table of an embedding output folder (EMBEDDINGS/_index.lance), or a .lance table."""
    uri = output_or_index.rstrip("/")
    return uri if uri.endswith(".lance") else OutputFolder.index_table(uri)


class VectorIndex:
    """A table written by the index job, with the encoder of its rows built once.

        index = VectorIndex("out/embeddings")            # or a .lance table, local or s3://
        hits = index.search(["a query", "another"], k=5)  # one list of hits per query
        hits[0][0]  # {"id": ..., "score": ..., "source": ..., "row": ..., "text": ...}

    mode: "auto" (the vectors held in memory where their float32 copy fits in
    resident.MEMORY_SEARCH_MIB), "memory" (held; from 20,000 rows a projected first pass, from
    200,000 in k-means lists, the best rows re-ranked exactly: projection.py, lists.py),
    "exact" (held, every row compared at full dimension) or "table" (the table's own search);
    `index.mode` says which it is.
    query_precision: "exact" (the rows' own plan), "bf16" or
    "auto" (`sentray.bulk_embedding.query_precision`); `index.query_precision` says which.
    """

    def __init__(self, output_or_index: str, *, s3_endpoint: str | None = None,
                 device: str = "auto", mode: str = "auto",
                 query_precision: QueryPrecision = "exact") -> None:
        self.uri = table_uri(output_or_index)
        # looked for before LanceDB connects: connecting makes the table's folder
        found = storage.exists(storage.locate(self.uri, s3_endpoint))
        self.table = open_table(*connect(self.uri, s3_endpoint)) if found else None
        if self.table is None:
            raise FileNotFoundError(f"no index at {self.uri}: build it with `sentray index "
                                    f"{output_or_index}` (or pass the .lance table itself)")
        self.description = EmbeddingDescription.from_metadata(self.table.schema.metadata,
                                                              self.uri)
        self.binary = self.description.metric == "hamming"
        # int8/uint8 tables hold the codes dequantized: the query is compared as a float.
        # `encoder` encodes the searches' queries (bf16 where --query-precision takes it);
        # `exact_encoder` is the rows' own plan (the job's vectors)
        self.encoder, self.exact_encoder, self.query_precision = query_encoders(
            self.description, query_precision, device=device, s3_endpoint=s3_endpoint,
            float_output=self.description.dequantized)
        self.float_encoder = (QueryEncoder(self.description, device=device,
                                           s3_endpoint=s3_endpoint, float_output=True)
                              if self.binary else None)
        self.columns = [c for c in ("id", "source", "row", "text")
                        if c in self.table.schema.names]
        state = IndexState.read(storage.locate(self.uri, s3_endpoint))
        self.nprobes = default_nprobes(state.partitions if state else 0)
        # a float table small enough is held in memory (resident.py)
        self.mode = search_mode(mode, rows=self.table.count_rows(),
                                dimension=self.description.dimension, binary=self.binary)
        self.resident = (ResidentVectors(self.table.to_lance(), self.columns,
                                         projected=self.mode == "memory")
                         if self.mode in ("memory", "exact") else None)

    def search(self, queries: Sequence[str], k: int = 10, *, nprobes: int | None = None,
               refine_factor: int = 10) -> list[list[dict]]:
        """The k nearest rows of each query, nearest first: dicts of id, score, source, row
        (and text, when the table holds texts). nprobes: IVF partitions searched (default: a
        sixth of the index's, at least 20); refine_factor: the top k x this candidates
        re-ranked exactly (neither applies to vectors held in memory)."""
        if isinstance(queries, str):
            queries = [queries]
        for number, query in enumerate(queries, 1):
            if not query or not query.strip():
                raise ValueError(f"query number {number} is empty: give the text to search for")
        return self.nearest_many(self.encode(queries), k, nprobes=nprobes,
                                 refine_factor=refine_factor)

    def encode(self, queries: Sequence[str]) -> list[EncodedQuery]:
        """Each query as the table's rows are stored (binary tables: with its float vector
        too, for the rescoring), all encoded in one batch."""
        stored = self.encoder.encode(list(queries))  # (Q, width) as the rows are stored
        floats = self.float_encoder.encode(list(queries)) if self.binary else None
        return [(stored[i], None if floats is None else floats[i]) for i in range(len(queries))]

    def nearest(self, query: EncodedQuery, k: int = 10, *, nprobes: int | None = None,
                refine_factor: int = 10) -> list[dict]:
        """The k nearest rows of one query `encode` returned (as `search`)."""
        if self.resident is not None:
            return self.nearest_many([query], k)[0]
        return self._one(*query, k, nprobes or self.nprobes, refine_factor)

    def nearest_many(self, queries: Sequence[EncodedQuery], k: int = 10, *,
                     nprobes: int | None = None, refine_factor: int = 10,
                     stages: dict[str, float] | None = None) -> list[list[dict]]:
        """The k nearest rows of each query `encode` returned, as `nearest` finds them: a
        float table searched for all of them in one call (Lance spreads it over its threads,
        2-3 times the queries/s of one call a query), a binary one a query at a time; vectors
        held in memory in one product (nprobes and refine_factor do not apply: exact).
        `stages`, when given, gets the seconds of "search" and of "texts" (the hits' columns
        taken: apart only for vectors held in memory, else inside the table's search)."""
        if self.resident is not None:
            started = time.perf_counter()
            ranked = self.resident.rank(np.stack([stored for stored, _ in queries]), k)
            ranked_at = time.perf_counter()
            found = [[_hit(hit, self.columns) for hit in hits]
                     for hits in self.resident.hits(ranked)]
            if stages is not None:
                stages["search"] = ranked_at - started
                stages["texts"] = time.perf_counter() - ranked_at
            return found
        started = time.perf_counter()
        found = self._nearest_in_table(queries, k, nprobes, refine_factor)
        if stages is not None:
            stages["search"], stages["texts"] = time.perf_counter() - started, 0.0
        return found

    def _nearest_in_table(self, queries: Sequence[EncodedQuery], k: int, nprobes: int | None,
                          refine_factor: int) -> list[list[dict]]:
        if self.binary or len(queries) < 2:
            return [self.nearest(query, k, nprobes=nprobes, refine_factor=refine_factor)
                    for query in queries]
        vectors = np.stack([stored for stored, _ in queries]).astype(np.float32)  # (Q, D)
        search = (self.table.search(vectors).distance_type("cosine").limit(k)
                  .nprobes(nprobes or self.nprobes).select([*self.columns, "_distance"]))
        if refine_factor:
            search = search.refine_factor(refine_factor)
        found: list[list[dict]] = [[] for _ in queries]
        for hit in search.to_arrow().to_pylist():
            hit["score"] = 1 - hit["_distance"]
            found[hit["query_index"]].append(hit)
        return [[_hit(hit, self.columns) for hit in sorted(hits, key=lambda h: -h["score"])]
                for hits in found]

    def _one(self, vector: np.ndarray, floats: np.ndarray | None, k: int, nprobes: int,
             refine_factor: int) -> list[dict]:
        if self.binary:
            bits = vector.view(np.uint8) ^ np.uint8(0x80) if vector.dtype == np.int8 else vector
            limit = k * refine_factor if refine_factor else k
            found = (self.table.search(bits.astype(np.uint8)).distance_type("hamming")
                     .limit(limit).select([*self.columns, "vector", "_distance"]).to_arrow())
            hits = found.to_pylist()
            dimension = self.description.dimension
            for hit in hits:
                hit["score"] = 1 - hit["_distance"] / dimension
            if refine_factor:
                hits = _rescored(hits, floats, dimension)
            return [_hit(hit, self.columns) for hit in hits[:k]]
        search = (self.table.search(vector.astype(np.float32)).distance_type("cosine")
                  .limit(k).nprobes(nprobes).select([*self.columns, "_distance"]))
        if refine_factor:
            search = search.refine_factor(refine_factor)
        hits = search.to_arrow().to_pylist()
        for hit in hits:
            hit["score"] = 1 - hit["_distance"]
        return [_hit(hit, self.columns) for hit in hits]


def _rescored(hits: list[dict], query: np.ndarray, dimension: int) -> list[dict]:
    """`hits` re-ranked by the cosine of the float query (D,) and each one's bits as +-1."""
    if not hits:
        return hits
    bits = np.unpackbits(np.asarray([h["vector"] for h in hits], dtype=np.uint8), axis=1)
    signs = bits[:, :dimension].astype(np.float32) * 2 - 1  # (C, D)
    scores = signs @ query / (np.linalg.norm(query) * np.sqrt(dimension) or 1.0)
    for hit, score in zip(hits, scores, strict=True):
        hit["score"] = float(score)
    return sorted(hits, key=lambda h: -h["score"])


def _hit(hit: dict, columns: list[str]) -> dict:
    return {"id": hit["id"], "score": round(float(hit["score"]), 6),
            **{c: hit[c] for c in columns if c != "id"}}


def search(output_or_index: str, queries: str | Sequence[str], k: int = 10, *,
           nprobes: int | None = None, refine_factor: int = 10, s3_endpoint: str | None = None,
           device: str = "auto", mode: str = "auto") -> list[list[dict]]:
    """`VectorIndex(output_or_index).search(queries, k)`: one list of hits per query."""
    index = VectorIndex(output_or_index, s3_endpoint=s3_endpoint, device=device, mode=mode)
    return index.search(queries, k, nprobes=nprobes, refine_factor=refine_factor)


def read_queries(config: SearchConfig) -> list[str]:
    """The --query texts, then the lines of --queries FILE (blank lines skipped)."""
    if not config.query and config.queries is None:
        raise ValueError("no query given: --query TEXT (repeatable) or --queries FILE")
    queries = list(config.query)
    if config.queries is not None:
        location = storage.locate(config.queries, config.s3_endpoint)
        with location.filesystem.open_input_stream(location.path) as handle:
            lines = handle.read().decode("utf-8").splitlines()
        queries += [line for line in lines if line.strip()]
        if not queries:
            raise ValueError(f"{config.queries} holds no queries (one a line)")
    return queries


def run_search(config: SearchConfig) -> dict:
    """The search job: prints each query's hits (a table, or JSON lines with --json)."""
    queries = read_queries(config)
    index = VectorIndex(config.embeddings, s3_endpoint=config.s3_endpoint, device=config.device,
                        mode=config.search_mode)
    results = index.search(queries, config.k, nprobes=config.nprobes,
                           refine_factor=config.refine_factor)
    for number, (query, hits) in enumerate(zip(queries, results, strict=True)):
        if config.json:
            print(json.dumps({"query": query, "hits": hits}))
            continue
        print(f"{'' if number == 0 else chr(10)}query: {table_cell(query)}")
        for rank, hit in enumerate(hits, 1):
            text = f"  {table_cell(hit['text'], 80)}" if hit.get("text") is not None else ""
            print(f"{rank:>3}  {hit['score']:.4f}  {table_cell(str(hit['id']))}{text}")
    return {"queries": len(queries), "results": results, "table": index.uri}


def table_cell(text: str, width: int | None = None) -> str:
    """`text` on one line of the search table: whitespace runs (newlines, tabs) as one space,
    other control characters (an escape sequence would drive the terminal) as U+FFFD; the
    first `width` characters, with an ellipsis where it was cut."""
    line = "".join(c if c.isprintable() else "\ufffd" for c in " ".join(text.split()))
    return line if width is None or len(line) <= width else line[:width - 1] + "\u2026"

