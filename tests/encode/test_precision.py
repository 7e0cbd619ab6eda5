"""Precision on any CPU: `auto` on a CPU is left to the measurement (its flags decide
nothing; `test_precision_probe.py`), an explicit bf16 on a CPU that emulates it runs with a
warning naming the missing feature, fp16 on a CPU is refused; bf16 on a CPU casts the weights
and keeps pooling in fp32; a job decides `auto` once and an output keeps the precision its rows
were made in. The flags are passed in, so every branch runs on whatever CPU the tests run on."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch
from conftest import config_of

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.precision import (
    cpu_bf16_features,
    cpu_bf16_native,
    cpu_info,
    resolve_precision,
)

CPU = torch.device("cpu")
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
ZEN4 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AVX2 = frozenset({"avx2", "fma", "f16c"})


def test_native_bf16_is_read_from_the_cpu_flags():
    assert cpu_bf16_features(AMX) == ["amx_bf16", "avx512_bf16"]
    assert cpu_bf16_native(ZEN4) and not cpu_bf16_native(AVX2)
    info = cpu_info()  # this machine, whatever it is
    assert isinstance(info["name"], str) and isinstance(info["flags"], frozenset)


def test_auto_on_a_cpu_is_left_to_be_measured_whatever_its_flags():
    for flags in (AMX, ZEN4, AVX2):  # the probe decides (sentray.encode.precision_probe)
        assert resolve_precision("auto", CPU, flags) == "auto"
    assert resolve_precision("auto", torch.device("cuda")) == "fp16"
    assert resolve_precision("fp32", CPU, AMX) == "fp32"


def test_emulated_bf16_runs_with_a_warning_and_fp16_on_a_cpu_is_refused(caplog):
    with caplog.at_level(logging.WARNING, logger="sentray.encode.precision"):
        assert resolve_precision("bf16", CPU, AVX2) == "bf16"
    assert "amx_bf16 nor avx512_bf16" in caplog.text and "emulated" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sentray.encode.precision"):
        assert resolve_precision("bf16", CPU, AMX) == "bf16"
    assert not caplog.text
    with pytest.raises(ValueError, match="'fp16' is for GPUs; on a CPU use bf16"):
        resolve_precision("fp16", CPU, AMX)


def test_bf16_on_a_cpu_casts_the_weights_and_pools_in_fp32(tiny_model_dir):
    texts = ["A cat sat on the mat.", "Stocks fell sharply on Monday.", "Hi."]
    vectors = {}
    for precision in ("fp32", "bf16"):
        encoder = SentenceEncoder(EncoderConfig(model=str(tiny_model_dir), pooling="mean",
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
    from sentray.cli import JOBS
    from sentray.embedding import precision as job_precision
    from sentray.embedding.precision import decide_precision
    from sentray.encode import precision_probe
    from sentray.kit import storage
    from sentray.kit.settings_record import write_settings

    corpus = tmp_path / "in.txt"
    corpus.write_text("One sentence.\n")
    # as the command line makes it (parsed and resolved: auto is still auto there)
    config, _ = JOBS["embed"].parse_config("embed", ["--input", str(corpus), "--output",
                                                     str(tmp_path / "out"), "--precision",
                                                     "auto"])
    assert config.encoder.precision == "auto"
    output = storage.locate(str(tmp_path / "out"))
    probed = []

    def fake_probe(config, rows):  # what the measurement picked, on a stand-in CPU
        probed.append((rows, None))
        return precision_probe.Decision("bf16", "stand-in", [], "x", 1)

    monkeypatch.setattr(job_precision, "probe_where_actors_run", fake_probe)
    assert decide_precision(config, output, 7).encoder.precision == "bf16"
    assert [rows for rows, _ in probed] == [7]
    gpu_pool = dataclasses.replace(config, encoder=dataclasses.replace(config.encoder,
                                                                       device="cuda"))
    assert decide_precision(gpu_pool, output, 7).encoder.precision == "fp16"
    (tmp_path / "out").mkdir()
    write_settings(output, {"precision": "fp32"}, "embed")
    assert decide_precision(config, output, 7).encoder.precision == "fp32"  # as its rows
    assert len(probed) == 1
    explicit = dataclasses.replace(config, encoder=dataclasses.replace(config.encoder,
                                                                       precision="fp32"))
    assert decide_precision(explicit, output, 7) == explicit  # then the settings check refuses
    overwrite = dataclasses.replace(config, overwrite=True)
    assert decide_precision(overwrite, output, 7).encoder.precision == "bf16"  # afresh
    assert len(probed) == 2


def test_training_takes_bf16_on_a_cpu_not_fp16():
    from sentray.contrastive.config import TrainConfig

    assert config_of(TrainConfig, precision="bf16").encoder.precision == "bf16"
    with pytest.raises(ValueError, match="'fp16' is for GPU training"):
        config_of(TrainConfig, precision="fp16")
    with pytest.raises(ValueError, match="'auto' is for encoding"):
        config_of(TrainConfig, precision="auto", use_gpu=True)
    with pytest.raises(ValueError, match="'int8' is for encoding"):
        config_of(TrainConfig, precision="int8")
