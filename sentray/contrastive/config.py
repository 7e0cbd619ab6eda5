"""`TrainConfig`: one SIFTER-SimCSE or unsupervised SimCSE training run, validated on
construction (before any cluster resource is requested); `resolved()` takes the objective's
paper settings and the run's name, `as_planned(plan)` the read-out the encoder's plan decided."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from sentray.contrastive.objectives import (
    PAPER_SETTINGS,
    Objective,
    SifterWeights,
    objective_views,
)
from sentray.encode.config import DittoImpl, EncoderConfig, Precision, Runtime
from sentray.encode.plan import EncoderPlan
from sentray.kit.validation import check_at_least, check_choices
from sentray.training.cluster import ClusterConfig

# The train-time MLP's initial weights: simcse, SimCSE's (its cl_init runs BERT's _init_weights:
# weights ~ N(0, the encoder's initializer_range, 0.02 for BERT/RoBERTa/MPNet), zero bias);
# torch, PyTorch's default nn.Linear initialisation (every run before the flag existed).
MlpInit = Literal["simcse", "torch"]


@dataclass(frozen=True)
class TrainEncoderConfig(EncoderConfig):
    """The encoder a run trains and scores STS-B dev with: an `EncoderConfig` (its model
    lookup, pooling and head checks are the encoder's own), with the trainer's defaults and
    only the flags training uses; `batch_size` is `--eval-batch-size` (the trainer's
    `--batch-size` is its global batch)."""

    # The sentence embedding (see sentray.encode.pooling_catalog). None: the model's own read-out
    # (a sentence-transformers model's 1_Pooling, a sentray export's sentray.json), else the
    # paper's [CLS] (a raw encoder such as bert-base-uncased).
    pooling: str | None = None
    max_length: int = 32  # training truncation in tokens (SimCSE's default)
    # sentences per forward pass when scoring STS-B dev
    batch_size: Annotated[int, tyro.conf.arg(name="eval_batch_size")] = 64
    max_tokens_per_batch: Annotated[int | None, tyro.conf.Suppress] = None
    device: Annotated[str, tyro.conf.Suppress] = "auto"
    # autocast dtype: fp16 or bf16 on GPU; bf16 on CPU (native with AMX or AVX512-BF16)
    precision: Precision = "fp32"
    runtime: Annotated[Runtime, tyro.conf.Suppress] = "torch"  # training runs on torch
    int8_calibration: Annotated[str | None, tyro.conf.Suppress] = None
    int8_calibration_rows: Annotated[int, tyro.conf.Suppress] = 300
    ditto_impl: Annotated[DittoImpl, tyro.conf.Suppress] = "auto"

    def __post_init__(self) -> None:
        if self.precision in ("auto", "int8"):
            raise ValueError(f"precision {self.precision!r} is for encoding; for training "
                             "choose fp16, bf16 or fp32")
        super().__post_init__()


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults are the objective's own paper's: SIFTER's for sifter (after
    ESimCSE/SimCSE), SimCSE's for simcse; dropout and lr, where the two differ, are decided by
    `resolved()` from the objective (`PAPER_SETTINGS`) unless given."""

    input: str = "out/augmented"  # jobs/augment.py's output folder, local or s3://
    output: str = "out/train"  # runs, checkpoints and OUTPUT/best, OUTPUT/best-st (or s3://)
    name: str | None = None  # run name under OUTPUT; rerunning a name resumes (default: objective)
    # the initial encoder (model, pooling, head, max length, precision, eval batch); its model
    # is looked up once (`resolved()`) and carried to the workers, the loaders and the export
    encoder: TrainEncoderConfig = field(default_factory=TrainEncoderConfig)
    # sifter: X-Y, X-Z, Y-Z InfoNCE; simcse: X under two dropout masks
    objective: Objective = "sifter"
    # MLP (Linear + Tanh) over the pooling at train time only, dropped at export, as SimCSE.
    # auto: on, unless the pooling is the model's own read-out, which is trained as it is.
    mlp: bool | None = None
    mlp_init: MlpInit = "simcse"  # the MLP's initial weights: SimCSE's, or PyTorch's default
    # the encoder's dropout while training (default: the objective's paper's: sifter 0.15,
    # simcse 0.1)
    dropout: float | None = None
    temperature: float = 0.05  # InfoNCE temperature tau
    # SIFTER weights of X-Y, X-Z, Y-Z and optionally a 4th of SimCSE's X-X' dropout pair; the
    # views of zero-weight pairs are not encoded
    lambdas: SifterWeights = SifterWeights()
    batch_size: int = 64  # global batch, split evenly over the workers
    # AdamW learning rate (default: the objective's paper's: sifter 1e-5, simcse 3e-5)
    lr: float | None = None
    weight_decay: float = 0.0  # AdamW weight decay (not on biases and LayerNorm weights)
    warmup_ratio: float = 0.0  # share of the run's steps with a linear lr warm-up from 0
    # clip the gradient's global norm (SimCSE, sentence-transformers); 0 or None: no clipping
    max_grad_norm: float | None = 1.0
    epochs: int = 1  # passes over the input
    # Cap on optimizer steps. The run is then max_steps long and so is its schedule: warm-up and
    # linear decay to 0 at the run's last step (Hugging Face Trainer's max_steps rule).
    max_steps: int | None = None
    eval_steps: int = 125  # score STS-B dev (rank 0), report and checkpoint every N steps
    seed: int = 42  # epoch order, dropout masks and the MLP's initial weights
    data_dir: str | None = None  # SentEval folder for STS-B dev (default: $SENTRAY_DATA_DIR)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)  # the workers and their cluster
    keep_checkpoints: int = 1  # best checkpoints by STS-B dev kept besides the latest
    log_steps: int = 10  # one log line every N steps
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL)
    fail_at_step: int | None = None  # fault drill: the last worker dies once at this step
    # delete the run OUTPUT/NAME and the exports first, and start afresh; without it a rerun
    # whose settings would change the model stops and says which
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_choices(self)
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_grad_norm == 0:  # 0, as in the Hugging Face Trainer: no clipping
            object.__setattr__(self, "max_grad_norm", None)
        if self.max_grad_norm is not None and self.max_grad_norm < 0:
            raise ValueError(f"max_grad_norm must be > 0 (or None: no clipping), got "
                             f"{self.max_grad_norm}")
        workers = self.cluster.workers
        check_at_least(1, batch_size=self.batch_size, epochs=self.epochs,
                       eval_steps=self.eval_steps, workers=workers,
                       eval_batch_size=self.encoder.batch_size, log_steps=self.log_steps,
                       keep_checkpoints=self.keep_checkpoints, max_steps=self.max_steps)
        if self.batch_size % workers:
            raise ValueError(f"the global batch size {self.batch_size} must be divisible by the "
                             f"number of workers {workers}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.temperature <= 0 or (self.lr is not None and self.lr <= 0) \
                or self.weight_decay < 0:
            raise ValueError("temperature and lr must be > 0 and weight_decay >= 0, got "
                             f"{self.temperature}, {self.lr}, {self.weight_decay}")
        if self.encoder.precision == "fp16" and not self.cluster.use_gpu:
            raise ValueError("precision 'fp16' is for GPU training (--use-gpu); on a CPU use "
                             "bf16 (autocast; native with AMX or AVX512-BF16) or fp32")
        if self.name is not None and (not self.name or "/" in self.name):
            raise ValueError(f"run name must be a non-empty folder name, got {self.name!r}")

    def resolved(self) -> TrainConfig:
        """This config with the objective's paper settings and the run's name: dropout and lr,
        when not given, are the objective's paper's (`PAPER_SETTINGS`: SIFTER 0.15 and 1e-5,
        SimCSE 0.1 and 3e-5); the CPUs per worker (`default_cpus`); the name defaults to the
        objective. What depends on the model is the plan's (`as_planned`)."""
        paper = PAPER_SETTINGS[self.objective]
        cluster = self.cluster
        if cluster.cpus_per_worker is None:
            cluster = dataclasses.replace(cluster, cpus_per_worker=default_cpus(cluster))
        return dataclasses.replace(
            self, cluster=cluster,
            dropout=paper.dropout if self.dropout is None else self.dropout,
            lr=paper.lr if self.lr is None else self.lr, name=self.name or self.objective)

    def as_planned(self, plan: EncoderPlan) -> TrainConfig:
        """The flags that repeat this run, as its records keep them: the read-out the encoder's
        plan decided (the one asked for, else the model's own, else [CLS]: `plan_encoder` with
        the trainer's default) and the MLP, when not given, on unless the pooling is the
        model's own read-out (training a new read-out on a sentence model trained for another
        throws its training away; [CLS] + MLP is SimCSE's and the paper's setting for a raw
        encoder)."""
        mlp = self.mlp if self.mlp is not None else plan.pooling != plan.own_pooling
        return dataclasses.replace(self, mlp=mlp, encoder=dataclasses.replace(
            self.encoder, pooling=plan.pooling, head=plan.head))

    @property
    def views(self) -> int:
        """Views encoded per sentence and step."""
        return len(objective_views(self.objective, self.lambdas))

    @property
    def local_batch_size(self) -> int:
        return self.batch_size // self.cluster.workers


def default_cpus(cluster: ClusterConfig) -> float:
    """CPUs per worker when not given: the machine's CPUs shared by the workers where the job
    starts its own cluster for CPU training, else 1 (a cluster's nodes are not this machine)."""
    if cluster.use_gpu or cluster.address or os.environ.get("RAY_ADDRESS"):
        return 1.0
    return float(max(1, (os.cpu_count() or 1) // cluster.workers))

