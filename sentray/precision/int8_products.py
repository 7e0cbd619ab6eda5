"""Whether an int8 model can pay on this CPU, measured before one is made.

An int8 model of the encoder (NNCF's, `artefacts.quantize`) runs its matrix products in int8 and
the rest in fp32. Making one costs about 12 x its calibration rows' fp32 time (the probe
estimated 45-57 s for all-MiniLM-L6-v2 on this project's 2-core AVX2 EPYC). Where the CPU's
int8 products are no faster than its fp32 ones (no int8 dot-product instructions: on that EPYC
the int8 models ran at 0.26-0.75x OpenVINO fp32's rate, docs/benchmarks.md), that cost buys
nothing.

So before making one the probe times the model's largest matrix product (its own weight, from
the fp32 ONNX graph; a batch of the job's tokens) in fp32 and in int8, as an int8 model runs it
(activations quantized per tensor to uint8, weights per output channel to int8 (7 bits): a
QuantizeLinear/DequantizeLinear pair on each side, which both runtimes turn into an int8
product), on each runtime that would run the int8 model, each for a few hundredths of a second.
The runtime's measured fp32 rate x that speed-up bounds its int8 model's rate from above (the
products are most of the model's work; the rest stays fp32): the model is made only when a
bound reaches the probe's margin over the best rate measured. Flags are not read: they do not
predict speed.
"""

from __future__ import annotations

import time

import numpy as np

TIMED_SECONDS = 0.1  # per graph, after two untimed calls
MIN_CALLS = 3


def largest_product_weight(graph: bytes) -> np.ndarray:
    """The largest 2-D weight a MatMul or Gemm of the ONNX `graph` multiplies by (fp32)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(graph)
    multiplied = {name for node in model.graph.node if node.op_type in ("MatMul", "Gemm")
                  for name in node.input}
    weights = [w for w in model.graph.initializer if len(w.dims) == 2 and w.name in multiplied]
    if not weights:
        raise ValueError("the ONNX graph has no matrix product by a weight")
    largest = max(weights, key=lambda w: w.dims[0] * w.dims[1])
    return numpy_helper.to_array(largest).astype(np.float32)


def product_graph(weight: np.ndarray, int8: bool, activation_scale: float) -> bytes:
    """x (tokens, rows) @ weight (rows, columns) as an ONNX graph: in fp32, or in int8 as an
    int8 model's QDQ product."""
    from onnx import TensorProto, helper, numpy_helper

    rows, columns = weight.shape
    if int8:
        # per output channel, in 7 bits (as NNCF's overflow fix): an AVX2 u8 x s8 product
        # sums pairs in 16 bits, which full-range int8 weights can overflow
        scales = np.maximum(np.abs(weight).max(axis=0), 1e-12) / 63
        initializers = [
            numpy_helper.from_array(np.clip(np.round(weight / scales), -63, 63)
                                    .astype(np.int8), "w_q"),
            numpy_helper.from_array(scales.astype(np.float32), "w_scale"),
            numpy_helper.from_array(np.zeros(columns, np.int8), "w_zero"),
            numpy_helper.from_array(np.array(activation_scale, np.float32), "x_scale"),
            numpy_helper.from_array(np.array(128, np.uint8), "x_zero")]
        nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"]),
                 helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_d"]),
                 helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w_d"],
                                  axis=1),
                 helper.make_node("MatMul", ["x_d", "w_d"], ["y"])]
    else:
        initializers = [numpy_helper.from_array(weight, "w")]
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "product", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["tokens", rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["tokens", columns])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def seconds_per_call(runtime: str, graph: bytes, x: np.ndarray, threads: int) -> float:
    """The median seconds of one call of `graph` on `runtime` at steady state."""
    from sentray.encode.runtimes import registry

    run = registry.graph_runner(runtime, graph, "fp32", threads)  # fp32: int8 where quantized

    def call():
        run({"x": x})

    call(), call()
    times, started = [], time.perf_counter()
    while len(times) < MIN_CALLS or time.perf_counter() - started < TIMED_SECONDS:
        before = time.perf_counter()
        call()
        times.append(time.perf_counter() - before)
    return float(np.median(times))


def int8_speedups(graph: bytes, runtimes: list[str], tokens: int,
                  threads: int) -> dict[str, float]:
    """fp32 seconds / int8 seconds of the fp32 ONNX `graph`'s largest product on each runtime,
    on a batch of `tokens` tokens."""
    weight = largest_product_weight(graph)
    x = np.random.default_rng(0).standard_normal((tokens, weight.shape[0])).astype(np.float32)
    scale = float(np.abs(x).max()) / 127
    fp32, int8 = product_graph(weight, False, scale), product_graph(weight, True, scale)
    return {runtime: seconds_per_call(runtime, fp32, x, threads)
            / seconds_per_call(runtime, int8, x, threads) for runtime in runtimes}


def int8_can_pay(note: str, graph: bytes, fp32_rates: dict[str, float], best: float,
                 margin: float, tokens: int, threads: int) -> tuple[bool, str]:
    """(whether an int8 model may beat `best` sentences/s by `margin` on a runtime of
    `fp32_rates` (each one's fp32 rate measured; none: not judged, yes), `note` with why)."""
    if not fp32_rates:
        return True, note
    speedups = int8_speedups(graph, sorted(fp32_rates), tokens, threads)
    bound = max(fp32_rates[runtime] * speedup for runtime, speedup in speedups.items())
    told = ", ".join(f"{speedup:.2f}x on {runtime}" for runtime, speedup in speedups.items())
    if bound >= margin * best:
        return True, f"{note} (int8 products measured {told} fp32's)"
    return False, (f"onnx-int8 not made: int8 matrix products measured {told} fp32's on this "
                   f"CPU, so an int8 model would run at most {bound:.0f}/s, under {margin:g} x "
                   f"the best rate measured ({best:.0f}/s)")
