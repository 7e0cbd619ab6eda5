"""The embedding job with --precision int8 on the tiny model: the int8 model is prepared once
in the driver and stored beside the rows; its digest is a vector-changing setting (another
precision or calibration is refused); a rerun that adds input files encodes them with the
stored model, not a new one; queries are encoded by the same model; the summary counts tokens
and, with a price per hour, the run's cost."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pyarrow.dataset as pads
import pytest

from sentray.bulk_embedding.config import EmbedConfig, VectorConfig
from sentray.bulk_embedding.job import run_embedding
from sentray.bulk_embedding.query import QueryEncoder
from sentray.corpus.sources import CorpusConfig
from sentray.encode.config import EncoderConfig
from sentray.precision import artefacts

pytest.importorskip("onnxruntime")
pytest.importorskip("nncf")

TEXTS = [f"Sentence number {i} says something about {w}." for i, w in
         enumerate(["cats", "dogs", "the weather", "markets", "a song", "nothing"] * 5)]


def config(corpus, output, **encoder) -> EmbedConfig:
    return EmbedConfig(corpus=CorpusConfig(input=str(corpus)), output=str(output),
                       encoder=EncoderConfig(**{"pooling": "mean", "device": "cpu",
                                                "precision": "int8",
                                                "int8_calibration_rows": 32, **encoder}),
                       vector=VectorConfig(normalize=False), price_per_hour=2.0)


def rows(output) -> dict:
    table = pads.dataset(str(output), format="parquet").to_table()
    return {(s, r): np.asarray(v) for s, r, v in zip(table.column("source").to_pylist(),
                                                     table.column("row").to_pylist(),
                                                     table.column("embedding").to_pylist(), strict=True)}


def test_int8_job_stores_its_model_refuses_others_and_resumes_with_it(
        tmp_path, tiny_model_dir, monkeypatch):
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_text("\n".join(TEXTS) + "\n")
    output = tmp_path / "out"
    first = config(corpus, output, model=str(tiny_model_dir))
    summary = run_embedding(first)
    assert summary["status"]["ok"] == len(TEXTS)
    assert summary["settings"]["precision"] == "int8"
    digest = summary["settings"]["int8_model"]
    assert (output / "_int8_model.onnx").is_file() and len(digest) == 64
    assert summary["tokens_encoded"] > len(TEXTS) and summary["tokens_per_second"] > 0
    assert summary["cost_per_million_rows"] == pytest.approx(
        2.0 * summary["seconds"] / 3600 / len(TEXTS) * 1e6, rel=0.01)

    for changed, key in ((dict(precision="fp32"), "precision"),
                         (dict(int8_calibration_rows=16), "int8_model")):
        with pytest.raises(ValueError, match=f"{key}: "):
            run_embedding(config(corpus, output, model=str(tiny_model_dir), **changed))

    # a new file, an empty cache and no quantizer: the rows' own model encodes it
    shutil.copy(corpus / "a.txt", corpus / "b.txt")
    monkeypatch.setenv("SENTRAY_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(artefacts, "quantize", lambda *a, **k: pytest.fail("a new int8 model"))
    again = run_embedding(first)
    assert again["settings"]["int8_model"] == digest and again["rows_in"] == 2 * len(TEXTS)
    stored = rows(output)
    a = {r: v for (s, r), v in stored.items() if s.startswith("a.txt")}
    b = {r: v for (s, r), v in stored.items() if s.startswith("b.txt")}
    for row, vector in a.items():  # one model, one runtime, one machine: the same rows
        np.testing.assert_allclose(b[row], vector, rtol=1e-5, atol=1e-6)

    queries = QueryEncoder(str(output), device="cpu")
    assert queries.actor.encoder.precision == "int8"
    np.testing.assert_allclose(queries.encode(TEXTS[:3]), np.stack([a[0], a[1], a[2]]),
                               rtol=1e-5, atol=1e-6)


def test_an_int8_query_of_a_copied_file_needs_the_model(tmp_path, tiny_model_dir,
                                                        monkeypatch):
    corpus = tmp_path / "a.txt"
    corpus.write_text("\n".join(TEXTS[:6]) + "\n")
    run_embedding(config(corpus, tmp_path / "out", model=str(tiny_model_dir)))
    part = next((tmp_path / "out").glob("*/*.parquet"))
    copied = tmp_path / "copied.parquet"
    shutil.copy(part, copied)
    assert QueryEncoder(str(copied), device="cpu").encode(TEXTS[:1]).shape == (1, 32)  # cache
    monkeypatch.setenv("SENTRAY_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(FileNotFoundError, match="pass the output folder"):
        QueryEncoder(str(copied), device="cpu")


def test_int8_on_a_gpu_pool_is_refused_before_anything_runs(tmp_path):
    from sentray.corpus.actor_pool import ActorPoolConfig

    with pytest.raises(ValueError, match="int8 runs on a CPU.*fp16.*bf16"):
        cpu = config(tmp_path, tmp_path / "out")
        dataclasses.replace(cpu, pool=ActorPoolConfig(num_gpus=1),
                            encoder=dataclasses.replace(cpu.encoder, device="auto"))
