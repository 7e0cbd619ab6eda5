"""Bulk embedding on Ray Data: corpus -> map_batches(EmbedBatch) on an actor pool -> Parquet.

Output layout (OUTPUT is a folder, local or s3://):

    OUTPUT/<source key>/part-<first row>-<end row>-of-<source rows>.parquet
    OUTPUT/_summary.json

Each part holds a run of consecutive rows of one input file, so a file is done exactly when its
parts tile [0, rows). That is what makes a rerun resume: complete files are skipped, the parts
of incomplete ones are deleted and redone. Every input row comes out once, with `status`:

    ok | truncated (embedded from its first max_length tokens) | null | empty | invalid_utf8

and a null embedding for all but ok/truncated. Columns: id, embedding (fixed_size_list<float32>),
status, source, row.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sentray import parts, pipeline, storage
from sentray.corpus import (
    CorpusConfig,
    Source,
)
from sentray.encoder import EncoderConfig, SentenceEncoder

logger = logging.getLogger(__name__)

STATUSES = ("ok", "truncated", "null", "empty", "invalid_utf8")
EMBEDDED = ("ok", "truncated")


@dataclass(frozen=True)
class EmbedConfig:
    """The bulk embedding job. Resources come from here, never from code."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    output: str = "out/embeddings"  # output folder, local or s3://
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    pool: pipeline.ActorPoolConfig = field(
        default_factory=lambda: pipeline.ActorPoolConfig(actors=2, rows_per_batch=1024))

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("no output given")
        encoder = self.encoder.resolved()  # the model's own pooling, decided once, here
        if self.pool.num_gpus > 0 and encoder.device == "auto":
            encoder = dataclasses.replace(encoder, device="cuda")
        object.__setattr__(self, "encoder", encoder)
        if self.pool.num_gpus > 0 and self.encoder.device == "cpu":
            raise ValueError("num_gpus > 0 but the encoder device is cpu")


def embedding_type(dimension: int) -> pa.DataType:
    return pa.list_(pa.float32(), dimension)


def output_schema(dimension: int, id_type: pa.DataType) -> pa.Schema:
    return pa.schema([("id", id_type), ("embedding", embedding_type(dimension)),
                      ("status", pa.string()), ("source", pa.string()), ("row", pa.int64())])


class EmbedBatch:
    """Ray Data callable class: loads the encoder once per actor, embeds one batch of records.

    Takes the reader's records (id, text, read_error, source, row, source_rows) as a pyarrow
    Table and returns them with `embedding` and `status` instead of text and read_error.
    """

    def __init__(self, encoder_config: EncoderConfig) -> None:
        self.encoder = SentenceEncoder(encoder_config)
        self.special_tokens = self.encoder.tokenizer.num_special_tokens_to_add(pair=False)

    def __call__(self, batch: pa.Table) -> pa.Table:
        started = time.perf_counter()
        texts = batch.column("text").to_pylist()
        read_errors = batch.column("read_error").to_pylist()
        status = np.empty(len(texts), dtype=object)
        candidates = []
        for i, (text, error) in enumerate(zip(texts, read_errors, strict=True)):
            if error is not None:
                status[i] = error
            elif text is None:
                status[i] = "null"
            elif not text.strip():
                status[i] = "empty"
            else:
                candidates.append(i)
        vectors = np.zeros((len(texts), self.encoder.dimension), dtype=np.float32)
        if candidates:
            token_ids = self.encoder.tokenize([texts[i] for i in candidates])
            keep = []
            for i, ids in zip(candidates, token_ids, strict=True):
                if len(ids) <= self.special_tokens:  # nothing but control characters etc.
                    status[i] = "empty"
                    continue
                status[i] = "truncated" if len(ids) >= self.encoder.max_length and len(
                    self.encoder.tokenizer.encode(texts[i], add_special_tokens=True)
                ) > self.encoder.max_length else "ok"
                keep.append((i, ids))
            if keep:
                import torch

                positions = np.array([i for i, _ in keep])
                kept_ids = [ids for _, ids in keep]
                with torch.inference_mode():
                    for tokens in self.encoder.length_sorted_batches(kept_ids):
                        embedded = self.encoder.embed_tokens(tokens.input_ids,
                                                             tokens.attention_mask)
                        vectors[positions[tokens.positions]] = embedded.float().cpu().numpy()
        embedded_mask = np.isin(status, EMBEDDED)
        seconds = time.perf_counter() - started
        logger.info("embedded %d of %d rows in %.2f s (%.0f rows/s)", int(embedded_mask.sum()),
                    len(texts), seconds, len(texts) / max(seconds, 1e-9))
        dimension = self.encoder.dimension
        embeddings = pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.reshape(-1)), dimension, mask=pa.array(~embedded_mask))
        return pa.table({
            "id": batch.column("id"),
            "embedding": embeddings,
            "status": pa.array(status.tolist(), pa.string()),
            "source": batch.column("source"),
            "row": batch.column("row"),
            "source_rows": batch.column("source_rows"),
        })


# -- output ---------------------------------------------------------------------------------------


def summarize(output: storage.Location, sources: list[Source]) -> dict:
    """Row accounting over the whole output: per status, and rows in == rows out per source."""
    counts = dict.fromkeys(STATUSES, 0)
    rows_in = rows_out = 0
    incomplete = parts.incomplete_sources([output], sources)
    for source in sources:
        if source.uri in incomplete:
            continue
        rows_in += parts.completed_rows([output], source.key)[1]
        statuses = parts.read_column(output, source.key, "status")
        rows_out += len(statuses)
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "status": counts}


def run_embedding(config: EmbedConfig) -> dict:
    """Embed every row of the corpus into `config.output`; returns the summary."""

    def empty_schema(source: Source) -> pa.Schema:
        from sentray.models import load_config

        id_type = pa.string()
        if config.corpus.id_column:
            with source.filesystem.open_input_file(source.path) as handle:
                id_type = pq.read_schema(handle).field(config.corpus.id_column).type
        return output_schema(load_config(config.encoder.model).hidden_size, id_type)

    return pipeline.run_corpus_job(pipeline.CorpusJob(
        name="embed", config=config, corpus=config.corpus, pool=config.pool,
        folders=(config.output,), actor_class=EmbedBatch,
        actor_kwargs={"encoder_config": config.encoder},
        route=lambda folders: parts.SingleFolder(folders[0]), empty_schema=empty_schema,
        summarize=lambda folders, sources: summarize(folders[0], sources)))
