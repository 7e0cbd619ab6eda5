"""fp32 on every exact runtime: ONNX Runtime and OpenVINO (at its f32 hint) run the exported
graph of every pooling, and their vectors stay within the tolerance fp32 is held to (1e-5 a
component of torch fp32's), over the bundled sample. This is what lets fp32's `--runtime auto`
run on whichever of them is measured fastest and still mean sentence-transformers' vectors."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from conftest import encoder_of, make_tiny_bert

from sentray.encode.config import EncoderConfig
from sentray.encode.runtimes import registry

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")

SAMPLE = [line for line in (resources.files("sentray") / "data" / "sample.txt").read_text(
    encoding="utf-8").splitlines() if line.strip()]
POOLINGS = [("mean", None), ("cls_before_pooler", None), ("first_last_avg", None),
            ("static_avg", None), ("ditto", "1-2"), ("ditto_last", "0-3"),
            ("ditto_static", "1-0"), ("ditto_layer1_last", "1-1")]
# fp32 kernels differ in summation order (MKL-DNN's, ONNX Runtime's MLAS, OpenVINO's oneDNN
# and AVX2 vs AVX-512 widths): the graph is the same, so differences are rounding, ~1e-7 on
# unit-scale components; 1e-5 is the fp32 tolerance the tests hold every fast path to.
TOLERANCE = 1e-5


@pytest.mark.parametrize(("pooling", "head"), POOLINGS)
def test_every_pooling_on_the_exact_runtimes_within_1e5_of_torch(tokenizer, pooling, head):
    rows = SAMPLE[:120]  # the tiny model is fast: 120 sentences of every length class
    vectors = {}
    runtimes = ("torch", "onnxruntime") + (() if pooling.startswith("ditto") else ("openvino",))
    for runtime in runtimes:
        encoder = encoder_of(EncoderConfig(pooling=pooling, head=head, device="cpu",
                                           runtime=runtime, max_length=64),
                             model=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
        assert (encoder.plan.runtime, encoder.plan.precision) == (runtime, "fp32")
        vectors[runtime] = encoder.encode(rows, batch_size=16)
    for runtime in runtimes[1:]:
        difference = np.abs(vectors[runtime] - vectors["torch"]).max()
        assert difference <= TOLERANCE, (runtime, difference)


def test_openvino_is_refused_for_ditto_and_left_out_of_its_probe(tokenizer):
    """OpenVINO 2026.4 computes the exported Ditto graph wrong (components off by ~1 on the
    tiny model; ONNX Runtime runs the same file within 1e-5): asked for, it is refused naming
    the pooling; `auto` does not measure it (its gate would refuse it anyway)."""

    with pytest.raises(ValueError, match="ditto"):
        encoder_of(EncoderConfig(pooling="ditto", head="1-2", device="cpu", runtime="openvino",
                                 max_length=64),
                   model=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
    plan = encoder_of(EncoderConfig(pooling="ditto", head="1-2", device="cpu", max_length=64),
                      model=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer,
                      rows=100_000).plan  # fp32's runtime auto: the exact candidates
    assert plan.runtime != "openvino"
    assert all(m["runtime"] != "openvino" for m in plan.measured)
    assert ("openvino", "fp32") in registry.candidates()  # the pooling leaves it out


@pytest.mark.parametrize("rows", [pytest.param(300, id="300-rows"),
                                  pytest.param(len(SAMPLE), id="whole", marks=pytest.mark.long)])
def test_the_packaged_model_on_the_exact_runtimes_over_the_sample(rows):
    """all-MiniLM-L6-v2 (mean pooling, normalized: the job's default) over the bundled sample's
    first 300 rows (every row of it in the long tier: 20 s more on 2 cores)."""
    texts = SAMPLE[:rows]
    vectors = {runtime: encoder_of(EncoderConfig(device="cpu", runtime=runtime)).encode(texts)
               for runtime in ("torch", "onnxruntime", "openvino")}
    for runtime in ("onnxruntime", "openvino"):
        difference = np.abs(vectors[runtime] - vectors["torch"]).max()
        assert difference <= TOLERANCE, (runtime, difference)


def test_openvino_compiles_at_the_f32_hint_with_a_bounded_shape_cache(monkeypatch):
    """Exact fp32 needs the f32 hint (the CPU plugin's default is bf16 on CPUs that have it);
    the cache of kernels per input shape is held to SHAPE_CACHE entries, else a
    service fed batches of every shape grows without end (issue 56). The compiled model
    reports its precision, not its cache's size: that is read from the settings it was given
    (the real plugin accepts them: an unknown key would raise here)."""
    import openvino

    from sentray.encode.runtimes import openvino_runtime
    from sentray.precision import int8_products

    given = []
    compile_model = openvino.Core.compile_model

    class Core(openvino.Core):
        def compile_model(self, model, device, config):
            given.append(dict(config))
            return compile_model(self, model, device, config)

    monkeypatch.setattr(openvino, "Core", Core)
    graph = int8_products.product_graph(np.eye(8, dtype=np.float32), False, 1.0)
    compiled = openvino_runtime.infer_request(graph, "fp32", 1).get_compiled_model()
    assert "float32" in str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    assert given[-1]["CPU_RUNTIME_CACHE_CAPACITY"] == openvino_runtime.SHAPE_CACHE


def test_openvino_leaves_its_threads_unpinned_so_a_nodes_actors_use_every_core():
    """The CPU plugin pins its threads to the first cores by default on Linux, the same ones
    in every process: two 1-thread actors on a 2-core node shared one core (half the rows a
    second). The compiled model reports the setting it runs with."""
    from sentray.encode.runtimes import openvino_runtime
    from sentray.precision import int8_products

    graph = int8_products.product_graph(np.eye(8, dtype=np.float32), False, 1.0)
    compiled = openvino_runtime.infer_request(graph, "fp32", 1).get_compiled_model()
    assert compiled.get_property("ENABLE_CPU_PINNING") is False


def test_the_forward_the_probe_kept_is_taken_once_by_the_same_plan(monkeypatch):
    """`keep_forward`: the next `build_forward` of the same plan on the same threads takes it
    (no second compile), once; another plan, or a model handed in, builds its own."""
    import dataclasses

    from sentray.encode.plan import model_plan

    built = []
    runtime = dataclasses.replace(registry.get("torch"), name="stand-in",
                                  build_forward=lambda plan, model, threads: built.append(1)
                                  or f"built {len(built)}")
    registry.register(runtime)
    try:
        plan = dataclasses.replace(model_plan(EncoderConfig(device="cpu")), runtime="stand-in")
        registry.keep_forward(plan, "kept", threads=2)
        assert registry.build_forward(dataclasses.replace(plan, batch_size=7), threads=2) == "kept"
        assert registry.build_forward(plan, threads=2) == "built 1"  # taken once
        registry.keep_forward(plan, "kept", threads=2)
        assert registry.build_forward(plan, threads=1) == "built 2"  # other threads
        assert registry.build_forward(plan, model=object(), threads=2) == "built 3"
        assert registry.build_forward(dataclasses.replace(plan, max_length=16),
                                      threads=2) == "built 4"
        registry.drop_kept()
        assert registry.build_forward(plan, threads=2) == "built 5"
    finally:
        registry.unregister("stand-in")
        registry.drop_kept()
