"""`SentenceEncoder`: tokenizer + `PooledEncoder`, the encoder behind every job: texts in,
embeddings out, in length-sorted batches (of `batch_size` sentences, or of a token budget)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sentray.encode import model_loading
from sentray.encode.config import EncoderConfig
from sentray.encode.int8 import Int8Model, Int8Pooled
from sentray.encode.model_info import model_facts
from sentray.encode.pooled_model import PooledEncoder
from sentray.encode.pooling import pool
from sentray.encode.pooling_catalog import DITTO_POOLINGS
from sentray.encode.precision import resolve_precision, torch_dtype
from sentray.kit.progress_bars import steps

logger = logging.getLogger(__name__)


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


class SentenceEncoder:
    """Turns sentences into embeddings with one of the poolings in `sentray.encode.pooling`.

    `model` and `tokenizer` may be passed in (tests build tiny ones; the trainer passes the
    model it trains); otherwise they are loaded from the config's model, resolved once by
    `config.resolved()` (a resolved config's is used as it is).
    """

    def __init__(self, config: EncoderConfig, *, model: torch.nn.Module | None = None,
                 tokenizer=None) -> None:
        self.config = config = config.resolved()
        self.device = resolve_device(config.device)
        self.precision = resolve_precision(config.precision, self.device)
        if self.precision == "auto":  # measured on this CPU (sentray.encode.precision_probe)
            from sentray.encode.precision_probe import decide_for_encoder

            self.precision = decide_for_encoder(config, SentenceEncoder, model=model,
                                                tokenizer=tokenizer)
        self.tokenizer = (tokenizer if tokenizer is not None
                          else model_loading.load_tokenizer(config.resolved_model))
        self.max_length = config.max_length or model_facts(config.resolved_model).max_length
        self.int8: Int8Pooled | None = None
        self.pooled: PooledEncoder | None = None
        if self.precision == "int8":
            self.int8 = Int8Pooled(self._int8_model(model))
        else:
            self.pooled = self._pooled(model)
            if self.device.type == "cpu" and self.precision == "bf16":
                # bf16 weights, not autocast: autocast converts every weight on every call
                # (2.09x fp32 against 2.66x on an AMX CPU, in sentence-transformers); pooling
                # stays fp32
                self.pooled.to(torch.bfloat16)
        logger.info("encoder %s pooling=%s head=%s ditto=%s device=%s precision=%s "
                    "max_length=%d", config.model, config.pooling, config.head,
                    "fast" if self.fast_ditto else "eager", self.device, self.precision,
                    self.max_length)

    def _pooled(self, model: torch.nn.Module | None) -> PooledEncoder:
        """The torch encoder in fp32 on the device, in eval mode."""
        config = self.config
        if model is None:
            pooled = PooledEncoder.load(config.resolved_model, config.pooling, head=config.head,
                                        ditto_impl=config.ditto_impl, device=self.device)
        else:
            pooled = PooledEncoder(model, config.pooling, head=config.head,
                                   ditto_impl=config.ditto_impl)
        return pooled.to(self.device).eval()

    def _int8_model(self, model: torch.nn.Module | None) -> Int8Model:
        """The config's prepared int8 model (a job's driver prepared it), else one from the
        cache or prepared now from the fp32 encoder (`sentray.encode.int8`)."""
        from sentray.encode.int8 import prepare_int8, weights_identity

        config = self.config
        if config.int8_model is None:
            pooled = self._pooled(model)
            identity = (weights_identity(model) if model is not None
                        else config.resolved_model.fingerprint)
            prepared = prepare_int8(config, pooled=pooled, tokenizer=self.tokenizer,
                                    max_length=self.max_length, model_identity=identity,
                                    batches=lambda texts: self.length_sorted_batches(
                                        self.tokenize(texts)))
        else:
            prepared = config.int8_model
        prepared.check_matches(config, self.max_length)
        return prepared

    @property
    def model(self) -> torch.nn.Module:
        """The Hugging Face encoder (fp32 or bf16; an int8 encoder has none: ONNX Runtime)."""
        if self.pooled is None:
            raise ValueError("an int8 encoder runs on ONNX Runtime and has no torch model; "
                             "use precision fp32 for this")
        return self.pooled.model

    @property
    def fast_ditto(self) -> bool:
        return self.pooled is not None and self.pooled.fast_ditto

    @property
    def dimension(self) -> int:
        return self.int8.dimension if self.int8 is not None else self.pooled.dimension

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
        if self.device.type == "cuda" and self.precision != "fp32":
            return torch.autocast("cuda", dtype=torch_dtype(self.precision))
        return torch.autocast(self.device.type, enabled=False)

    def embed_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence embeddings (B, D) in fp32 for one padded batch; differentiable (but int8)."""
        if self.int8 is not None:
            return self.int8(input_ids, attention_mask)
        with self._autocast():
            return self.pooled(input_ids.to(self.device), attention_mask.to(self.device))

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
            words = self.pooled.word_embeddings(batch.input_ids.to(self.device))
            for layer, attentions in enumerate(outputs.attentions):  # (B, H, T, T)
                diagonals = attentions.float().diagonal(dim1=-2, dim2=-1)  # (B, H, T)
                for head in range(cfg.num_attention_heads):
                    pooled = pool(self.config.pooling, hidden, mask, diagonal=diagonals[:, head],
                                  word_embeddings=words)
                    out[layer, head, batch.positions] = pooled.cpu()
        return out
