"""SST-2 as the LSTM classifier reads it, prepared once on the driver (`prepare_data`): each
split's word pieces right-padded (`EncodedSplit`), the encoder's input word embeddings and, for
SIFTER, the sentiment token ids.

Sentences are tokenized *without* [CLS]/[SEP]: the LSTM reads the words x_1..x_T the paper
describes, and its last state sits on the last word piece, not on a constant [SEP].
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from sentray.encode import model_loading, model_lookup
from sentray.evaluation import senteval
from sentray.lstm import lexicon
from sentray.lstm.config import LSTMConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncodedSplit:
    """Word-piece ids of a split, right-padded to its longest row."""

    name: str
    ids: np.ndarray  # (N, L) int64, padded with the tokenizer's pad id
    lengths: np.ndarray  # (N,) int64, >= 1
    labels: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: np.ndarray | slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids (b, T) cut to the batch's longest row, lengths (b,), labels (b,)."""
        lengths = self.lengths[rows]
        ids = self.ids[rows, :int(lengths.max())]
        return (torch.from_numpy(np.ascontiguousarray(ids)), torch.from_numpy(lengths),
                torch.from_numpy(self.labels[rows]))


def encode_sentences(tokenizer, data: senteval.LabelledSentences, max_length: int) -> EncodedSplit:
    """Tokenize without [CLS]/[SEP], truncated to `max_length`; a sentence with no word piece
    becomes one [UNK] (the LSTM needs a last token)."""
    pieces = tokenizer(data.sentences, add_special_tokens=False, truncation=True,
                       max_length=max_length)["input_ids"]
    pieces = [p or [tokenizer.unk_token_id] for p in pieces]
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    ids = np.full((len(pieces), int(lengths.max())), tokenizer.pad_token_id, dtype=np.int64)
    for row, p in enumerate(pieces):
        ids[row, :len(p)] = p
    return EncodedSplit(data.name, ids, lengths, data.labels.astype(np.int64))


@dataclass(frozen=True)
class LSTMData:
    """Everything a worker needs, prepared once on the driver."""

    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    embeddings: torch.Tensor  # (V, E) the encoder's input word embeddings
    sentiment_ids: tuple[int, ...]
    sentiment_words: int


def input_embeddings(model: model_lookup.ResolvedModel) -> torch.Tensor:
    """The encoder's input word-embedding matrix (V, E), as float32 on the CPU."""
    encoder = model_loading.load_encoder(model)
    return encoder.get_input_embeddings().weight.detach().float().cpu().clone()


def prepare_data(config: LSTMConfig) -> LSTMData:
    """Load SST-2, the tokenizer, the embedding matrix and, for SIFTER, the sentiment ids (the
    baseline reads no lexicon: its set is empty)."""
    splits = {split: senteval.load_sst2(config.data_dir, split) for split in senteval.SPLITS}
    limits = {"train": config.limit_train, "dev": config.limit_eval, "test": config.limit_eval}
    model = model_lookup.resolve_model(config.model)  # looked up once, here, on the driver
    tokenizer = model_loading.load_tokenizer(model)
    encoded = {split: encode_sentences(tokenizer, data.head(limits[split]), config.max_length)
               for split, data in splits.items()}
    for split in senteval.SPLITS:
        cut = sum(1 for length in encoded[split].lengths if length == config.max_length)
        logger.info("SST-2 %s: %d sentences, %.1f word pieces on average, %d at the %d limit",
                    split, len(encoded[split]), encoded[split].lengths.mean(), cut,
                    config.max_length)
    words: set[str] = set()
    ids: set[int] = set()
    if config.cell == "sifter":
        words = lexicon.sentiment_words(lexicon.load_vader_lexicon(), config.lexicon_threshold)
        ids = lexicon.sentiment_token_ids(words, tokenizer)
    embeddings = input_embeddings(model)
    if embeddings.shape[0] < len(tokenizer):
        raise ValueError(f"model {config.model!r} has {embeddings.shape[0]} word embeddings "
                         f"but its tokenizer {len(tokenizer)} tokens")
    return LSTMData(encoded["train"], encoded["dev"], encoded["test"], embeddings,
                    tuple(sorted(ids)), len(words))
