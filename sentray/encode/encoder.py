"""`SentenceEncoder`: a plan's tokenizer and forward pass, the encoder behind every job: texts
in, embeddings out, in length-sorted batches (of `batch_size` sentences, or of a token budget).
It builds what its `EncoderPlan` says and decides nothing: the plan was made before it
(`sentray.precision.plan_encoder`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sentray.encode import model_loading
from sentray.encode.plan import EncoderPlan
from sentray.encode.pooling import pool
from sentray.encode.pooling_catalog import DITTO_POOLINGS
from sentray.encode.runtimes import registry
from sentray.kit.progress_bars import steps

logger = logging.getLogger(__name__)


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


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a single text ([CLS], [SEP] for BERT; <s>,
    </s> for RoBERTa), read off one encoding with and without them."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    raise ValueError(f"cannot tell {type(tokenizer).__name__}'s special tokens apart from text")


@dataclass
class TokenBatch:
    """One padded forward-pass batch: input_ids and attention_mask are (B, T)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    positions: np.ndarray  # (B,) index of each row in the caller's list


@dataclass(frozen=True)
class TokenBatches:
    """How token ids become padded forward-pass batches: longest first (the least padding), of
    `batch_size` sentences, or of as many as fit in `max_tokens_per_batch` padded tokens (a
    longer sentence goes alone). The one batching of every encoder, the embedding job's model
    stage included."""

    pad_id: int
    batch_size: int
    max_tokens_per_batch: int | None = None

    def padded(self, flat: np.ndarray, lengths: np.ndarray,
               batch_size: int | None = None) -> Iterator[TokenBatch]:
        """Batches of the N sequences laid end to end in `flat` (lengths (N,)); `positions`
        index them. `batch_size` given: of that many sentences, whatever the token budget."""
        lengths = np.asarray(lengths, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
        order = np.argsort(-lengths, kind="stable")
        if batch_size is None and self.max_tokens_per_batch is not None:
            bounds = token_budget_bounds(lengths[order], self.max_tokens_per_batch)
        else:
            size = batch_size or self.batch_size
            bounds = [(start, min(start + size, len(order)))
                      for start in range(0, len(order), size)]
        flat = np.asarray(flat, dtype=np.int64)
        for start, stop in bounds:
            positions = order[start:stop]
            width = int(lengths[positions].max())
            columns = np.arange(width)  # (T,)
            mask = columns[None, :] < lengths[positions][:, None]  # (B, T)
            index = np.where(mask, starts[positions][:, None] + columns[None, :], 0)
            ids = np.where(mask, flat[index] if len(flat) else 0, self.pad_id)  # (B, T)
            yield TokenBatch(torch.from_numpy(ids.astype(np.int64, copy=False)),
                             torch.from_numpy(mask.astype(np.int64)), positions)


class SentenceEncoder:
    """Turns sentences into embeddings as its `plan` says (`sentray.encode.pooling`'s
    poolings, on the plan's runtime and precision).

    `model` and `tokenizer` may be passed in (tests build tiny ones; the trainer passes the
    model it trains); otherwise they are loaded from the plan's model.
    """

    def __init__(self, plan: EncoderPlan, *, model: torch.nn.Module | None = None,
                 tokenizer=None) -> None:
        self.plan = plan
        self.tokenizer = (tokenizer if tokenizer is not None
                          else model_loading.load_tokenizer(plan.model))
        self.forward = registry.build_forward(plan, model)
        self.device = self.forward.device
        logger.info("encoder %s pooling=%s head=%s ditto=%s device=%s precision=%s runtime=%s "
                    "max_length=%d", plan.model.name, plan.pooling, plan.head,
                    "fast" if self.fast_ditto else "eager", self.device, plan.precision,
                    plan.runtime, plan.max_length)

    @property
    def precision(self) -> str:
        return self.plan.precision

    @property
    def max_length(self) -> int:
        return self.plan.max_length

    @property
    def dimension(self) -> int:
        return self.plan.dimension

    @property
    def pooled(self):
        """The torch `PooledEncoder` (None on another runtime)."""
        return self.forward.pooled

    @property
    def model(self) -> torch.nn.Module:
        """The Hugging Face encoder (a torch plan's; another runtime has none)."""
        if self.pooled is None:
            raise ValueError(f"a {self.plan.precision} encoder runs on {self.plan.runtime} and "
                             "has no torch model; use precision fp32 for this")
        return self.pooled.model

    @property
    def fast_ditto(self) -> bool:
        return self.pooled is not None and self.pooled.fast_ditto

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
        flat = np.fromiter((t for ids in token_ids for t in ids), dtype=np.int64,
                           count=int(lengths.sum()))
        batches = TokenBatches(self.tokenizer.pad_token_id or 0, self.plan.batch_size,
                               self.plan.max_tokens_per_batch)
        return batches.padded(flat, lengths, batch_size)

    # -- forward ------------------------------------------------------------------------------

    def embed_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence embeddings (B, D) in fp32 for one padded batch; differentiable on torch."""
        return self.forward(input_ids, attention_mask)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Embeddings (N, D) float32 for N texts, in input order."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, not a single string")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not len(texts):
            return out
        batches = self.length_sorted_batches(self.tokenize(texts), batch_size)
        for batch in steps(batches, desc="batches"):
            out[batch.positions] = self.embed_tokens(batch.input_ids, batch.attention_mask).cpu()
        return out

    @torch.inference_mode()
    def encode_every_head(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Ditto embeddings for every (layer, head): (L, H, N, D) float32, one eager forward
        pass per batch. Used by the head search. The model runs eagerly for this call only:
        later `encode` calls get back the attention they were built with (SDPA for fast Ditto)."""
        if self.plan.pooling not in DITTO_POOLINGS:
            raise ValueError(f"encode_every_head needs a Ditto pooling, not {self.plan.pooling!r}")
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
            with self.forward.autocast():
                outputs = self.model(input_ids=batch.input_ids.to(self.device),
                                     attention_mask=mask, output_hidden_states=True,
                                     output_attentions=True)
            hidden = tuple(h.float() for h in outputs.hidden_states)
            words = self.pooled.word_embeddings(batch.input_ids.to(self.device))
            for layer, attentions in enumerate(outputs.attentions):  # (B, H, T, T)
                diagonals = attentions.float().diagonal(dim1=-2, dim2=-1)  # (B, H, T)
                for head in range(cfg.num_attention_heads):
                    pooled = pool(self.plan.pooling, hidden, mask, diagonal=diagonals[:, head],
                                  word_embeddings=words)
                    out[layer, head, batch.positions] = pooled.cpu()
        return out
