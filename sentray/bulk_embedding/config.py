"""`EmbedConfig`: the bulk embedding job, and `VectorConfig`: the vector it stores (Matryoshka
dimension, normalization, dtype, long texts, duplicates). Resources come from here, never from
code; validated on construction. What depends on the model (its own normalization, its width)
is decided by the job from its plan (`sentray.bulk_embedding.job.as_planned`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sentray.bulk_embedding import vectors
from sentray.corpus.actor_pool import ActorPoolConfig
from sentray.corpus.sources import CorpusConfig
from sentray.encode.config import EncoderConfig
from sentray.kit.validation import check_at_least, check_choices

LongText = Literal["truncate", "chunk"]
Tokenize = Literal["auto", "own-stage", "in-actor"]


@dataclass(frozen=True)
class VectorConfig:
    """The vector each row is stored as: pooled -> truncated -> normalized -> quantized."""

    # keep the first N dimensions (Matryoshka), before normalizing and quantizing; None: all
    truncate_dim: int | None = None
    # L2-normalize each vector; auto: as the model does (a sentence-transformers model that ends
    # with a Normalize module, such as all-MiniLM-L6-v2, is normalized)
    normalize: bool | None = None
    # float32 | float16 | int8 | uint8 (per-dimension ranges, one code book for the corpus) |
    # binary | ubinary (one bit per dimension, packed 8 to a byte)
    output_dtype: vectors.OutputDtype = "float32"
    # int8/uint8: the code book's ranges from this file (an output's code book, {minimum,
    # maximum} JSON or a (2, D) .npy); None: measured on the first code_book_rows texts of the
    # input
    quantization_ranges: str | None = None
    code_book_rows: int = 10_000  # int8/uint8 without a ranges file: texts the ranges are of
    # a text longer than the model reads: truncate (embed its start) or chunk (the weighted mean
    # of its windows of max_length tokens)
    long_text: LongText = "truncate"
    chunk_overlap: int = 0  # tokens each window shares with the one before (chunk)
    max_windows: int = 32  # chunk: windows per text at most (the rest of a longer text is cut)
    dedupe: bool = True  # identical texts encoded once (within a block and an actor's cache)
    dedupe_cache_rows: int = 50_000  # vectors an actor remembers for texts seen in earlier blocks

    def __post_init__(self) -> None:
        check_choices(self)
        check_at_least(1, truncate_dim=self.truncate_dim, max_windows=self.max_windows)
        check_at_least(2, code_book_rows=self.code_book_rows)
        check_at_least(0, chunk_overlap=self.chunk_overlap,
                       dedupe_cache_rows=self.dedupe_cache_rows)
        if self.quantization_ranges and self.output_dtype not in vectors.SCALAR:
            raise ValueError(f"--quantization-ranges is for the int8/uint8 output dtypes, not "
                             f"{self.output_dtype}")
        if self.long_text == "truncate" and self.chunk_overlap:
            raise ValueError("--chunk-overlap is for --long-text chunk")

    def output_dimension(self, model_dimension: int) -> int:
        return self.truncate_dim or model_dimension

    def finish(self, pooled: np.ndarray) -> np.ndarray:
        """Pooled float vectors (N, D) -> truncated and normalized as configured (N, d)."""
        out = vectors.truncate(pooled, self.truncate_dim)
        return vectors.normalize(out) if self.normalize else out.astype(np.float32, copy=False)


# Rows per actor call: an actor sorts each block by length, and a larger block pads less (the
# first 50,000 Brown rows, batches of 32: 8.2% padding in blocks of 1,024, 3.1% in 4,096,
# bench/results/embed-padding-50k-amd.txt); a part file a block, a quarter as many as at 1,024.
ROWS_PER_BATCH = 4096


@dataclass(frozen=True)
class EmbedConfig:
    """The bulk embedding job. Validated on construction; what depends on the model and the
    pool is decided by the job's plan (`sentray.precision.plan_encoder`)."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    output: str = "out/embeddings"  # output folder, local or s3://
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    vector: VectorConfig = field(default_factory=VectorConfig)
    pool: ActorPoolConfig = field(
        default_factory=lambda: ActorPoolConfig(rows_per_batch=ROWS_PER_BATCH))
    # once an input file is done, merge its parts (one per actor block) into files of this many
    # rows; default: files of about 256 MB (384-d float32: ~170,000 rows a file; int8: ~640,000);
    # 0: keep one file per actor block
    rows_per_file: int | None = None
    # delete this job's files in OUTPUT (and only those) first, and start afresh; without it a
    # rerun whose settings would change the stored vectors stops and says which
    overwrite: bool = False
    # what the machines cost an hour (any currency): the summary then gives this run's cost
    # per million rows and per million tokens
    price_per_hour: float | None = None
    # where rows are tokenized on Ray: own-stage (a pool of CPU actors ahead of the encoder
    # actors, which then only run the model), in-actor (in each encoder actor), auto (own-stage
    # when the actors have GPUs)
    tokenize: Tokenize = "auto"

    def __post_init__(self) -> None:
        check_choices(self)
        if self.price_per_hour is not None and self.price_per_hour < 0:
            raise ValueError(f"price_per_hour must be >= 0, got {self.price_per_hour}")
        if not self.output:
            raise ValueError("no output given")
        if self.pool.num_gpus > 0 and self.encoder.device == "cpu":
            raise ValueError("num_gpus > 0 but the encoder device is cpu")
        if self.pool.num_gpus > 0 and self.encoder.precision == "int8":
            raise ValueError("precision int8 runs on a CPU (ONNX Runtime); a GPU pool runs fp16 "
                             "(every CUDA GPU) or bf16 (Ampere or later)")
        if self.rows_per_file is not None and self.rows_per_file < 0:
            raise ValueError(f"rows_per_file must be >= 0 (0: a file per block), got "
                             f"{self.rows_per_file}")

    @property
    def tokenizer_stage(self) -> bool:
        """Whether rows are tokenized in a stage of their own on Ray (`tokenize`)."""
        return self.tokenize == "own-stage" or (self.tokenize == "auto" and self.pool.num_gpus > 0)
