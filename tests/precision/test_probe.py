"""The probe: runtime x precision on a CPU. The rule (fastest candidate that passes its gate
and beats torch fp32 by the margin, else torch fp32), a conversion's one-time cost against the
job's size, the steady-state timing loop on a fake clock, whole probes with fake timings on a
tiny model (exact candidates for fp32, the whole grid for auto), and the cached decision."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
from conftest import encoder_of, make_tiny_bert

from sentray.encode.config import EncoderConfig
from sentray.encode.runtimes import registry
from sentray.precision import artefacts, int8_products
from sentray.precision import probe as probe_module
from sentray.precision.plan import SMALL_JOB, plan_encoder
from sentray.precision.probe import (
    MARGIN,
    Measured,
    choose,
    gate,
    time_batches,
    worth_converting,
)

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")


def measured(runtime, precision, rate, cosine=1.0, difference=0.0):
    passed = (difference <= probe_module.EXACT_TOLERANCE if precision == "fp32"
              else cosine >= probe_module.GATES[precision])
    return Measured(runtime, precision, rate, 64, difference, cosine, passed)


def test_the_fastest_passing_candidate_is_chosen_and_never_one_slower_than_torch_fp32():
    fp32 = measured("torch", "fp32", 100.0)
    assert choose([fp32, measured("torch", "bf16", 65.0),
                   measured("onnxruntime", "int8", 140.0, 0.99)])[0] == ("onnxruntime", "int8")
    assert choose([fp32, measured("openvino", "bf16", 290.0),
                   measured("openvino", "int8", 140.0, 0.99)])[0] == ("openvino", "bf16")
    # the Xeon of issue 42: bf16 at 0.65x fp32 is never chosen
    assert choose([fp32, measured("torch", "bf16", 65.0)])[0] == ("torch", "fp32")
    # a fast int8 that fails its gate, an "exact" runtime that is not: not chosen
    assert choose([fp32, measured("openvino", "int8", 300.0, 0.9)])[0] == ("torch", "fp32")
    assert choose([fp32, measured("openvino", "fp32", 300.0, difference=1e-3)])[0] == (
        "torch", "fp32")
    # within the timing margin of torch fp32: torch fp32
    assert choose([fp32, measured("openvino", "fp32", 100.0 * MARGIN * 0.99)])[0] == (
        "torch", "fp32")
    assert choose([fp32, measured("openvino", "fp32", 197.0)])[0] == ("openvino", "fp32")


def test_the_gates_hold_exact_runtimes_to_1e5_and_the_others_to_a_cosine():
    reference = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    assert gate("fp32", reference + 5e-6, reference)[2]
    assert not gate("fp32", reference + 5e-5, reference)[2]
    assert gate("bf16", reference * 1.01, reference)[2]  # the same direction
    noisy = reference + np.random.default_rng(1).normal(scale=0.3, size=reference.shape)
    assert not gate("bf16", noisy, reference)[2] and gate("int8", reference + 0.01, reference)[2]


def test_a_conversion_is_made_only_for_a_job_that_pays_it_back():
    # int8: 300 calibration rows at 150/s: about 12 x 2 s = 24 s; 4 x that = 96 s of the job
    assert not worth_converting("onnx-int8", 10_000, 150.0, 150.0, 300, 256)[0]  # 67 s
    worth, note = worth_converting("onnx-int8", 50_000, 150.0, 150.0, 300, 256)  # 333 s
    assert worth and "50000 rows" in note
    # the ONNX graph: 2 x 256 rows at 150/s, ~3.4 s; a job of 14 s or more pays it back
    assert worth_converting("onnx", 2_100, 150.0, 150.0, 300, 256)[0]
    assert not worth_converting("onnx", 1_000, 150.0, 150.0, 300, 256)[0]
    assert not worth_converting("onnx", None, 150.0, 150.0, 300, 256)[0]  # size unknown


def test_a_cached_decision_speaks_of_this_runs_rows():
    """A decision cached by a job of 47,124 rows, read by one of 2,000: its notes on the
    conversions are said of 2,000 rows, not of the job that made it."""
    earlier = ("openvino fp32 measured 1.50x torch fp32 on this CPU, vectors within 1.0e-06; "
               "onnx made: 47124 rows take about 314 s at the best rate measured, >= 4 x the ~5 "
               "s estimated to make it; onnx-int8 not tried: 47124 rows take about 314 s at the "
               "best rate measured, under 4 x the ~80 s estimated to make it")
    decision = probe_module.Decision(
        "openvino", "fp32", earlier, [{"runtime": "torch", "precision": "fp32", "rate": 100.0},
                                      {"runtime": "openvino", "precision": "fp32", "rate": 150.0}],
        "a CPU", 2, cached=True)
    told = probe_module.for_this_run(decision, 2_000, artefacts.Calibration(rows=300)).why
    assert "47124" not in told, told
    assert told.startswith("openvino fp32 measured 1.50x torch fp32")
    assert "onnx made by an earlier run" in told
    assert "onnx-int8 not tried: 2000 rows take about 13 s at the best rate measured" in told


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_timing_is_at_steady_state_and_stops_after_its_budget_or_when_clearly_slower():
    import torch

    calls = []

    class Batch:
        input_ids = torch.zeros((32, 4), dtype=torch.long)
        attention_mask = torch.ones((32, 4), dtype=torch.long)  # no padding: rate = rows/s
        positions = np.arange(32)

    def forward(ids, mask):
        calls.append(len(ids))
        return torch.ones((len(ids), 4))

    batches = [Batch()] * 8
    # each batch once untimed, then timed; each clock read moves 0.5 s: after three timed
    # calls a budget of 1.5 s is spent, and only the three batches timed were warmed
    timed = time_batches(forward, batches, 4, seconds=1.5, clock=FakeClock(0.5))
    assert calls == [32] * 6 and len(timed.vectors) == 96 and timed.rate == 64
    assert len(timed.positions) == 96 and timed.warm_seconds == 0
    calls.clear()
    # over the floor on a few sentences (4 in 0.01 s), under it after two timed batches (64 in
    # 1 s): two batches warmed and timed, no more; the first calls' extra 0.3 s and 0.2 s are
    # the one-time cost, not in the rate
    clock = iter([0.0, 0.01, 0.01, 0.02, 1.0, 1.3, 1.3, 1.8, 2.0, 2.2, 2.2, 2.7]).__next__
    timed = time_batches(forward, batches, 4, floor=700, seconds=1.5, clock=clock)
    assert calls == [4, 4] + [32] * 4 and len(timed.vectors) == 64 and timed.rate == 64
    assert timed.warm_seconds == pytest.approx(0.0)  # 0.3 and 0.2 s first calls, 0.5 s timed
    calls.clear()
    clock = iter([0.0, 0.01, 0.01, 0.02, 1.0, 2.0, 2.0, 2.5, 3.0, 3.2, 3.2, 3.7]).__next__
    timed = time_batches(forward, batches, 4, floor=700, seconds=1.5, clock=clock)
    assert timed.warm_seconds == pytest.approx(0.5)  # a 1 s first call against 0.5 s timed
    calls.clear()
    # no time budget (a candidate on the batches the reference timed): every batch given
    timed = time_batches(forward, batches[:5], 4, floor=1, seconds=None, clock=FakeClock(0.5))
    assert calls == [4, 4] + [32] * 10 and len(timed.vectors) == 160
    calls.clear()
    # a runtime that builds nothing per input shape (torch's eager kernels): its first batch is
    # called untimed first, the others once, each timed
    timed = time_batches(forward, batches[:4], 4, seconds=None, warm_every_shape=False,
                         clock=FakeClock(0.5))
    assert calls == [32] * 5 and len(timed.vectors) == 128 and timed.rate == 64
    calls.clear()
    # far under the floor on a few sentences' second call: stopped before warming anything else
    timed = time_batches(forward, batches, 4, floor=1e6, clock=FakeClock(0.01))
    assert calls == [4, 4] and len(timed.vectors) == 4 and timed.rate < 1e6 / 2

    class Padded(Batch):
        attention_mask = torch.tensor([[1, 1, 0, 0]] * 32)

    # half its tokens padding, which the job's batches (blocks of thousands of rows sorted by
    # length) nearly lack: its rows cost what their real tokens do
    assert time_batches(forward, [Padded()] * 3, 4, seconds=1.5,
                        clock=FakeClock(0.5)).rate == 2 * 64


def test_spread_order_mixes_the_lengths_in_every_prefix():
    """Length-sorted batches (longest first) in the order the probe times them: the first few
    come from across the range, every batch once."""
    for n in (1, 2, 3, 8, 13):
        order = probe_module.spread(list(range(n)))
        assert sorted(order) == list(range(n))
    order = probe_module.spread(list(range(16)))
    assert order[:3] == [8, 4, 12] and min(order[:4]) <= 2 <= 13 <= max(order[:4]) + 1


def test_a_candidates_one_time_cost_is_weighed_against_the_jobs_rows():
    """A runtime 1.5x torch fp32 that compiles for 20 s: chosen for 100,000 rows (1,000 s
    against 687 s), not for 2,000 (33 s against 20 s); with the size
    unknown: then the rates alone decide)."""
    fp32 = measured("torch", "fp32", 100.0)
    slow_to_build = Measured("openvino", "fp32", 150.0, 64, 0.0, 1.0, True, 20.0)
    assert choose([fp32, slow_to_build], 100_000)[0] == ("openvino", "fp32")
    chosen, why = choose([fp32, slow_to_build], 2_000)
    assert chosen == ("torch", "fp32") and "one-time cost" in why
    assert choose([fp32, slow_to_build])[0] == ("openvino", "fp32")


def tiny_config(**fields) -> EncoderConfig:
    return EncoderConfig(**{"pooling": "mean", "device": "cpu", "int8_calibration_rows": 32,
                            "max_length": 64, **fields})  # the tiny model has 128 positions


def fake_timings(monkeypatch, rates, *, every_candidate: bool = True):
    """time_batches with real vectors and the given sentences/s per (runtime, precision); a CPU
    on which every runtime runs every precision (unless `every_candidate` is False)."""
    if every_candidate:
        monkeypatch.setattr(registry, "runs_as_itself", lambda runtime, precision: True)
    real = probe_module.time_batches

    def fake(forward, batches, dimension, floor=None, **timing):
        plan = forward.__self__.plan
        return dataclasses.replace(real(forward, batches[:1], dimension),
                                   rate=rates[(plan.runtime, plan.precision)], warm_seconds=0.0)
    monkeypatch.setattr(probe_module, "time_batches", fake)


RATES = {("torch", "fp32"): 100.0, ("onnxruntime", "fp32"): 120.0, ("openvino", "fp32"): 160.0,
         ("torch", "bf16"): 40.0, ("openvino", "bf16"): 150.0,
         ("onnxruntime", "int8"): 180.0, ("openvino", "int8"): 250.0}


class Watcher:
    """A `probe.ProbeWatcher` that notes what it is told (and how many timings came before)."""

    def __init__(self, timed: list) -> None:
        self.timed, self.told = timed, []

    def reference(self, encoder) -> None:
        self.told.append(("reference", encoder.plan.runtime, encoder.plan.precision,
                          len(self.timed)))

    def decided(self, plan) -> None:
        self.told.append(("decided", plan.runtime, plan.precision))


def test_fp32_runs_on_the_fastest_exact_runtime_measured(tokenizer, monkeypatch, caplog):
    model = make_tiny_bert(tokenizer.vocab_size, seed=3)
    fake_timings(monkeypatch, RATES)
    # a small job on a machine nothing was measured on: not measured, torch fp32
    fresh = plan_encoder(tiny_config(), rows=SMALL_JOB - 1, module=model, tokenizer=tokenizer)
    assert (fresh.runtime, fresh.precision) == ("torch", "fp32") and not fresh.measured
    assert "costs less than measuring" in fresh.why
    # the watcher (the job's early rows) is told of torch fp32's encoder once, before anything
    # is timed, and of the plan decided
    timed = []
    measure = probe_module.time_batches
    monkeypatch.setattr(probe_module, "time_batches",
                        lambda *a, **k: timed.append(1) or measure(*a, **k))
    watcher = Watcher(timed)
    with caplog.at_level(logging.INFO, logger="sentray.precision.probe"):
        plan = plan_encoder(tiny_config(), rows=100_000, module=model, tokenizer=tokenizer,
                            watcher=watcher)
    assert watcher.told == [("reference", "torch", "fp32", 0), ("decided", "openvino", "fp32")]
    assert (plan.runtime, plan.precision, plan.artefact.kind) == ("openvino", "fp32", "onnx")
    assert {(m["runtime"], m["precision"]) for m in plan.measured} == {
        ("torch", "fp32"), ("onnxruntime", "fp32"), ("openvino", "fp32")}  # the exact ones
    assert all(m["passed"] and m["max_difference"] <= 1e-5 for m in plan.measured)
    assert "torch fp32 100/s" in caplog.text
    # a small job and one of unknown size take the decision cached here, unmeasured
    monkeypatch.setattr(probe_module, "measure_grid", lambda *a, **k: pytest.fail("measured again"))
    small = plan_encoder(tiny_config(), rows=SMALL_JOB - 1, module=model, tokenizer=tokenizer,
                         watcher=watcher)
    assert small.runtime == "openvino" and "decided earlier" in small.why
    assert watcher.told[2:] == [("decided", "openvino", "fp32")]  # no reference: not measured
    unknown = plan_encoder(tiny_config(), module=model, tokenizer=tokenizer)
    assert unknown.runtime == "openvino" and "decided earlier" in unknown.why
    asked = plan_encoder(tiny_config(runtime="torch"), rows=100_000, module=model,
                         tokenizer=tokenizer)
    assert asked.runtime == "torch"  # --runtime given: not measured


def test_auto_measures_the_grid_and_converts_what_the_job_pays_back(tokenizer, monkeypatch):
    model = make_tiny_bert(tokenizer.vocab_size, seed=5)
    fake_timings(monkeypatch, RATES)
    monkeypatch.setattr(int8_products, "int8_speedups",  # int8 products 2x fp32's, any CPU
                        lambda graph, runtimes, tokens, threads: dict.fromkeys(runtimes, 2.0))
    small = plan_encoder(tiny_config(precision="auto", int8_calibration_rows=64), rows=3_000,
                         module=model, tokenizer=tokenizer)
    # 3,000 rows (30 s at 100/s) pay for the ONNX graph (~5 s estimated), not for the int8 model
    # (~8 s estimated, against 19 s at the best rate): OpenVINO fp32, measured fastest
    assert (small.runtime, small.precision) == ("openvino", "fp32")
    assert "onnx-int8 not tried" in small.why
    assert {m["precision"] for m in small.measured} == {"fp32", "bf16"}
    large = plan_encoder(tiny_config(precision="auto"), rows=10_000_000, module=model,
                         tokenizer=tokenizer)
    assert (large.runtime, large.precision, large.artefact.kind) == ("openvino", "int8",
                                                                      "onnx-int8")
    assert len(large.measured) == 7
    int8 = [m for m in large.measured if m["precision"] == "int8"]
    assert all(m["passed"] and m["cosine_min"] >= probe_module.GATES["int8"] for m in int8)
    # another thread count is another kind of machine: measured anew
    fake_timings(monkeypatch, {**RATES, ("torch", "bf16"): 300.0})
    other = probe_module.decide(plan_encoder(tiny_config(), module=model, tokenizer=tokenizer),
                                artefacts.Calibration(rows=32), rows=10_000_000, threads=1,
                                module=model, tokenizer=tokenizer)
    assert "decided earlier" not in other.why and (other.runtime, other.precision) == (
        "torch", "bf16")


@pytest.mark.parametrize("native", [False, True])
def test_bf16_is_timed_only_where_its_runtime_reports_it_native(tokenizer, monkeypatch, native,
                                                                tmp_path):
    """OpenVINO's CPU plugin runs a bf16 hint in f32 on a CPU without bf16 instructions (it
    lists no BF16 among its capabilities): the fp32 candidate again. torch's oneDNN reports no
    bf16 kernels on a CPU without AVX-512: reference code, 1/15 of fp32. Neither is timed."""
    import openvino
    import torch

    real = openvino.Core

    class Core:  # the real one, but for the capabilities it lists
        def __init__(self):
            self.core = real()

        def get_property(self, device, name):
            if (device, name) == ("CPU", "OPTIMIZATION_CAPABILITIES"):
                return ["FP32", "INT8"] + (["BF16"] if native else [])
            return self.core.get_property(device, name)

        def __getattr__(self, name):
            return getattr(self.core, name)

    # each CPU its own cache: a decision is cached per CPU model, which both cases share here
    monkeypatch.setenv("SENTRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(openvino, "Core", Core)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: native)
    assert registry.runs_as_itself("openvino", "bf16") is native
    assert registry.runs_as_itself("torch", "bf16") is native
    assert registry.runs_as_itself("openvino", "fp32") and registry.runs_as_itself("torch", "fp32")
    fake_timings(monkeypatch, RATES, every_candidate=False)
    plan = plan_encoder(tiny_config(precision="auto"), rows=3_000,
                        module=make_tiny_bert(tokenizer.vocab_size, seed=6), tokenizer=tokenizer)
    timed = {(m["runtime"], m["precision"]) for m in plan.measured}
    assert (("openvino", "bf16") in timed) is native and (("torch", "bf16") in timed) is native
    assert ("openvino", "fp32") in timed


def test_the_probe_encodes_the_corpus_rows_and_keeps_the_chosen_candidates_vectors(
        tokenizer, monkeypatch):
    """Given the corpus's first rows, the probe times those (not the bundled sample) and the
    plan carries the chosen runtime's vectors of the rows it encoded: the plan's own vectors
    (within the exact gate of torch fp32's), which the job's encoders then take."""
    from sentray.encode.encoder import SentenceEncoder

    model = make_tiny_bert(tokenizer.vocab_size, seed=8)
    fake_timings(monkeypatch, RATES)
    corpus = [f"row {i} of the corpus has {i % 7} more words in it" for i in range(100)]
    plan = plan_encoder(tiny_config(), rows=100_000, module=model, tokenizer=tokenizer,
                        corpus=lambda rows: corpus[:rows])
    assert (plan.runtime, plan.precision) == ("openvino", "fp32") and plan.probed is not None
    texts = list(plan.probed.texts)
    assert texts and set(texts) <= set(corpus)
    exact = SentenceEncoder(plan_encoder(tiny_config(runtime="torch"), module=model,
                                         tokenizer=tokenizer), model=model, tokenizer=tokenizer)
    assert np.abs(plan.probed.vectors - exact.encode(texts)).max() <= probe_module.EXACT_TOLERANCE
    assert "probed" not in plan.record()  # the vectors ride on the plan, never recorded
    # too few corpus rows: the bundled sample is probed, and nothing is kept
    fake_timings(monkeypatch, {**RATES, ("openvino", "fp32"): 170.0})
    few = probe_module.decide(plan_encoder(tiny_config(runtime="torch"), module=model,
                                           tokenizer=tokenizer), artefacts.Calibration(rows=32),
                              rows=10_000_000, threads=1, module=model, tokenizer=tokenizer,
                              corpus=corpus[:10])
    assert few.probed is None


def test_an_encoder_of_auto_runs_what_the_probe_chose(tokenizer, monkeypatch):
    fake_timings(monkeypatch, {**RATES, ("torch", "bf16"): 300.0})
    encoder = encoder_of(tiny_config(precision="auto"), rows=100_000,
                         model=make_tiny_bert(tokenizer.vocab_size, seed=4), tokenizer=tokenizer)
    assert (encoder.plan.runtime, encoder.precision) == ("torch", "bf16")
    assert encoder.encode(["a sentence"]).shape == (1, 32)


@pytest.mark.ray
@pytest.mark.slow
def test_a_job_on_a_cluster_measures_auto_in_a_ray_task_with_an_actors_cpus(
        ray_cluster, tiny_model_dir, tmp_path, caplog):
    """On a cluster the probe runs where actors run (a task with an actor's CPUs), not in the
    driver; the decided plan comes back with what it measured."""
    import os

    from sentray.bulk_embedding.job import where_actors_run
    from sentray.corpus.actor_pool import ActorPoolConfig

    pool = ActorPoolConfig(address=ray_cluster.address, in_process_rows=0)
    where = where_actors_run(pool, 1_000)
    assert (where.threads, where.cpus, where.address) == (1, 1.0, ray_cluster.address)
    config = tiny_config(model=str(tiny_model_dir), precision="auto")
    with caplog.at_level(logging.INFO, logger="sentray.precision.plan"):
        plan = plan_encoder(config, rows=SMALL_JOB, where=where)
    assert "decide ran in a Ray task on node" in caplog.text
    assert f"(pid {os.getpid()})" not in caplog.text
    assert plan.device == "cpu" and plan.measured[0]["precision"] == "fp32"
    assert (plan.runtime, plan.precision) in registry.candidates()

    # an int8 output's code book is encoded where the actors run too, by the same plan
    from sentray.bulk_embedding import job as embed_job
    from sentray.bulk_embedding.config import VectorConfig
    from sentray.corpus.sources import CorpusConfig, discover_sources

    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("".join(f"a sentence of the corpus, number {i}\n" for i in range(40)))
    corpus = CorpusConfig(input=str(corpus_file))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sentray.precision.plan"):
        ranges, _ = embed_job.code_book(plan, VectorConfig(output_dtype="int8", code_book_rows=30),
                                     corpus, discover_sources(corpus), kept=None, where=where)
    assert "measure_code_book ran in a Ray task on node" in caplog.text
    assert ranges.dimension == plan.dimension


def test_candidates_are_timed_bf16_first_and_int8_last():
    grid = [("onnxruntime", "fp32"), ("openvino", "fp32"), ("torch", "bf16"),
            ("openvino", "bf16"), ("onnxruntime", "int8"), ("openvino", "int8")]
    assert probe_module.probe_order(grid) == [
        ("torch", "bf16"), ("openvino", "bf16"), ("onnxruntime", "fp32"), ("openvino", "fp32"),
        ("onnxruntime", "int8"), ("openvino", "int8")]


def test_a_candidate_must_reach_the_rate_that_finishes_the_job_first():
    """torch fp32 at 100/s; OpenVINO bf16 at 200/s after 1 s of building: 10,000 rows take
    51 s on it, so a candidate that took 1 s to build needs 10,000 / 50 = 200/s; a job of
    unknown size: the best rate."""
    fp32 = measured("torch", "fp32", 100.0)
    best = Measured("openvino", "bf16", 200.0, 64, 0.01, 0.9999, True, 1.0)
    failed = measured("openvino", "int8", 10_000.0, cosine=0.5)  # a gate failed: no bar
    assert probe_module.finishing_rate([fp32, best, failed], 10_000, 1.0) == pytest.approx(200.0)
    assert probe_module.finishing_rate([fp32, best, failed], None, 1.0) == 200.0
    assert probe_module.finishing_rate([fp32], 10_000, 0.0) == pytest.approx(100.0)


def test_a_candidate_under_the_bar_stops_after_two_batches_past_a_lower_scout():
    """The scout (a few sentences) drops only a candidate far under torch fp32 (`scout`); one
    that passes it but times under `floor` on two batches is stopped there."""
    import torch

    class Batch:
        input_ids = torch.zeros((32, 4), dtype=torch.long)
        attention_mask = torch.ones((32, 4), dtype=torch.long)
        positions = np.arange(32)

    calls = []

    def forward(ids, mask):
        calls.append(len(ids))
        return torch.ones((len(ids), 4))

    # every call 0.05 s: 80/s on the scout's 4 sentences, 640/s on a batch of 32
    timed = time_batches(forward, [Batch()] * 8, 4, floor=1000, scout=50, seconds=None,
                         clock=FakeClock(0.05))
    assert calls == [4, 4] + [32] * 4 and len(timed.vectors) == 64
    assert timed.rate == pytest.approx(640)
    calls.clear()
    timed = time_batches(forward, [Batch()] * 8, 4, floor=300, scout=50, seconds=None,
                         clock=FakeClock(0.05))
    assert calls == [4, 4] + [32] * 16  # over the bar: every batch


def test_the_onnx_graph_made_from_the_probes_encoder_is_the_one_made_afresh(tokenizer,
                                                                             monkeypatch,
                                                                             tmp_path):
    from sentray.encode.encoder import SentenceEncoder

    model = make_tiny_bert(tokenizer.vocab_size, seed=9)
    plan = plan_encoder(tiny_config(runtime="torch"), module=model, tokenizer=tokenizer)
    reference = SentenceEncoder(plan, model=model, tokenizer=tokenizer)
    made = []
    for folder, encoder in (("afresh", None), ("taken", reference)):
        monkeypatch.setenv("SENTRAY_CACHE_DIR", str(tmp_path / folder))
        made.append(artefacts.prepare("onnx", plan, artefacts.Calibration(rows=32), module=model,
                                      tokenizer=tokenizer, encoder=encoder))
    assert made[0].digest == made[1].digest and made[0].key == made[1].key
