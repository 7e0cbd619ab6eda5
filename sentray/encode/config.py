"""`EncoderConfig`: what to encode with (model, pooling, head, lengths, batching, device).
Validated on construction, before any model is loaded; what depends on the model (its own
pooling, its known Ditto head) is decided by `resolved()`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import tyro

from sentray.encode.model_info import model_facts
from sentray.encode.model_loading import DEFAULT_MODEL, ResolvedModel, resolve_model
from sentray.encode.pooling_catalog import (
    DITTO_DEFAULT_HEADS,
    DITTO_POOLINGS,
    canonical_pooling,
    parse_head,
)
from sentray.kit.config_files import derived
from sentray.kit.validation import check_at_least, check_choices

Precision = Literal["fp32", "fp16", "bf16", "int8", "auto"]
DittoImpl = Literal["auto", "fast", "eager"]


@dataclass(frozen=True)
class EncoderConfig:
    """What to encode with. Validated on construction, before any model is loaded."""

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
    # sentray.encode.precision, sentray.encode.precision_probe
    precision: Precision = "fp32"
    # int8: the calibration texts, a UTF-8 file of one sentence a line; None: the bundled Brown
    # sample (so that the int8 model does not depend on the input)
    int8_calibration: str | None = None
    int8_calibration_rows: int = 300  # int8: the calibration file's first N non-blank lines
    ditto_impl: DittoImpl = "auto"  # fast: one head recomputed on SDPA (BERT family); eager: maps
    # `model` looked up once (`located()`), carried to every reader and loader of the model
    resolved_model: Annotated[ResolvedModel | None, tyro.conf.Suppress] = derived()
    # int8: the prepared model (`sentray.encode.int8.Int8Model`), prepared once by a job's
    # driver and carried to its actors
    int8_model: Annotated[Any, tyro.conf.Suppress] = derived()

    def __post_init__(self) -> None:
        check_choices(self)
        if self.resolved_model is not None and self.resolved_model.name != self.model:
            # replace(config, model=...) of a resolved config: the new model, looked up
            object.__setattr__(self, "resolved_model", resolve_model(self.model))
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
        if self.int8_calibration is not None and self.precision not in ("int8", "auto"):
            raise ValueError(f"--int8-calibration is for --precision int8 (or auto), not "
                             f"{self.precision}")

    def located(self) -> EncoderConfig:
        """This config with its model looked up and checked (`located_model`: a broken model
        folder fails here, named, not in an actor); a located config is returned as it is."""
        from sentray.encode.model_checks import located_model

        if self.resolved_model is not None:
            return self
        return dataclasses.replace(self, resolved_model=located_model(self.model))

    def resolved(self) -> EncoderConfig:
        """This config `located()`, with what depends on the model decided: the pooling (the
        one asked for, else the model's own with its Ditto head, else mean) and a Ditto
        pooling's head (the one given, else the model's known head; ValueError when there is
        none). A resolved config is returned as it is."""
        config = self.located()
        if config.pooling is None:
            pooling, own_head = model_facts(config.resolved_model).read_out
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
