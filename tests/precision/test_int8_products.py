"""The int8 products check (`sentray.precision.int8_products`): the product graphs against
numpy's product (a naive reference), the weight found in an exported encoder, and the probe
making no int8 model where the products say it cannot win, on any CPU (the speed-ups are
replaced where a test needs one answer)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tiny_bert

from sentray.encode.config import EncoderConfig
from sentray.precision import artefacts, int8_products
from sentray.precision import probe as probe_module
from sentray.precision.plan import plan_encoder


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_the_product_graphs_compute_the_product_in_fp32_and_in_int8(runtime):
    from sentray.encode.runtimes import registry

    rng = np.random.default_rng(1)
    weight = rng.standard_normal((64, 96)).astype(np.float32) / 8
    x = rng.standard_normal((40, 64)).astype(np.float32)
    expected = x @ weight
    scale = float(np.abs(x).max()) / 127
    for int8, tolerance in ((False, 1e-4), (True, 0.05)):
        graph = int8_products.product_graph(weight, int8, scale)
        y = registry.graph_runner(runtime, graph, "fp32", 1)({"x": x})
        # fp32: float rounding only; int8: 8-bit steps of x (scale ~ max/127) and of each
        # column of the weight, summed over 64 terms: within 5% of the product's spread
        assert np.abs(y - expected).max() <= tolerance * max(1.0, np.abs(expected).max())
    speedups = int8_products.int8_speedups(int8_products.product_graph(weight, False, scale),
                                           [runtime], tokens=32, threads=1)
    assert speedups[runtime] > 0


def test_the_largest_weight_of_an_exported_encoder_is_its_widest_product(tokenizer):
    plan = plan_encoder(EncoderConfig(pooling="mean", device="cpu", max_length=64))
    graph = artefacts.prepare("onnx", plan, artefacts.Calibration(rows=32),
                              module=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
    weight = int8_products.largest_product_weight(graph.data)
    assert weight.dtype == np.float32 and weight.ndim == 2
    assert weight.size == 32 * 64  # the tiny BERT's feed-forward (hidden 32, intermediate 64)


def test_int8_is_made_only_where_its_products_can_beat_the_best_rate(monkeypatch):
    rates = {"onnxruntime": 100.0, "openvino": 150.0}
    monkeypatch.setattr(int8_products, "int8_speedups",
                        lambda graph, runtimes, tokens, threads: {"onnxruntime": 0.7,
                                                                  "openvino": 0.6})
    pays, why = int8_products.int8_can_pay("onnx-int8 made: ...", b"", rates, 150.0, 1.05,
                                           2048, 2)
    assert not pays and why.startswith("onnx-int8 not made: int8 matrix products measured")
    assert "at most 90/s" in why and "(150/s)" in why
    monkeypatch.setattr(int8_products, "int8_speedups",
                        lambda graph, runtimes, tokens, threads: {"onnxruntime": 1.2,
                                                                  "openvino": 2.0})
    pays, why = int8_products.int8_can_pay("onnx-int8 made: ...", b"", rates, 150.0, 1.05,
                                           2048, 2)
    assert pays and "2.00x on openvino" in why
    assert int8_products.int8_can_pay("a note", b"", {}, 150.0, 1.05, 2048, 2) == (True,
                                                                                   "a note")


def test_a_cpu_whose_int8_products_are_slow_makes_no_int8_model_even_for_a_large_job(
        tokenizer, monkeypatch):
    from test_probe import RATES, fake_timings, tiny_config

    fake_timings(monkeypatch, RATES)
    asked = []
    monkeypatch.setattr(int8_products, "int8_speedups",
                        lambda graph, runtimes, tokens, threads: asked.append(runtimes) or {
                            runtime: 0.8 for runtime in runtimes})
    made = []
    real_prepare = artefacts.prepare
    monkeypatch.setattr(artefacts, "prepare", lambda kind, *a, **k: made.append(kind)
                        or real_prepare(kind, *a, **k))
    model = make_tiny_bert(tokenizer.vocab_size, seed=7)
    plan = plan_encoder(tiny_config(precision="auto"), rows=10_000_000, module=model,
                        tokenizer=tokenizer)
    assert asked == [["onnxruntime", "openvino"]] and "onnx-int8" not in made
    assert (plan.runtime, plan.precision) == ("openvino", "fp32")
    assert "onnx-int8 not made: int8 matrix products measured 0.80x on onnxruntime" in plan.why
    assert not any(m["precision"] == "int8" for m in plan.measured)
    # the products do not change with the job's size: a larger job takes the decision cached
    monkeypatch.setattr(probe_module, "measure_grid", lambda *a, **k: pytest.fail("measured"))
    again = plan_encoder(tiny_config(precision="auto"), rows=100_000_000, module=model,
                         tokenizer=tokenizer)
    assert "decided earlier" in again.why
