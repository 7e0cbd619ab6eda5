"""`EncoderPlan`: what an encoder will be, decided once, before any encoder exists: the model
(looked up, checked, its facts read), the read-out (pooling and Ditto head), the length it
encodes at, the vector's dimension, the device, the precision and the runtime that runs it (with
why, and what was measured), and the runtime's artefact (a prepared model file, such as the int8
ONNX model). `SentenceEncoder(plan)` only builds from it; Ray actors and the query encoder
receive it as it is.

A plan runs on one of the registered runtimes (`sentray.encode.runtimes`: what each runs, and
the kind of artefact each precision of it needs: the pooled encoder exported as one ONNX graph,
`onnx`, or that graph quantized to int8 by NNCF, `onnx-int8`).

`model_plan(config)` is the model's part, fp32 on torch: the one place where a model's own
pooling, its Ditto head and its length are taken as defaults. `sentray.precision.plan_encoder`
makes the whole plan from it (the precision decided, measured for `auto`, the artefact
prepared): what the jobs call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sentray.encode.config import EncoderConfig
from sentray.encode.model_files import checked_model, model_facts
from sentray.encode.model_lookup import ResolvedModel, located_model
from sentray.encode.pooling_catalog import (
    decided_ditto_impl,
    parse_head,
    read_out,
)
from sentray.encode.runtimes import registry


@dataclass(frozen=True)
class Artefact:
    """A runtime's prepared model: its file's bytes and what it was made from: the plan's pooled
    encoder as an ONNX graph (`onnx`), or that graph statically quantized by NNCF
    (`onnx-int8`). Cached per `key` (`sentray.precision.artefacts`); an int8 one is written
    beside the rows it made (`OutputFolder`)."""

    kind: str  # onnx | onnx-int8 (`sentray.encode.runtimes.artefact_kinds`)
    key: str  # digest of what it was made from (`sentray.precision.artefacts.artefact_key`)
    digest: str  # sha256 of the file: its identity in the settings record
    pooling: str
    head: str | None
    max_length: int
    dimension: int
    calibration: dict | None  # int8: source, rows, digest of the texts it was calibrated on
    versions: dict  # the tools that made it (torch, onnx, nncf)
    prepare_seconds: float  # what preparing it took where it was made
    data: bytes = field(repr=False, compare=False)

    def record(self) -> dict:
        """What the settings and the summary say of it (no bytes)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "data"}

    @classmethod
    def from_record(cls, record: dict, data: bytes) -> Artefact:
        """From its record (one written before artefacts had kinds is an int8 model)."""
        return cls(**{"kind": "onnx-int8", **record}, data=data)


@dataclass(frozen=True, eq=False)
class ProbedRows:
    """Rows the probe encoded with the runtime and precision it chose: their texts and pooled
    vectors (R, D) float32, exactly what the plan's encoder gives them. The job's encoders take
    these vectors rather than encode the rows again."""

    texts: tuple[str, ...]
    vectors: np.ndarray


@dataclass(frozen=True)
class EncoderPlan:
    """What an encoder will be. Frozen, decided before any encoder exists (`model_plan`,
    `sentray.precision.plan_encoder`); `SentenceEncoder(plan)` builds exactly this."""

    model: ResolvedModel  # looked up once; its facts read once and kept on it
    pooling: str  # canonical
    head: str | None  # Ditto head L-H
    max_length: int  # the length it encodes at, in tokens
    model_max_length: int  # the model's own length (what evaluate and an export encode at)
    dimension: int  # of the pooled vector
    normalize: bool  # whether the model's own pipeline L2-normalizes (a fact of the model)
    own_pooling: str | None  # the read-out the model declares (None: it declares none)
    device: str  # cpu, cuda, cuda:N; auto: decided by the process that builds it
    batch_size: int
    max_tokens_per_batch: int | None
    ditto_impl: str  # a Ditto pooling's path, decided: fast or eager (`decided_ditto_impl`)
    precision: str = "fp32"  # fp32 | bf16 | fp16 | int8
    runtime: str = "torch"  # a registered runtime (`sentray.encode.runtimes.registry`)
    why: str = "asked for"  # why this precision (auto: what decided it)
    measured: tuple[dict, ...] = ()  # auto: each candidate's speed and cosine to fp32
    artefact: Artefact | None = None  # the runtime's prepared model, when it needs one
    # auto on a corpus's rows: the ones the probe encoded with what it chose (not recorded)
    probed: ProbedRows | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        kind = registry.artefact_kind(self.runtime, self.precision)
        if (self.artefact.kind if self.artefact else None) != kind:
            raise ValueError(f"{self.runtime} {self.precision} runs "
                             f"{'an ' + kind + ' artefact' if kind else 'the torch model'}, not "
                             f"{self.artefact.kind if self.artefact else 'no artefact'}")
        if self.artefact is None:
            return
        made = (self.artefact.pooling, self.artefact.head, self.artefact.max_length)
        wanted = (self.pooling, self.head, self.max_length)
        if made != wanted:
            raise ValueError(f"the int8 model {self.artefact.digest[:12]} was made for pooling, "
                             f"head, max_length {made}, not {wanted}: prepare it again")

    @property
    def layer_head(self) -> tuple[int, int] | None:
        return parse_head(self.head) if self.head else None

    def running(self, precision: str, *, why: str, runtime: str | None = None,
                artefact: Artefact | None = None, measured: tuple[dict, ...] = (),
                probed: ProbedRows | None = None) -> EncoderPlan:
        """This plan in `precision` on `runtime` (default: the precision's, the registry's),
        with the artefact that runtime runs."""
        return dataclasses.replace(self, precision=precision,
                                   runtime=runtime or registry.default_runtime(precision),
                                   why=why, artefact=artefact, measured=tuple(measured),
                                   probed=probed)

    def record(self) -> dict[str, Any]:
        """The plan as a summary records it: the model, read-out, lengths, precision, runtime,
        why and what was measured, the artefact's record (no bytes)."""
        return {"model": self.model.name, "model_files": self.model.fingerprint,
                "pooling": self.pooling, "head": self.head, "max_length": self.max_length,
                "dimension": self.dimension, "device": self.device,
                "precision": self.precision, "runtime": self.runtime, "why": self.why,
                "measured": list(self.measured),
                "artefact": self.artefact.record() if self.artefact else None}


def model_plan(config: EncoderConfig, *, default_pooling: str = "last_avg",
               module: Any = None) -> EncoderPlan:
    """The model's part of the plan, in fp32 on torch: the model looked up and checked (a
    broken folder fails here, named), its facts read once; the read-out (`read_out`); the
    length asked for, else the model's own; a Ditto pooling's path (fast or eager, for the
    model's family). `module`: a model handed in (tests, the trainer's evaluator), whose width
    and family are the plan's."""
    model = located_model(config.model)
    model = checked_model(model)
    facts = model_facts(model)
    pooling, head = read_out(config.pooling, config.head, config.model, facts.pooling,
                             facts.head, default_pooling)
    handed = getattr(module, "config", None)  # a model handed in: its own width and family
    dimension = int(handed.hidden_size) if handed is not None else facts.dimension
    model_type = getattr(handed, "model_type", None) if handed is not None else facts.model_type
    return EncoderPlan(
        model=model, pooling=pooling, head=head,
        max_length=config.max_length or facts.max_length, model_max_length=facts.max_length,
        dimension=dimension, normalize=facts.normalize, own_pooling=facts.pooling,
        device=config.device, batch_size=config.batch_size,
        max_tokens_per_batch=config.max_tokens_per_batch,
        ditto_impl=decided_ditto_impl(pooling, config.ditto_impl, model_type))
