"""The ANN index of a table and the rule for keeping it current. Defaults (measured by
bench/bench_index.py, docs/index-and-search.md): IVF_HNSW_SQ (an HNSW graph of 8-bit scalar
codes in each IVF partition), rows / 4,096 partitions, searched with a sixth of the partitions
(at least 20) and the top k x 10 candidates re-ranked exactly; for IVF_PQ, dimension / 8
sub-vectors.

The rule: a table of fewer than --min-index-rows rows has no ANN index (an exact scan is
milliseconds); the first run past it trains one; a rerun that adds rows adds them to the trained
index's partitions (Lance's `optimize`, the centroids kept) until the table has grown by more
than --retrain-growth of the rows the index was trained on, when it is trained again on all of
them. Packed-bit (binary) tables are searched exactly by hamming distance: no ANN index."""

from __future__ import annotations

import logging
from datetime import timedelta

from sentray.bulk_embedding.output import EmbeddingDescription
from sentray.index.config import IndexConfig
from sentray.index.embedding_record import VECTOR_COLUMN

logger = logging.getLogger(__name__)
ROWS_PER_PARTITION = 4096


def default_partitions(rows: int) -> int:
    return max(1, rows // ROWS_PER_PARTITION)


def default_sub_vectors(dimension: int) -> int:
    """dimension / 8 (48 for 384-d), else the largest divisor of the dimension below it."""
    target = max(1, dimension // 8)
    return next(m for m in range(target, 0, -1) if dimension % m == 0)


def index_action(config: IndexConfig, description: EmbeddingDescription, rows: int,
                 trained_rows: int, unindexed_rows: int) -> str | None:
    """What to do to the ANN index of a table of `rows` rows: "train", "extend" or None."""
    if config.index_type == "flat" or description.metric == "hamming":
        return None
    if rows < config.min_index_rows:
        return None
    if trained_rows == 0 or rows > trained_rows * (1 + config.retrain_growth):
        return "train"
    return "extend" if unindexed_rows > 0 else None


def unindexed_rows(table) -> int:
    for index in table.list_indices():
        if VECTOR_COLUMN in index.columns:
            return int(table.index_stats(index.name).num_unindexed_rows)
    return table.count_rows()


def default_nprobes(partitions: int) -> int:
    """Partitions a search probes by default: a sixth of them, at least 20 (all of a small
    index's). Recall@10 at 1,000,000 rows, 244 partitions, 41 probes (issue 56,
    docs/index-and-search.md): 0.985 on real Brown rows, 0.956 on bench_index's constructed
    rows (each real vector and 19 noisy copies of it); a third (82) cost twice the CPU."""
    return max(20, -(-partitions // 6))


def train(table, config: IndexConfig, description: EmbeddingDescription, rows: int) -> int:
    """Train the ANN index on every row of `table` (replacing any earlier one); returns its
    partitions."""
    partitions = config.partitions or default_partitions(rows)
    options = {"metric": description.metric, "vector_column_name": VECTOR_COLUMN,
               "index_type": config.index_type, "num_partitions": partitions, "replace": True}
    if config.index_type.endswith("PQ"):
        options["num_sub_vectors"] = (config.sub_vectors
                                      or default_sub_vectors(description.dimension))
    logger.info("training the %s index on %d rows (%s)", config.index_type, rows, options)
    table.create_index(**options)
    return partitions


def extend(table) -> None:
    """Add the rows the ANN index lacks to its partitions (centroids kept)."""
    logger.info("adding the new rows to the ANN index")
    table.optimize(cleanup_older_than=timedelta(days=7))
