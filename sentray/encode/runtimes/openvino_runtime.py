"""OpenVINO: the plan's artefact on OpenVINO's CPU plugin, read from the ONNX bytes directly (no
IR conversion), one stream, on the threads it is given, always at an explicit precision hint:

    fp32  the exported graph (`onnx`) at INFERENCE_PRECISION_HINT f32: OpenVINO's default on a
          CPU with AVX512-BF16 or AMX is bf16, vectors not fp32's
    bf16  the same graph at a bf16 hint (timed only where the plugin lists BF16 among its
          OPTIMIZATION_CAPABILITIES: elsewhere it runs f32, the fp32 candidate again)
    int8  NNCF's int8 model (`onnx-int8`), its unquantized operations at an f32 hint (at its
          default hint it ran at 0.54x its f32-hinted speed on this project's AMX Xeon)

The poolings it computes right: all but Ditto's. OpenVINO 2026.4 runs the exported Ditto graphs
wrong (the attention diagonal: components off by ~1, tests/precision/test_runtimes.py), so
`--runtime openvino` with a Ditto pooling is refused and the probe leaves it out for them.

The side effects it silences, each in every process that imports it:
- its telemetry (`silence_telemetry`, `import_openvino`), and NNCF's, which goes through the
  same package;
- its thread pinning (`PINNING`);
- its cache of kernels per input shape, held to `SHAPE_CACHE` entries.
Package: openvino, the `runtimes` extra."""

from __future__ import annotations

import logging
import sys

from sentray.encode.runtimes.graph_forward import GraphForward, default_threads
from sentray.encode.runtimes.runtime import Runtime

logger = logging.getLogger(__name__)

# INFERENCE_PRECISION_HINT per plan precision (see the module's docstring)
HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}

# The CPU plugin keeps what it built for each input shape, 5,000 entries by default: a search
# service's batches (1-32 queries of any length) grew its encoder by 1 GiB in 600 batches, still
# growing; at 100 it levels off after ~300 (737 -> 1,231 MiB), no slower (17.4 vs 17.3 ms of CPU
# a query; bench/results/query-memory-50k-mean-amd.json). The embedding job, whose batches run
# longest first, ran 5,000 rows at the same rate either way (by hand: 220-223/s, AMD EPYC).
SHAPE_CACHE = 100

# The CPU plugin pins its threads to cores on Linux by default, the same first cores in every
# process: a node's actors, each with its own encoder, all ran on the same cores. Two 1-thread
# processes on this project's 2-core AMD EPYC: 28.7 + 28.7 Brown sentences/s pinned, 57.7 + 58.1
# not; one 2-thread process 108.1 pinned, 106.4 not (bench/bench_pinning.py,
# bench/results/pinning-amd.json). ONNX Runtime and torch, at the threads they are given, pin
# nothing. So no process of ours pins.
PINNING = False

# OpenVINO's and NNCF's usage telemetry: `import openvino` imports its model converter
# (openvino.tools.ovc), which sends a usage event to Google Analytics through the
# openvino_telemetry package, and NNCF sends its own through the same package. Their consent is
# opt-out: off only under CI=true (or TF_BUILD, JENKINS_URL: other tools read those too) or
# with a consent file in the user's home (~/intel/openvino_telemetry), and the first event
# writes a client id there. Under strace the embed job's actors each looked the telemetry host
# up (a DNS connect, port 53). Both callers import it in a try and take an ImportError for
# "no telemetry" (OpenVINO's telemetry_stub, NNCF's stub): a None in sys.modules makes every
# import of the package in this process raise one, so nothing is sent and nothing written.
TELEMETRY_PACKAGE = "openvino_telemetry"


def silence_telemetry() -> None:
    """OpenVINO's and NNCF's telemetry off in this process: called before either is imported
    (`import_openvino`; the registry's `silence_side_effects` before NNCF)."""
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
    except ImportError as exc:
        raise ImportError(RUNTIME.install_hint()) from exc
    finally:
        if blocked and sys.modules.get(converter, 0) is None:
            del sys.modules[converter]  # importable later, by name, telemetry still off
    return openvino


def infer_request(graph: bytes, precision: str, threads: int | None = None):
    """An infer request of an ONNX graph compiled by the CPU plugin at `precision`'s hint, on
    `threads` threads (default: torch's), one stream, its threads not pinned to cores
    (PINNING), its cache of kernels made for each input shape held to SHAPE_CACHE entries."""
    core = import_openvino().Core()
    return core.compile_model(core.read_model(graph), "CPU", {
        "INFERENCE_PRECISION_HINT": HINTS[precision],
        "INFERENCE_NUM_THREADS": default_threads(threads), "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": PINNING,
        "CPU_RUNTIME_CACHE_CAPACITY": SHAPE_CACHE}).create_infer_request()


def graph_runner(graph: bytes, precision: str, threads: int | None = None):
    """A call from the graph's named inputs to its first output."""
    request = infer_request(graph, precision, threads)
    return lambda feeds: request.infer(feeds)[0]


def build_forward(plan, model=None, threads: int | None = None) -> GraphForward:
    return GraphForward(graph_runner(plan.artefact.data, plan.precision, threads))


def runs_as_itself(precision: str) -> bool:
    """bf16: whether the CPU plugin lists BF16 among its optimization capabilities."""
    if precision != "bf16":
        return True
    return "BF16" in import_openvino().Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def computes(pooling: str) -> bool:
    return not pooling.startswith("ditto")


RUNTIME = Runtime(name="openvino", precisions={"fp32": "onnx", "bf16": "onnx",
                                               "int8": "onnx-int8"},
                  probed=("fp32", "bf16", "int8"), package="openvino", extra="runtimes",
                  build_forward=build_forward, computes=computes, runs_as_itself=runs_as_itself,
                  graph_runner=graph_runner, silence=silence_telemetry,
                  wrong_poolings="OpenVINO 2026.4 computes the exported Ditto graphs wrong")
