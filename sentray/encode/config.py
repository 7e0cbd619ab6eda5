"""`EncoderConfig`: what a user asks to encode with (model, pooling, head, lengths, batching,
device, precision). It holds the flags as typed (a pooling alias spelled canonically) and is
validated on construction, before any model is looked up. What depends on the model or the
machine (the model's own pooling and head, its length, the precision `auto` measures) is decided
once, into an `EncoderPlan` (`sentray.encode.plan`, `sentray.precision.plan_encoder`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentray.encode.model_lookup import DEFAULT_MODEL
from sentray.encode.pooling_catalog import (
    DITTO_POOLINGS,
    DittoImpl,
    canonical_pooling,
    parse_head,
)
from sentray.encode.runtimes import registry
from sentray.kit.validation import check_at_least, check_choices

Precision = Literal["fp32", "fp16", "bf16", "int8", "auto"]
# auto, or a registered runtime (`sentray.encode.runtimes.registry`)
Runtime = Literal[("auto", *registry.names())]


@dataclass(frozen=True)
class EncoderConfig:
    """What to encode with. Validated on construction, before any model is looked up."""

    model: str = DEFAULT_MODEL  # HF id, local directory, or packaged short name
    # cls, cls_before_pooler, last_avg (mean), first_last_avg, layer1_last_avg, static_avg,
    # embedding_layer_avg, ditto, ditto_last, ditto_static, ditto_layer1_last
    # (sentray.encode.pooling_catalog). None: the
    # model's own (a sentray export's sentray.json, a sentence-transformers model's 1_Pooling),
    # else mean.
    pooling: str | None = None
    head: str | None = None  # Ditto head L-H; default: the model's known head, if any
    max_length: int | None = None  # truncation in tokens; None: the model's own (ST config or 512)
    batch_size: int = 32  # sentences per forward pass (CPU: small is fast; GPU: 256 or more)
    # Batch by a token budget instead: a forward pass takes as many length-sorted sentences as
    # fit in this many padded tokens (rows x longest row): many short sentences or a few long
    # ones, padded memory flat across corpora. None: batch_size sentences.
    max_tokens_per_batch: int | None = None
    device: str = "auto"  # auto (cuda if available), cpu, cuda, cuda:N
    # fp32 (exact: sentence-transformers' fp32 vectors) | bf16 (GPU autocast; CPU: bf16 weights,
    # native with AMX or AVX512-BF16, emulated and slow elsewhere) | fp16 (GPU) | int8 (CPU:
    # NNCF static int8 on ONNX Runtime, prepared once and cached) | auto (CPU: fp32, bf16 and
    # int8 timed on this CPU, the fastest that passes a quality gate against fp32; GPU: fp16);
    # sentray.precision
    precision: Precision = "fp32"
    # what runs it: auto (measured on this CPU among those that run the precision: for fp32 the
    # exact ones, whose vectors stay within 1e-5 of torch's) | a runtime by name
    # (sentray.encode.runtimes: torch, and the `runtimes` extra's ONNX Runtime and OpenVINO)
    runtime: Runtime = "auto"
    # int8: the texts NNCF calibrates the int8 model on, a UTF-8 file of one sentence a line;
    # None: the bundled Brown sample (so that the int8 model does not depend on the input)
    int8_calibration: str | None = None
    int8_calibration_rows: int = 300  # int8: the calibration file's first N non-blank lines
    ditto_impl: DittoImpl = "auto"  # fast: one head recomputed on SDPA (BERT family); eager: maps

    def __post_init__(self) -> None:
        check_choices(self)
        if self.pooling is not None:
            object.__setattr__(self, "pooling", canonical_pooling(self.pooling))
            if self.head is not None and self.pooling not in DITTO_POOLINGS:
                raise ValueError(f"--head is only used by the Ditto poolings "
                                 f"{sorted(DITTO_POOLINGS)}, not by {self.pooling!r}")
        if self.head is not None:
            parse_head(self.head)
        check_at_least(1, batch_size=self.batch_size,
                       max_tokens_per_batch=self.max_tokens_per_batch)
        check_at_least(2, int8_calibration_rows=self.int8_calibration_rows,
                       max_length=self.max_length)
        if self.runtime != "auto" and self.precision != "auto":
            registry.check_runs(self.runtime, self.precision)
        if self.int8_calibration is not None and self.precision not in ("int8", "auto"):
            raise ValueError(f"--int8-calibration is for --precision int8 (or auto), not "
                             f"{self.precision}")
