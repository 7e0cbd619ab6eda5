"""The runtimes a plan runs on, each the same call: padded (B, T) ids and mask -> (B, D) fp32
sentence embeddings.

    torch        the `PooledEncoder` on the plan's device: fp32; bf16 weights on a CPU (as
                 sentence-transformers' `model_kwargs={"torch_dtype": torch.bfloat16}`: faster
                 there than autocast, which converts every weight on every call); fp16 and bf16
                 autocast on a GPU; the pooling in fp32 either way
    onnxruntime  the plan's artefact (the pooled encoder as one ONNX graph, any pooling, Ditto's
                 diagonal included; or that graph quantized to int8) on ONNX Runtime's CPU
                 provider
    openvino     the same artefact on OpenVINO's CPU plugin, at an explicit precision hint: f32
                 for fp32 and for int8's unquantized operations (OpenVINO's default on a CPU
                 with AVX512-BF16 or AMX is bf16: vectors not fp32's, and its int8 ran at 0.54x
                 its f32-hinted speed on this project's AMX Xeon), bf16 for bf16

`build_forward(plan)` builds the one the plan names; it decides nothing. Each runs on `threads`
threads (default: torch's), one stream: a job's parallelism is its actors.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import numpy as np
import torch

from sentray.encode.plan import INSTALL_HINT, EncoderPlan
from sentray.encode.pooled_model import PooledEncoder

logger = logging.getLogger(__name__)

AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}


def torch_device(device: str) -> torch.device:
    """The plan's device in this process (auto: cuda where torch sees a GPU, else cpu)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    return resolved


class TorchForward:
    """The plan's `PooledEncoder` (loaded, or around a model handed in) on its device."""

    def __init__(self, plan: EncoderPlan, device: torch.device,
                 model: torch.nn.Module | None = None) -> None:
        if model is None:
            pooled = PooledEncoder.load(plan.model, plan.pooling, head=plan.head,
                                        ditto_impl=plan.ditto_impl, device=device)
        else:
            pooled = PooledEncoder(model, plan.pooling, head=plan.head,
                                   ditto_impl=plan.ditto_impl)
        self.pooled = pooled.to(device).eval()
        self.device = device
        if device.type == "cpu" and plan.precision == "bf16":
            self.pooled.to(torch.bfloat16)  # bf16 weights (see the module's docstring)
        self.dtype = AUTOCAST.get(plan.precision) if device.type == "cuda" else None

    def autocast(self):
        if self.dtype is not None:
            return torch.autocast("cuda", dtype=self.dtype)
        return torch.autocast(self.device.type, enabled=False)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            return self.pooled(input_ids.to(self.device), attention_mask.to(self.device))


def runtime_module(runtime: str):
    """The runtime's Python package, imported (ImportError with the install line if absent);
    OpenVINO's with its telemetry off (`silence_telemetry`) and without its model converter."""
    try:
        if runtime == "onnxruntime":
            import onnxruntime as module
        else:
            module = import_openvino()
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return module


# OpenVINO's and NNCF's usage telemetry: `import openvino` imports its model converter
# (openvino.tools.ovc), which sends a usage event to Google Analytics through the
# openvino_telemetry package, and NNCF sends its own through the same package. Their consent is
# opt-out: off only under CI=true (or TF_BUILD, JENKINS_URL: other tools read those too) or
# with a consent file in the user's home (~/intel/openvino_telemetry), and the first event
# writes a client id there. Under strace the embed job's actors each looked the telemetry host
# up (two DNS connects, port 53). Both callers import it in a try and take an ImportError for
# "no telemetry" (OpenVINO's telemetry_stub, NNCF's stub): a None in sys.modules makes every
# import of the package in this process raise one, so nothing is sent and nothing written.
TELEMETRY_PACKAGE = "openvino_telemetry"


def silence_telemetry() -> None:
    """OpenVINO's and NNCF's telemetry off in this process: called before either is imported
    (`import_openvino`, `sentray.precision.artefacts.quantize`)."""
    if sys.modules.get(TELEMETRY_PACKAGE, None) is not None:
        logger.warning("%s was imported before sentray could turn it off: OpenVINO and NNCF "
                       "may send usage events from this process", TELEMETRY_PACKAGE)
        return
    sys.modules[TELEMETRY_PACKAGE] = None


def import_openvino():
    """The openvino package, its telemetry off. Its model converter (openvino.tools.ovc, which
    its __init__ imports when it can, and which sends the telemetry) is left out of the import:
    sentray reads ONNX graphs with `Core.read_model` and converts nothing."""
    silence_telemetry()
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    converter = "openvino.tools.ovc"
    blocked = converter not in sys.modules
    if blocked:
        sys.modules[converter] = None
    try:
        import openvino
    finally:
        if blocked and sys.modules.get(converter, 0) is None:
            del sys.modules[converter]  # importable later, by name, telemetry still off
    return openvino


# OpenVINO's INFERENCE_PRECISION_HINT per plan precision (see the module's docstring)
OPENVINO_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}


def onnxruntime_session(graph: bytes, threads: int | None = None):
    """An ONNX graph on ONNX Runtime's CPU provider, on `threads` threads (default: torch's)."""
    onnxruntime = runtime_module("onnxruntime")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


# The CPU plugin keeps what it built for each input shape, 5,000 entries by default: a search
# service's batches (1-32 queries of any length) grew its encoder by 1 GiB in 600 batches, still
# growing; at 100 it levels off after ~300 (737 -> 1,231 MiB), no slower (17.4 vs 17.3 ms of CPU
# a query; bench/results/query-memory-50k-mean-amd.json). The embedding job, whose batches run
# longest first, ran 5,000 rows at the same rate either way (by hand: 220-223/s, AMD EPYC).
OPENVINO_SHAPE_CACHE = 100

# The CPU plugin pins its threads to cores on Linux by default, the same first cores in every
# process: a node's actors, each with its own encoder, all ran on the same cores. Two 1-thread
# processes on this project's 2-core AMD EPYC: 28.7 + 28.7 Brown sentences/s pinned, 57.7 + 58.1
# not; one 2-thread process 108.1 pinned, 106.4 not (bench/bench_pinning.py,
# bench/results/pinning-amd.json). ONNX Runtime and torch, at the threads they are given, pin
# nothing. So no process of ours pins.
OPENVINO_PINNING = False


def openvino_request(graph: bytes, precision: str, threads: int | None = None):
    """An infer request of an ONNX graph compiled by OpenVINO's CPU plugin at `precision`'s
    hint, on `threads` threads (default: torch's), one stream, its threads not pinned to cores
    (OPENVINO_PINNING), its cache of kernels made for each input shape held to
    OPENVINO_SHAPE_CACHE entries."""
    openvino = runtime_module("openvino")
    core = openvino.Core()
    return core.compile_model(core.read_model(graph), "CPU", {
        "INFERENCE_PRECISION_HINT": OPENVINO_HINTS[precision],
        "INFERENCE_NUM_THREADS": threads or torch.get_num_threads(), "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": OPENVINO_PINNING,
        "CPU_RUNTIME_CACHE_CAPACITY": OPENVINO_SHAPE_CACHE}).create_infer_request()


class OnnxRuntimeForward:
    """The plan's artefact on ONNX Runtime (CPU): not differentiable."""

    def __init__(self, plan: EncoderPlan, threads: int | None = None) -> None:
        self.session = onnxruntime_session(plan.artefact.data, threads)
        self.pooled = None  # no torch model
        self.device = torch.device("cpu")

    def autocast(self):
        return contextlib.nullcontext()

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pooled = self.session.run(None, {"input_ids": input_ids.cpu().numpy(),
                                         "attention_mask": attention_mask.cpu().numpy()})[0]
        return torch.from_numpy(np.ascontiguousarray(pooled, dtype=np.float32))  # (B, D)


class OpenVINOForward:
    """The plan's artefact on OpenVINO (CPU), compiled at the plan's precision hint."""

    def __init__(self, plan: EncoderPlan, threads: int | None = None) -> None:
        self.request = openvino_request(plan.artefact.data, plan.precision, threads)
        self.pooled = None  # no torch model
        self.device = torch.device("cpu")

    def autocast(self):
        return contextlib.nullcontext()

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pooled = self.request.infer({"input_ids": input_ids.cpu().numpy(),
                                     "attention_mask": attention_mask.cpu().numpy()})[0]
        return torch.from_numpy(np.array(pooled, dtype=np.float32))  # (B, D), a copy


FORWARDS = {"onnxruntime": OnnxRuntimeForward, "openvino": OpenVINOForward}


def build_forward(plan: EncoderPlan, model: torch.nn.Module | None = None):
    """The forward pass of `plan` on its runtime (`model`: a module handed in, torch only)."""
    if plan.runtime == "torch":
        return TorchForward(plan, torch_device(plan.device), model)
    return FORWARDS[plan.runtime](plan)
