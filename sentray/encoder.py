"""SentenceEncoder: tokenizer + transformer + pooling, the one encoder behind every job.

Fast Ditto: for BERT-family encoders the model runs on SDPA (no attention maps at all) and only
the chosen head's diagonal is recomputed from that layer's input with its own query/key weights.
Other architectures run eagerly with `output_attentions=True` and read the head from there.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from sentray import models
from sentray.pooling import (
    DITTO_DEFAULT_HEADS,
    DITTO_POOLINGS,
    attention_diagonal,
    canonical_pooling,
    parse_head,
    pool,
)
from sentray.progress import steps

logger = logging.getLogger(__name__)

Precision = Literal["fp32", "fp16", "bf16"]
DittoImpl = Literal["auto", "fast", "eager"]


@dataclass(frozen=True)
class EncoderConfig:
    """What to encode with. Validated on construction, before any model is loaded."""

    model: str = models.DEFAULT_MODEL  # HF id, local directory, or packaged short name
    # cls, cls_before_pooler, last_avg (mean), first_last_avg, layer1_last_avg, static_avg,
    # ditto, ditto_last, ditto_static, ditto_layer1_last (sentray.pooling). None: the model's own
    # (a sentray export's sentray.json, a sentence-transformers model's 1_Pooling), else mean.
    pooling: str | None = None
    head: str | None = None  # Ditto head L-H; default: the model's known head, if any
    max_length: int | None = None  # truncation in tokens; None: the model's own (ST config or 512)
    batch_size: int = 32  # sentences per forward pass (CPU: small is fast; GPU: 256 or more)
    # Batch by a token budget instead: a forward pass takes as many length-sorted sentences as
    # fit in this many padded tokens (rows x longest row): many short sentences or a few long
    # ones, padded memory flat across corpora. None: batch_size sentences.
    max_tokens_per_batch: int | None = None
    device: str = "auto"  # auto (cuda if available), cpu, cuda, cuda:N
    precision: Precision = "fp32"  # autocast dtype on GPU; CPU runs fp32
    ditto_impl: DittoImpl = "auto"  # fast: one head recomputed on SDPA (BERT family); eager: maps

    def __post_init__(self) -> None:
        # What depends on the model (its own pooling, its known Ditto head) is decided by
        # `resolved`, not here: a nested default instance must not fix them for the default
        # model before the model is chosen.
        if self.pooling is not None:
            object.__setattr__(self, "pooling", canonical_pooling(self.pooling))
            if self.head is not None and self.pooling not in DITTO_POOLINGS:
                raise ValueError(f"--head is only used by the Ditto poolings "
                                 f"{sorted(DITTO_POOLINGS)}, not by {self.pooling!r}")
        if self.head is not None:
            parse_head(self.head)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_tokens_per_batch is not None and self.max_tokens_per_batch < 1:
            raise ValueError(f"max_tokens_per_batch must be >= 1, got "
                             f"{self.max_tokens_per_batch}")
        if self.max_length is not None and self.max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {self.max_length}")
        if self.precision not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"precision must be fp32, fp16 or bf16, got {self.precision!r}")
        if self.ditto_impl not in ("auto", "fast", "eager"):
            raise ValueError(f"ditto_impl must be auto, fast or eager, got {self.ditto_impl!r}")

    def resolved(self) -> EncoderConfig:
        """This config with what depends on the model decided: the pooling (the one asked for,
        else the model's own with its Ditto head, else mean) and a Ditto pooling's head (the one
        given, else the model's known head; ValueError when there is none)."""
        config = self
        if config.pooling is None:
            pooling, own_head = models.model_pooling(config.model)
            config = dataclasses.replace(config, pooling=pooling, head=config.head or own_head)
        if config.pooling in DITTO_POOLINGS and config.head is None:
            head = DITTO_DEFAULT_HEADS.get(config.model)
            if head is None:
                raise ValueError(
                    f"pooling {config.pooling!r} needs a head (--head L-H): no default is known "
                    f"for model {config.model!r} (known: {DITTO_DEFAULT_HEADS}); find one with "
                    "`python jobs/evaluate.py --search-head`")
            config = dataclasses.replace(config, head=head)
        return config

    @property
    def layer_head(self) -> tuple[int, int] | None:
        return parse_head(self.head) if self.head else None


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    return resolved


def token_budget_bounds(sorted_lengths: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """[start, stop) runs of `sorted_lengths` (longest first) whose padded size, rows x the
    run's first (longest) length, stays within `budget`; a row longer than the budget is a run
    of its own."""
    bounds, start, n = [], 0, len(sorted_lengths)
    while start < n:
        rows = max(1, budget // max(int(sorted_lengths[start]), 1))
        stop = min(start + rows, n)
        bounds.append((start, stop))
        start = stop
    return bounds


@dataclass
class TokenBatch:
    """One padded forward-pass batch: input_ids and attention_mask are (B, T)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    positions: np.ndarray  # (B,) index of each row in the caller's list


class SentenceEncoder:
    """Turns sentences into embeddings with one of the poolings in `sentray.pooling`.

    `model` and `tokenizer` may be passed in (tests build tiny ones); otherwise they are loaded
    from `config.model`.
    """

    def __init__(self, config: EncoderConfig, *, model: torch.nn.Module | None = None,
                 tokenizer=None) -> None:
        self.config = config = config.resolved()
        self.device = resolve_device(config.device)
        self.tokenizer = tokenizer if tokenizer is not None else models.load_tokenizer(config.model)
        hf_config = model.config if model is not None else models.load_config(config.model)
        self.fast_ditto = self._use_fast_ditto(hf_config)
        needs_attentions = config.pooling in DITTO_POOLINGS and not self.fast_ditto
        if model is None:
            model = models.load_encoder(
                config.model, device=self.device,
                attn_implementation="eager" if needs_attentions else None)
        elif needs_attentions and model.config._attn_implementation != "eager":
            model.set_attn_implementation("eager")
        self.model = model.to(self.device).eval()
        self.max_length = config.max_length or models.default_max_length(config.model, self.tokenizer)
        if config.layer_head is not None:
            layer, head = config.layer_head
            n_layers, n_heads = hf_config.num_hidden_layers, hf_config.num_attention_heads
            if not (layer < n_layers and head < n_heads):
                raise ValueError(f"head {config.head!r} is outside model {config.model!r}, which "
                                 f"has layers 0-{n_layers - 1} and heads 0-{n_heads - 1}")
        if config.precision != "fp32" and self.device.type != "cuda":
            raise ValueError(f"precision {config.precision!r} needs a GPU; on CPU use fp32")
        logger.info("encoder %s pooling=%s head=%s ditto=%s device=%s max_length=%d",
                    config.model, config.pooling, config.head,
                    "fast" if self.fast_ditto else "eager", self.device, self.max_length)

    def _use_fast_ditto(self, hf_config) -> bool:
        if self.config.pooling not in DITTO_POOLINGS or self.config.ditto_impl == "eager":
            return False
        supported = models.is_bert_family(hf_config)
        if self.config.ditto_impl == "fast" and not supported:
            raise ValueError(f"fast Ditto supports {sorted(models.BERT_FAMILY)} encoders, not "
                             f"{hf_config.model_type!r}; use ditto_impl='eager'")
        return supported

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    # -- tokenization -------------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (special tokens added, truncated to max_length), unpadded."""
        return self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                              padding=False, return_attention_mask=False,
                              return_token_type_ids=False)["input_ids"]

    def length_sorted_batches(self, token_ids: list[list[int]],
                              batch_size: int | None = None) -> Iterator[TokenBatch]:
        """Padded batches in order of length (longest first), which minimises padding: of
        `batch_size` sentences, or, with the config's `max_tokens_per_batch`, of as many as fit
        in that many padded tokens (a longer sentence goes alone)."""
        lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
        order = np.argsort(-lengths, kind="stable")
        if batch_size is None and self.config.max_tokens_per_batch is not None:
            bounds = token_budget_bounds(lengths[order], self.config.max_tokens_per_batch)
        else:
            size = batch_size or self.config.batch_size
            bounds = [(start, min(start + size, len(order)))
                      for start in range(0, len(order), size)]
        pad_id = self.tokenizer.pad_token_id or 0
        for start, stop in bounds:
            positions = order[start:stop]
            width = int(lengths[positions].max())
            ids = np.full((len(positions), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(positions), width), dtype=np.int64)
            for row, position in enumerate(positions):
                n = lengths[position]
                ids[row, :n] = token_ids[position]
                mask[row, :n] = 1
            yield TokenBatch(torch.from_numpy(ids), torch.from_numpy(mask), positions)

    # -- forward ------------------------------------------------------------------------------

    def _autocast(self):
        if self.device.type == "cuda" and self.config.precision != "fp32":
            dtype = torch.float16 if self.config.precision == "fp16" else torch.bfloat16
            return torch.autocast("cuda", dtype=dtype)
        return torch.autocast(self.device.type, enabled=False)

    def embed_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence embeddings (B, D) in fp32 for one padded batch; differentiable."""
        with self._autocast():
            return embed_with(self.model, input_ids.to(self.device),
                              attention_mask.to(self.device), pooling=self.config.pooling,
                              layer_head=self.config.layer_head, fast_ditto=self.fast_ditto)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Embeddings (N, D) float32 for N texts, in input order."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, not a single string")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not len(texts):
            return out
        batches = self.length_sorted_batches(self.tokenize(texts), batch_size)
        for batch in steps(batches, desc="every head, batches"):
            out[batch.positions] = self.embed_tokens(batch.input_ids, batch.attention_mask).cpu()
        return out

    @torch.inference_mode()
    def encode_every_head(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Ditto embeddings for every (layer, head): (L, H, N, D) float32, one eager forward
        pass per batch. Used by the head search. The model runs eagerly for this call only:
        later `encode` calls get back the attention they were built with (SDPA for fast Ditto)."""
        if self.config.pooling not in DITTO_POOLINGS:
            raise ValueError(f"encode_every_head needs a Ditto pooling, not {self.config.pooling!r}")
        implementation = self.model.config._attn_implementation
        if implementation != "eager":
            self.model.set_attn_implementation("eager")
        try:
            return self._every_head(texts, batch_size)
        finally:
            if implementation != "eager":
                self.model.set_attn_implementation(implementation)

    def _every_head(self, texts: Sequence[str], batch_size: int | None) -> np.ndarray:
        cfg = self.model.config
        out = np.zeros((cfg.num_hidden_layers, cfg.num_attention_heads, len(texts),
                        self.dimension), dtype=np.float32)
        batches = self.length_sorted_batches(self.tokenize(texts), batch_size)
        for batch in steps(batches, desc="every head, batches"):
            mask = batch.attention_mask.to(self.device)
            with self._autocast():
                outputs = self.model(input_ids=batch.input_ids.to(self.device),
                                     attention_mask=mask, output_hidden_states=True,
                                     output_attentions=True)
            hidden = tuple(h.float() for h in outputs.hidden_states)
            for layer, attentions in enumerate(outputs.attentions):  # (B, H, T, T)
                diagonals = attentions.float().diagonal(dim1=-2, dim2=-1)  # (B, H, T)
                for head in range(cfg.num_attention_heads):
                    pooled = pool(self.config.pooling, hidden, mask, diagonal=diagonals[:, head])
                    out[layer, head, batch.positions] = pooled.cpu()
        return out


def head_diagonal(model: torch.nn.Module, outputs, attention_mask: torch.Tensor,
                  layer_head: tuple[int, int], fast_ditto: bool) -> torch.Tensor:
    """A_ii (B, T) of head `layer_head`: recomputed from that layer's input with the head's own
    query/key weights (fast, BERT family on SDPA), or read from eager `outputs.attentions`."""
    layer, head = layer_head
    if not fast_ditto:
        return outputs.attentions[layer][:, head].diagonal(dim1=-2, dim2=-1).float()
    attention = model.encoder.layer[layer].attention.self
    size = attention.attention_head_size
    rows = slice(head * size, (head + 1) * size)
    layer_input = outputs.hidden_states[layer]  # (B, T, D): the input of layer `layer`
    query = F.linear(layer_input, attention.query.weight[rows], attention.query.bias[rows])
    key = F.linear(layer_input, attention.key.weight[rows], attention.key.bias[rows])
    return attention_diagonal(query.float(), key.float(), attention_mask,
                              scaling=1.0 / math.sqrt(size))  # (B, T)


def embed_with(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
               pooling: str, layer_head: tuple[int, int] | None = None,
               fast_ditto: bool = False) -> torch.Tensor:
    """Sentence embeddings (B, D) fp32 of a padded batch (B, T) through a Hugging Face encoder and
    one of the poolings; differentiable. The one forward pass behind encoding and training."""
    ditto = pooling in DITTO_POOLINGS
    outputs = model(input_ids=input_ids, attention_mask=attention_mask,
                    output_hidden_states=True, output_attentions=ditto and not fast_ditto)
    # Pooling runs in fp32 even under the caller's autocast (the diagonal's softmax needs it).
    with torch.autocast(input_ids.device.type, enabled=False):
        hidden = tuple(h.float() for h in outputs.hidden_states)  # L+1 x (B, T, D)
        diagonal = None
        if ditto:
            diagonal = head_diagonal(model, outputs, attention_mask, layer_head, fast_ditto)
        pooler_output = getattr(outputs, "pooler_output", None)
        return pool(pooling, hidden, attention_mask, diagonal=diagonal,
                    pooler_output=None if pooler_output is None else pooler_output.float())


__all__ = ["EncoderConfig", "SentenceEncoder", "embed_with", "head_diagonal",
           "resolve_device"]
