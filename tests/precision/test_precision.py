"""Precision on any CPU: `auto` on a CPU is left to the measurement (its flags decide
nothing; `test_probe.py`), an explicit bf16 on a CPU that emulates it runs with a warning
naming the missing feature, fp16 on a CPU is refused; bf16 on a CPU casts the weights and keeps
pooling in fp32; the plan decides `auto` once and an output keeps the precision its rows were
made in. The flags are passed in, so every branch runs on whatever CPU the tests run on."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch
from conftest import config_of, encoder_of

from sentray.encode.config import EncoderConfig
from sentray.kit.cpu import cpu_bf16_features, cpu_bf16_native, cpu_info
from sentray.precision import artefacts, probe
from sentray.precision.plan import Kept, Where, check_precision, plan_encoder

CPU = torch.device("cpu")
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
ZEN4 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AVX2 = frozenset({"avx2", "fma", "f16c"})


def test_native_bf16_is_read_from_the_cpu_flags():
    assert cpu_bf16_features(AMX) == ["amx_bf16", "avx512_bf16"]
    assert cpu_bf16_native(ZEN4) and not cpu_bf16_native(AVX2)
    info = cpu_info()  # this machine, whatever it is
    assert isinstance(info["name"], str) and isinstance(info["flags"], frozenset)


def test_auto_on_a_cpu_is_left_to_be_measured_a_gpu_takes_fp16(monkeypatch):
    """auto, and fp32's runtime, are the probe's on a CPU (fp32: its exact candidates only);
    a GPU takes fp16; a precision and a runtime both given are not measured."""
    measured = []

    def stand_in(plan, calibration, **kwargs):  # what the measurement picked, on a stand-in CPU
        measured.append((kwargs["rows"], kwargs["exact"]))
        if kwargs["exact"]:
            return plan.running("fp32", why="fp32: stand-in")
        return plan.running("bf16", why="auto: stand-in")

    monkeypatch.setattr(probe, "decide", stand_in)
    auto = EncoderConfig(precision="auto", device="cpu")
    assert plan_encoder(auto, rows=5000).precision == "bf16" and measured == [(5000, False)]
    gpu = plan_encoder(EncoderConfig(precision="auto"), where=Where(cpus=1, gpus=1))
    assert (gpu.precision, gpu.device, gpu.runtime) == ("fp16", "cuda", "torch")
    assert plan_encoder(dataclasses.replace(auto, precision="fp32")).precision == "fp32"
    assert measured == [(5000, False), (None, True)]  # fp32: its runtime measured, exact only
    torch_fp32 = dataclasses.replace(auto, precision="fp32", runtime="torch")
    assert plan_encoder(torch_fp32, rows=5000).runtime == "torch"
    assert len(measured) == 2  # both given: nothing measured
    with pytest.raises(ValueError, match="--runtime onnxruntime does not run --precision bf16"):
        EncoderConfig(precision="bf16", runtime="onnxruntime")


def test_emulated_bf16_runs_with_a_warning_and_fp16_on_a_cpu_is_refused(caplog):
    with caplog.at_level(logging.WARNING, logger="sentray.precision.plan"):
        check_precision("bf16", "cpu", AVX2)
    assert "amx_bf16 nor avx512_bf16" in caplog.text and "emulated" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sentray.precision.plan"):
        check_precision("bf16", "cpu", AMX)
    assert not caplog.text
    with pytest.raises(ValueError, match="'fp16' is for GPUs; on a CPU use bf16"):
        check_precision("fp16", "cpu", AMX)
    with pytest.raises(ValueError, match="'int8' runs on a CPU"):
        check_precision("int8", "cuda", AMX)


def test_bf16_on_a_cpu_casts_the_weights_and_pools_in_fp32(tiny_model_dir):
    texts = ["A cat sat on the mat.", "Stocks fell sharply on Monday.", "Hi."]
    vectors = {}
    for precision in ("fp32", "bf16"):
        encoder = encoder_of(EncoderConfig(model=str(tiny_model_dir), pooling="mean",
                                                precision=precision, device="cpu"))
        weights = {p.dtype for p in encoder.model.parameters()}
        assert weights == {torch.float32 if precision == "fp32" else torch.bfloat16}
        vectors[precision] = encoder.encode(texts)
        assert vectors[precision].dtype == np.float32
    # bf16 keeps 8 bits of mantissa: the same direction to within its rounding (0.99: far
    # looser than the 0.9998 measured on MiniLM, bench/results/precision-avx2.json)
    a, b = vectors["fp32"], vectors["bf16"]
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosine.min() > 0.99


def test_a_job_decides_auto_once_and_an_output_keeps_its_rows_precision(tmp_path, monkeypatch):
    """The command line keeps auto as typed; the plan decides it (measured once); an output
    whose rows were made in one precision keeps it (`EmbeddingOutput.kept`), and --overwrite
    (no kept plan) measures afresh."""
    from sentray.bulk_embedding.output import EmbeddingOutput
    from sentray.cli import JOBS
    from sentray.kit.settings_record import write_settings

    corpus = tmp_path / "in.txt"
    corpus.write_text("One sentence.\n")
    config, _ = JOBS["embed"].parse_config("embed", ["--input", str(corpus), "--output",
                                                     str(tmp_path / "out"), "--precision",
                                                     "auto"])
    assert config.encoder.precision == "auto"
    measured = []

    def stand_in(plan, calibration, **kwargs):
        measured.append(kwargs["rows"])
        if kwargs["exact"]:  # fp32: its fastest exact runtime
            return plan.running("fp32", runtime="openvino", why="fp32: stand-in",
                                artefact=artefacts.prepare("onnx", plan, calibration))
        return plan.running("bf16", why="auto: stand-in")  # what a probe chose

    monkeypatch.setattr(probe, "decide", stand_in)
    encoder = dataclasses.replace(config.encoder, device="cpu")
    output = EmbeddingOutput.at(str(tmp_path / "out"))
    assert output.kept() is None
    assert plan_encoder(encoder, rows=5000, kept=output.kept()).precision == "bf16"
    (tmp_path / "out").mkdir()
    write_settings(output.location, {"precision": "fp32"}, "embed")
    assert output.kept() is None  # no rows yet: nothing to keep
    (tmp_path / "out" / "in.txt-0123456789").mkdir()
    (tmp_path / "out" / "in.txt-0123456789" / "part-000000000000-000000000001-of-"
     "000000000001.parquet").write_bytes(b"PAR1")
    assert output.kept() == Kept("fp32")
    # fp32 rows: fp32, on whichever exact runtime is measured fastest (the same vectors)
    kept = plan_encoder(encoder, rows=5000, kept=output.kept())
    assert (kept.precision, kept.runtime) == ("fp32", "openvino")
    assert kept.why == "auto, at fp32 as the output's rows were made: fp32: stand-in"
    write_settings(output.location, {"precision": "bf16", "runtime": "torch"}, "embed")
    kept = plan_encoder(encoder, rows=5000, kept=output.kept())  # bf16 rows: their runtime too
    assert (kept.precision, kept.runtime, kept.why) == ("bf16", "torch",
                                                        "as the output's rows were made")
    explicit = plan_encoder(dataclasses.replace(encoder, precision="fp32", runtime="torch"),
                            kept=output.kept())
    assert explicit.precision == "fp32"  # asked for: the settings check then refuses the rerun
    assert measured == [5000, 5000]
    assert plan_encoder(encoder, rows=5000, kept=None).precision == "bf16"  # --overwrite: afresh
    assert measured == [5000, 5000, 5000]


def test_training_takes_bf16_on_a_cpu_not_fp16():
    from sentray.contrastive.config import TrainConfig

    assert config_of(TrainConfig, precision="bf16").encoder.precision == "bf16"
    with pytest.raises(ValueError, match="'fp16' is for GPU training"):
        config_of(TrainConfig, precision="fp16")
    with pytest.raises(ValueError, match="'auto' is for encoding"):
        config_of(TrainConfig, precision="auto", use_gpu=True)
    with pytest.raises(ValueError, match="'int8' is for encoding"):
        config_of(TrainConfig, precision="int8")
