"""The bulk embedding job on the corpus-job driver: corpus -> map_batches(EmbedBatch) on an actor
pool -> Parquet.

Output layout (OUTPUT is a folder, local or s3://):

    OUTPUT/<source key>/part-<first row>-<end row>-of-<source rows>.parquet
    OUTPUT/_summary.json

Each part holds a run of consecutive rows of one input file, so a file is done exactly when its
parts tile [0, rows). That is what makes a rerun resume: complete files are skipped, the parts
of incomplete ones are deleted and redone. Every input row comes out once, with its `status`
(`sentray.embedding.actor`). Columns: id, embedding (fixed_size_list<float32>), status, source,
row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus import corpus_job, part_files
from sentray.corpus.sources import Source
from sentray.embedding.actor import STATUSES, EmbedBatch, output_schema
from sentray.embedding.config import EmbedConfig
from sentray.kit import storage


def summarize(output: storage.Location, sources: list[Source]) -> dict:
    """Row accounting over the whole output: per status, and rows in == rows out per source."""
    counts = dict.fromkeys(STATUSES, 0)
    rows_in = rows_out = 0
    incomplete = part_files.incomplete_sources([output], sources)
    for source in sources:
        if source.uri in incomplete:
            continue
        rows_in += part_files.completed_rows([output], source.key)[1]
        statuses = part_files.read_column(output, source.key, "status")
        rows_out += len(statuses)
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "status": counts}


def run_embedding(config: EmbedConfig) -> dict:
    """Embed every row of the corpus into `config.output`; returns the summary."""
    config = config.resolved()

    def empty_schema(source: Source) -> pa.Schema:
        from sentray.encode.model_loading import load_config

        id_type = pa.string()
        if config.corpus.id_column:
            with source.filesystem.open_input_file(source.path) as handle:
                id_type = pq.read_schema(handle).field(config.corpus.id_column).type
        return output_schema(load_config(config.encoder.model).hidden_size, id_type)

    return corpus_job.run_corpus_job(corpus_job.CorpusJob(
        name="embed", config=config, corpus=config.corpus, pool=config.pool,
        folders=(config.output,), actor_class=EmbedBatch,
        actor_kwargs={"encoder_config": config.encoder},
        route=lambda folders: part_files.SingleFolder(folders[0]), empty_schema=empty_schema,
        summarize=lambda folders, sources: summarize(folders[0], sources)))
