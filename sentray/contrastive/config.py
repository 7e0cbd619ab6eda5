"""`TrainConfig`: one SIFTER-SimCSE or unsupervised SimCSE training run, validated on
construction (before any cluster resource is requested); `resolved()` decides what depends on
the model (its read-out) and the run's name."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from sentray.contrastive.objectives import (
    PAPER_SETTINGS,
    Objective,
    SifterWeights,
    objective_views,
)
from sentray.encode.config import EncoderConfig, Precision
from sentray.encode.model_loading import DEFAULT_MODEL, ResolvedModel, resolve_model
from sentray.encode.pooling_catalog import DITTO_POOLINGS, canonical_pooling
from sentray.kit.config_files import derived
from sentray.kit.validation import check_choices

# The train-time MLP's initial weights: simcse, SimCSE's (its cl_init runs BERT's _init_weights:
# weights ~ N(0, the encoder's initializer_range, 0.02 for BERT/RoBERTa/MPNet), zero bias);
# torch, PyTorch's default nn.Linear initialisation (every run before the flag existed).
MlpInit = Literal["simcse", "torch"]


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults are the objective's own paper's: SIFTER's for sifter (after
    ESimCSE/SimCSE), SimCSE's for simcse; dropout and lr, where the two differ, are decided by
    `resolved()` from the objective (`PAPER_SETTINGS`) unless given."""

    input: str = "out/augmented"  # jobs/augment.py's output folder, local or s3://
    output: str = "out/train"  # runs, checkpoints and OUTPUT/best, OUTPUT/best-st (or s3://)
    name: str | None = None  # run name under OUTPUT; rerunning a name resumes (default: objective)
    model: str = DEFAULT_MODEL  # initial encoder: HF id, local dir or packaged name
    # sifter: X-Y, X-Z, Y-Z InfoNCE; simcse: X under two dropout masks
    objective: Objective = "sifter"
    # The sentence embedding (see sentray.encode.pooling_catalog). None: the model's own read-out (a
    # sentence-transformers model's 1_Pooling, a sentray export's sentray.json), else the paper's
    # [CLS] (a raw encoder such as bert-base-uncased).
    pooling: str | None = None
    head: str | None = None  # Ditto head L-H, for the Ditto poolings (default: the model's known one)
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
    max_length: int = 32  # training truncation in tokens (SimCSE's default)
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
    eval_batch_size: int = 64  # sentences per forward pass when scoring STS-B dev
    seed: int = 42  # epoch order, dropout masks and the MLP's initial weights
    data_dir: str | None = None  # SentEval folder for STS-B dev (default: $SENTRAY_DATA_DIR)
    workers: int = 1  # DDP workers
    use_gpu: bool = False  # one GPU per worker
    # CPUs per worker, also its torch threads on CPU. Default: on a cluster the job starts itself
    # (no address), CPU training, this machine's CPUs shared by the workers (one worker of 1
    # leaves a 2-core machine half idle: docs/results.md's default run, 6,797 s); else 1
    cpus_per_worker: float | None = None
    # autocast dtype: fp16 or bf16 on GPU; bf16 on CPU (native with AMX or AVX512-BF16)
    precision: Precision = "fp32"
    max_failures: int = 3  # worker-group restarts from the last checkpoint before giving up
    keep_checkpoints: int = 1  # best checkpoints by STS-B dev kept besides the latest
    log_steps: int = 10  # one log line every N steps
    address: str | None = None  # Ray cluster (default: $RAY_ADDRESS, else a local one on 127.0.0.1)
    num_cpus: int | None = None  # logical CPUs of a local cluster (default: workers x cpus + 2)
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL)
    fail_at_step: int | None = None  # fault drill: the last worker dies once at this step
    # delete the run OUTPUT/NAME and the exports first, and start afresh; without it a rerun
    # whose settings would change the model stops and says which
    overwrite: bool = False
    # `model` looked up once (`resolved()`), carried to the workers, the loaders and the export
    resolved_model: Annotated[ResolvedModel | None, tyro.conf.Suppress] = derived()

    def __post_init__(self) -> None:
        check_choices(self)
        if self.resolved_model is not None and self.resolved_model.name != self.model:
            # replace(config, model=...) of a resolved config: the new model, looked up
            object.__setattr__(self, "resolved_model", resolve_model(self.model))
        if self.pooling is not None:
            object.__setattr__(self, "pooling", canonical_pooling(self.pooling))
            if self.head is not None and self.pooling not in DITTO_POOLINGS:
                raise ValueError(f"head is only used by the Ditto poolings, not {self.pooling!r}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_grad_norm == 0:  # 0, as in the Hugging Face Trainer: no clipping
            object.__setattr__(self, "max_grad_norm", None)
        if self.max_grad_norm is not None and self.max_grad_norm < 0:
            raise ValueError(f"max_grad_norm must be > 0 (or None: no clipping), got "
                             f"{self.max_grad_norm}")
        positive = {"batch_size": self.batch_size, "epochs": self.epochs,
                    "eval_steps": self.eval_steps, "workers": self.workers,
                    "eval_batch_size": self.eval_batch_size, "log_steps": self.log_steps,
                    "max_length": self.max_length - 1, "keep_checkpoints": self.keep_checkpoints}
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be >= {1 + (name == 'max_length')}, got "
                                 f"{getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.batch_size % self.workers:
            raise ValueError(f"the global batch size {self.batch_size} must be divisible by the "
                             f"number of workers {self.workers}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.temperature <= 0 or (self.lr is not None and self.lr <= 0) \
                or self.weight_decay < 0:
            raise ValueError("temperature and lr must be > 0 and weight_decay >= 0, got "
                             f"{self.temperature}, {self.lr}, {self.weight_decay}")
        if self.precision in ("auto", "int8"):
            raise ValueError(f"precision {self.precision!r} is for encoding; for training "
                             "choose fp16, bf16 or fp32")
        if self.precision == "fp16" and not self.use_gpu:
            raise ValueError("precision 'fp16' is for GPU training (--use-gpu); on a CPU use "
                             "bf16 (autocast; native with AMX or AVX512-BF16) or fp32")
        if (self.cpus_per_worker is not None and self.cpus_per_worker <= 0) \
                or self.max_failures < 0:
            raise ValueError("cpus_per_worker must be > 0 and max_failures >= 0")
        if self.name is not None and (not self.name or "/" in self.name):
            raise ValueError(f"run name must be a non-empty folder name, got {self.name!r}")

    def resolved(self) -> TrainConfig:
        """This config with the objective's paper settings, the read-out and the run name
        decided: dropout and lr, when not given, are the objective's paper's
        (`PAPER_SETTINGS`: SIFTER 0.15 and 1e-5, SimCSE 0.1 and 3e-5); pooling and mlp, when not
        given, are the model's own read-out without an MLP (training a new read-out on a
        sentence model trained for another throws its training away), else [CLS] + the
        train-time MLP (SimCSE's and the paper's setting for a raw encoder); a Ditto pooling
        without a head takes the model's known one (ValueError without one); the name
        defaults to the objective."""
        from sentray.encode.model_checks import located_model
        from sentray.encode.model_info import own_pooling

        # the model looked up once, here, and checked: a broken folder fails before any worker
        model = self.resolved_model or located_model(self.model)
        paper = PAPER_SETTINGS[self.objective]
        config = dataclasses.replace(
            self, dropout=paper.dropout if self.dropout is None else self.dropout,
            lr=paper.lr if self.lr is None else self.lr, resolved_model=model)
        own = None
        if config.pooling is None or config.mlp is None:
            own = own_pooling(model)
        if config.pooling is None:
            pooling, head = own or ("cls_before_pooler", None)
            config = dataclasses.replace(config, pooling=pooling, head=config.head or head)
        if config.mlp is None:
            is_own = own is not None and canonical_pooling(own[0]) == config.pooling
            config = dataclasses.replace(config, mlp=not is_own)
        if config.pooling in DITTO_POOLINGS:  # the model's known head, or an error asking for one
            config = dataclasses.replace(config, head=EncoderConfig(
                model=config.model, pooling=config.pooling, head=config.head,
                resolved_model=model).resolved().head)
        return dataclasses.replace(config, name=config.name or config.objective,
                                   cpus_per_worker=config.cpus_per_worker or default_cpus(config))

    @property
    def views(self) -> int:
        """Views encoded per sentence and step."""
        return len(objective_views(self.objective, self.lambdas))

    @property
    def local_batch_size(self) -> int:
        return self.batch_size // self.workers


def default_cpus(config: TrainConfig) -> float:
    """CPUs per worker when not given: the machine's CPUs shared by the workers where the job
    starts its own cluster for CPU training, else 1 (a cluster's nodes are not this machine)."""
    if config.use_gpu or config.address or os.environ.get("RAY_ADDRESS"):
        return 1.0
    return float(max(1, (os.cpu_count() or 1) // config.workers))

