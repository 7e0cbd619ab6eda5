"""Precision on any CPU: `auto` picks bf16 only where the CPU runs it natively (AMX or
AVX512-BF16, read from its flags), an explicit bf16 on a CPU that emulates it runs with a
warning naming the missing feature, fp16 on a CPU is refused; bf16 on a CPU casts the weights
and keeps pooling in fp32; a job decides `auto` once and an output keeps the precision its rows
were made in. The flags are passed in, so every branch runs on whatever CPU the tests run on."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch

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


def test_auto_is_bf16_only_where_native():
    assert resolve_precision("auto", CPU, AMX) == "bf16"
    assert resolve_precision("auto", CPU, ZEN4) == "bf16"
    assert resolve_precision("auto", CPU, AVX2) == "fp32"
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
    from sentray.embedding.job import decide_precision
    from sentray.encode import precision
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
    for flags, expected in ((AMX, "bf16"), (AVX2, "fp32")):
        monkeypatch.setattr(precision, "cpu_info", lambda flags=flags: {"name": "x",
                                                                         "flags": flags})
        assert decide_precision(config, output).encoder.precision == expected
    gpu_pool = dataclasses.replace(config, encoder=dataclasses.replace(config.encoder,
                                                                       device="cuda"))
    assert decide_precision(gpu_pool, output).encoder.precision == "fp16"
    (tmp_path / "out").mkdir()
    write_settings(output, {"precision": "bf16"}, "embed")
    assert decide_precision(config, output).encoder.precision == "bf16"  # on the AVX2 stand-in
    explicit = dataclasses.replace(config, encoder=dataclasses.replace(config.encoder,
                                                                       precision="fp32"))
    assert decide_precision(explicit, output) is explicit  # then the settings check refuses
    overwrite = dataclasses.replace(config, overwrite=True)
    assert decide_precision(overwrite, output).encoder.precision == "fp32"  # decided afresh


def test_training_takes_bf16_on_a_cpu_not_fp16():
    from sentray.contrastive.config import TrainConfig

    assert TrainConfig(precision="bf16").precision == "bf16"
    with pytest.raises(ValueError, match="'fp16' is for GPU training"):
        TrainConfig(precision="fp16")
    with pytest.raises(ValueError, match="'auto' is for encoding"):
        TrainConfig(precision="auto", use_gpu=True)
