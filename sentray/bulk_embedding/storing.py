"""`StoreVectors`, the embedding job's last stage before a part is written: the encoder's pooled
vectors -> the vectors as stored (truncated, normalized, quantized as `VectorConfig` says) in
the output's columns, with the output's schema metadata. Pure numpy and Arrow on whole blocks;
it runs where the rows are written (a Ray task beside the encoder actors on a GPU pool, inside
the one actor on a CPU pool and in the job's own process).

A block comes out in the output's columns, in the order its owner declares them
(`sentray.bulk_embedding.output.output_columns`: id, embedding, status, windows with --long-text
chunk, source, row), then the accounting column `source_rows` and the private counters `_copied`
and `_tokens` (summed into each part's metadata by `sentray.corpus.part_files`, then dropped).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.output import output_columns
from sentray.bulk_embedding.tokenizing import EMBEDDED

POOLED = "_pooled"  # the encoder stage's column of float vectors, before they are stored


@dataclass(frozen=True)
class StoreSpec:
    """What a `StoreVectors` is built from."""

    vector: VectorConfig  # as the plan's model makes it (`job.stored_vector`)
    dimension: int  # the model's (before --truncate-dim)
    ranges: vectors.CodeBook | None = None  # int8/uint8: the code book every row is coded with
    metadata: dict | None = None  # the output files' schema metadata (what the vectors are)


class StoreVectors:
    """The encoder stage's table (`_pooled` vectors) -> the output's block (module docstring)."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec

    def __call__(self, table: pa.Table) -> pa.Table:
        spec, rows = self.spec, table.num_rows
        status = table.column("status")
        valid = np.isin(np.asarray(status.to_numpy(zero_copy_only=False), dtype=object),
                        EMBEDDED)  # (N,)
        pooled = table.column(POOLED).combine_chunks()
        floats = np.zeros((rows, spec.dimension), dtype=np.float32)  # (N, D)
        if pooled.null_count < rows:
            values = pooled.flatten().to_numpy(zero_copy_only=False)  # the non-null rows'
            present = ~np.asarray(pooled.is_null().to_numpy(zero_copy_only=False))
            floats[present] = values.reshape(-1, spec.dimension)
        finished = spec.vector.finish(floats)  # (N, d)
        stored = vectors.to_output(finished, spec.vector.output_dtype, spec.ranges)
        names = (*output_columns(spec.vector.long_text == "chunk"), "source_rows", "_copied",
                 "_tokens")
        columns = {name: table.column(name) for name in names if name != "embedding"}
        columns["embedding"] = vectors.arrow_vectors(stored, spec.vector.output_dtype, valid)
        columns = {name: columns[name] for name in names}
        # the output's metadata, beside what the block carries (the encoder actor's moments)
        metadata = {**(table.schema.metadata or {}), **(spec.metadata or {})}
        return pa.table(columns).replace_schema_metadata(metadata or None)
