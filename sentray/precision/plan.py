"""`plan_encoder`: the one function that decides what an encoder will be, before any encoder
exists. It makes the model's part (`sentray.encode.plan.model_plan`: the model looked up, its
facts read once, the read-out and length decided), then the device, the precision and the
runtime that runs it (a registered one: `sentray.encode.runtimes`):

    fp32   exact: the vectors sentence-transformers' fp32 `encode` gives (the default), on the
           exact runtime measured fastest on this CPU (`--runtime auto`; their vectors within
           1e-5 of torch's), for a job large enough to pay for converting; else torch
    bf16   on a GPU: autocast; on a CPU: bf16 weights (warned about where the CPU emulates it),
           or OpenVINO's bf16
    fp16   GPU only (autocast); a CPU has no fast fp16 matmul
    int8   CPU only: NNCF static int8, on ONNX Runtime (default) or OpenVINO, its artefact
           prepared once and cached (`sentray.precision.artefacts`)
    auto   on a CPU, measured where the encoders will run (`sentray.precision.probe`: the
           fastest runtime x precision that passes its quality gate against fp32; a Ray
           cluster's node, in a Ray task, when the encoders run there); on a GPU, fp16

A job calls it once, in its driver, and hands the plan to every encoder it builds (its actors,
its query encoder): they never mix two precisions, and none of them probes or prepares.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentray.encode.config import EncoderConfig
from sentray.encode.plan import Artefact, EncoderPlan, model_plan
from sentray.encode.runtimes import registry
from sentray.kit.cpu import BF16_CPU_FLAGS, cpu_bf16_native, cpu_info
from sentray.precision import artefacts

if TYPE_CHECKING:
    from sentray.precision.probe import ProbeWatcher

logger = logging.getLogger(__name__)

# bf16 ÷ fp32 speed on a CPU that emulates bf16, measured on this project's AVX2-only machine
# (AMD EPYC, 2 cores; all-MiniLM-L6-v2, 500 Brown sentences, batch 32, one thread: sentray
# 11.5 vs 70.9 sentences/s, sentence-transformers 9.1 vs 60.4; bench/results/
# precision-avx2.json), said in the warning.
EMULATED_BF16_SPEED = 0.16
# A job of fewer rows is not measured (torch fp32): the probe encodes its 256 sentences twice
# per candidate, which such a job would not pay back (PAYBACK x that, in rows)
SMALL_JOB = 2048


@dataclass(frozen=True)
class Where:
    """Where a plan's encoders will run: in this process (the default), or in Ray actors of
    `cpus` CPUs and `gpus` GPUs each, on the cluster at `address` (None: the one this process
    is connected to, else a private one on this machine, which is measured here)."""

    threads: int | None = None  # each encoder's torch threads (None: this process's default)
    cpus: float | None = None  # a Ray actor's CPUs (None: not on Ray)
    gpus: float = 0.0
    address: str | None = None

    def on_cluster(self) -> bool:
        """Whether the encoders run on a Ray cluster's nodes, not on this machine."""
        connected = "ray" in sys.modules and sys.modules["ray"].is_initialized()
        return self.cpus is not None and bool(self.address or os.environ.get("RAY_ADDRESS")
                                              or connected)

    def run(self, fn, *args, **kwargs):
        """`fn(*args, **kwargs)` where the encoders run: in this process, or, when they run on
        a Ray cluster's nodes, in a Ray task with an actor's CPUs and GPUs on one of them (the
        probe measures that node's CPU; the code book is encoded by that node's GPU), through
        the job's own connection to the cluster, which its driver goes on to use."""
        if not self.on_cluster():
            return fn(*args, **kwargs)
        import ray

        from sentray.kit.ray_cluster import init_ray

        init_ray(self.address)
        task = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(_run_in_task)
        result, node = ray.get(task.remote(fn, args, kwargs))
        logger.info("%s ran in a Ray task on node %s (pid %d)", fn.__name__, *node)
        return result


HERE = Where()


@dataclass(frozen=True)
class Kept:
    """What an output's rows were made with. A rerun into it keeps it: `auto` takes the kept
    precision and runtime (for fp32, any exact runtime: the runtime is measured again), and the
    kept int8 artefact is reused when it is the one this config would make (the same weights,
    read-out and calibration). `exact`: the artefact is taken as it is (a query must be encoded
    by the very model its rows were)."""

    precision: str
    runtime: str | None = None  # None: the precision's default (an output made before runtimes)
    artefact: Artefact | None = None
    exact: bool = False


def plan_encoder(config: EncoderConfig, *, rows: int | None = None, where: Where = HERE,
                 kept: Kept | None = None, default_pooling: str = "last_avg", module=None,
                 tokenizer=None, corpus: Callable[[int], Sequence[str]] | None = None,
                 watcher: ProbeWatcher | None = None) -> EncoderPlan:
    """The plan of `config`'s encoder for a job of `rows` rows (None: unknown) whose encoders
    run `where`; `kept`: what the output's rows were made with; `module`/`tokenizer`: a model
    handed in (tests, the trainer), planned and probed as it is; `corpus(n)`: the texts of
    the job's first n rows, read only when the probe measures (it encodes them); `watcher`
    (`probe.ProbeWatcher`), where the probe runs in this process: told of its torch fp32
    encoder before it times anything (when it measures), then of the plan decided."""
    device = decide_device(config.device, where)
    plan = dataclasses.replace(model_plan(config, default_pooling=default_pooling,
                                          module=module), device=device)
    calibration = artefacts.Calibration(config.int8_calibration, config.int8_calibration_rows)
    precision, runtime, why = config.precision, config.runtime, "asked for"
    if (kept is not None and precision in ("auto", kept.precision)
            and (kept.precision != "fp32" or kept.exact)):
        precision, why = kept.precision, "as the output's rows were made"
        if runtime == "auto":
            runtime = kept.runtime or registry.default_runtime(precision)
    elif kept is not None and precision in ("auto", "fp32"):
        precision = "fp32"  # as the rows were made, on whichever exact runtime is fastest
    if precision == "auto" and device.startswith("cuda"):
        precision, runtime = "fp16", "torch"
        why = "auto: fp16 on a GPU (every CUDA GPU runs it fast)"
    elif runtime == "auto" and precision in ("auto", "fp32") and not device.startswith("cuda"):
        decided = measured(plan, calibration, rows, where, precision == "fp32", module,
                           tokenizer, corpus, watcher)
        if kept is not None and config.precision == "auto":  # a rerun into fp32 rows says so
            decided = dataclasses.replace(decided, why="auto, at fp32 as the output's rows were "
                                                       f"made: {decided.why}")
        return decided
    if runtime == "auto":
        runtime = registry.default_runtime(precision)
    check_precision(precision, device)
    registry.check_computes(runtime, plan.pooling)
    kind = registry.artefact_kind(runtime, precision)
    artefact = kept.artefact if kept is not None and kind == "onnx-int8" else None
    identity = artefacts.model_identity(plan, module)
    if kind is not None and (artefact is None or not (
            kept.exact or artefacts.made_for(artefact, plan, calibration, identity))):
        artefact = artefacts.prepare(kind, plan, calibration, module=module, tokenizer=tokenizer)
    return plan.running(precision, runtime=runtime, why=why, artefact=artefact)


def decide_device(device: str, where: Where) -> str:
    """The plan's device: a GPU pool's cuda; a CPU pool's cpu; in this process, the device
    asked for ("auto": cuda where torch sees a GPU)."""
    if where.gpus > 0:
        return device if device.startswith("cuda") else "cuda"
    if where.cpus is not None:
        if device.startswith("cuda"):
            raise ValueError(f"device {device!r} asked for, but the actors have no GPU: add "
                             "--num-gpus")
        return "cpu"
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def check_precision(precision: str, device: str, flags: frozenset[str] | None = None) -> None:
    """fp16 on a CPU and int8 on a GPU refused; bf16 on a CPU that emulates it warned about
    (it runs, at the measured cost); `flags`: the CPU's (default: this machine's)."""
    on_cpu = not device.startswith("cuda")
    if not on_cpu and precision == "int8":
        raise ValueError("precision 'int8' runs on a CPU (ONNX Runtime); on a GPU use fp16 "
                         "(every CUDA GPU) or bf16 (Ampere or later)")
    if on_cpu and precision == "fp16":
        raise ValueError("precision 'fp16' is for GPUs; on a CPU use bf16 (native with AMX or "
                         "AVX512-BF16) or fp32")
    if on_cpu and precision == "bf16" and not cpu_bf16_native(flags):
        logger.warning(
            "precision bf16 on %s, which has neither %s: bf16 is emulated there (on this "
            "project's AVX2-only AMD EPYC it ran at %.2fx fp32, docs/precision.md). "
            "--precision auto measures it on this CPU; fp32 is the safe choice.",
            cpu_info()["name"], " nor ".join(BF16_CPU_FLAGS), EMULATED_BF16_SPEED)


def measured(plan: EncoderPlan, calibration: artefacts.Calibration, rows: int | None,
             where: Where, exact: bool, module, tokenizer,
             corpus: Callable[[int], Sequence[str]] | None = None,
             watcher: ProbeWatcher | None = None) -> EncoderPlan:
    """`auto` on a CPU, or fp32's runtime (`exact`): decided by the probe where the encoders
    run (`Where.run`: a Ray task on a node of the cluster, with an actor's CPUs, when they run
    there), on their threads. A job too small to pay for the measurement (`SMALL_JOB` rows) is
    not measured: it takes the decision a larger job cached on this kind of machine, else torch
    fp32 (on a cluster, torch fp32: its nodes' decisions are not this machine's); so does a
    job of unknown size in fp32."""
    small = rows is not None and rows < SMALL_JOB
    if small and where.on_cluster():
        return plan.running("fp32", why=f"{'fp32' if exact else 'auto'}: a job of {rows} rows "
                            f"(under {SMALL_JOB}) costs less than measuring: torch fp32")
    from sentray.precision import probe

    watcher = None if where.on_cluster() else watcher  # in this process only
    decided = where.run(probe.decide, plan, calibration, rows=rows, threads=where.threads,
                        exact=exact, module=module, tokenizer=tokenizer, measure=not small,
                        corpus=None if small or corpus is None
                        else list(corpus(probe.PROBE_SAMPLE_ROWS)), watcher=watcher)
    if watcher is not None:
        watcher.decided(decided)
    if where.cpus is not None:  # its encoders are Ray actors: none of them is built here
        registry.drop_kept()
    return decided


def _run_in_task(fn, args, kwargs):
    import ray

    node = ray.get_runtime_context().get_node_id()[:12]
    return fn(*args, **kwargs), (node, os.getpid())
