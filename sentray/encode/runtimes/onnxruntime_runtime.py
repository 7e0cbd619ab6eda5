"""ONNX Runtime: the plan's artefact on its CPU provider, one stream, on the threads it is given.

    fp32  the exported graph (`onnx`: the pooled encoder as one graph, any pooling, Ditto's
          diagonal included; its vectors within 1e-5 of torch's)
    int8  NNCF's int8 model of that graph (`onnx-int8`): the default runtime of int8 (it ran
          faster than OpenVINO on the same file on this project's AVX2 EPYC,
          `sentray.precision.artefacts`)

Every pooling is computed right. Its side effects: none (it pins nothing at the threads it is
given). Package: onnxruntime, the `runtimes` extra."""

from __future__ import annotations

from sentray.encode.runtimes.graph_forward import GraphForward, default_threads
from sentray.encode.runtimes.runtime import Runtime


def session(graph: bytes, threads: int | None = None):
    """An ONNX graph on ONNX Runtime's CPU provider, on `threads` threads (default: torch's)."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError(RUNTIME.install_hint()) from exc
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = default_threads(threads)
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def graph_runner(graph: bytes, precision: str, threads: int | None = None):
    """A call from the graph's named inputs to its first output (ONNX Runtime takes no
    precision: the graph's own types run)."""
    compiled = session(graph, threads)
    return lambda feeds: compiled.run(None, feeds)[0]


def build_forward(plan, model=None, threads: int | None = None) -> GraphForward:
    return GraphForward(graph_runner(plan.artefact.data, plan.precision, threads))


RUNTIME = Runtime(name="onnxruntime", precisions={"fp32": "onnx", "int8": "onnx-int8"},
                  probed=("fp32", "int8"), package="onnxruntime", extra="runtimes",
                  build_forward=build_forward, graph_runner=graph_runner)
