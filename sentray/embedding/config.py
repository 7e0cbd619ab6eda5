"""`EmbedConfig`: the bulk embedding job. Resources come from here, never from code."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sentray.corpus.corpus_job import ActorPoolConfig
from sentray.corpus.sources import CorpusConfig
from sentray.encode.config import EncoderConfig


@dataclass(frozen=True)
class EmbedConfig:
    """The bulk embedding job. Validated on construction; `resolved()` decides what depends on
    the model (its own pooling and Ditto head) and on the pool (a GPU pool encodes on cuda)."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    output: str = "out/embeddings"  # output folder, local or s3://
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    pool: ActorPoolConfig = field(default_factory=ActorPoolConfig)

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("no output given")
        if self.pool.num_gpus > 0 and self.encoder.device == "cpu":
            raise ValueError("num_gpus > 0 but the encoder device is cpu")

    def resolved(self) -> EmbedConfig:
        encoder = self.encoder.resolved()  # the model's own pooling, decided once, here
        if self.pool.num_gpus > 0 and encoder.device == "auto":
            encoder = dataclasses.replace(encoder, device="cuda")
        return dataclasses.replace(self, encoder=encoder)
