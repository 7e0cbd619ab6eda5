"""`--precision int8` on tiny in-process models: every pooling through the exported, NNCF-
quantized graph on ONNX Runtime against the torch fp32 path, the cache, and the refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import encoder_of, make_tiny_bert

from sentray.encode.config import EncoderConfig
from sentray.precision import artefacts
from sentray.precision.plan import check_precision, plan_encoder

pytest.importorskip("onnxruntime")
pytest.importorskip("nncf")

TEXTS = ["A man is playing a guitar.", "Hi", "The quick brown fox jumps over the lazy dog.",
         "Ein Mann spielt Gitarre.", "猫が好きです。", "x " * 40, "Not all birds fly.",
         "Hardly anyone came to the meeting, which surprised the organisers."]
POOLINGS = [("mean", None), ("cls_before_pooler", None), ("first_last_avg", None),
            ("static_avg", None), ("ditto", "1-2"), ("ditto_last", "0-3"),
            ("ditto_static", "1-0"), ("ditto_layer1_last", "1-1")]


def encoders(tokenizer, pooling, head, **config):
    fp32 = encoder_of(EncoderConfig(pooling=pooling, head=head, device="cpu", **config),
                           model=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
    quantized = encoder_of(EncoderConfig(**{
        "pooling": pooling, "head": head, "device": "cpu", "precision": "int8",
        "int8_calibration_rows": 64, **config}),
                                model=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
    return fp32, quantized


def cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.parametrize(("pooling", "head"), POOLINGS)
def test_int8_every_pooling_against_torch_fp32(tokenizer, pooling, head):
    """The int8 graph computes the same pooling as torch: 8-bit weights and activations move
    a vector by a few percent at most (a tiny random model: cosine >= 0.97, the gate `auto`
    holds int8 to; the packaged model measured min 0.986 over 2,000 rows), while a wrong
    pooling or a missing diagonal gives unrelated vectors (cosine ~0.5 or lower)."""
    fp32, quantized = encoders(tokenizer, pooling, head)
    assert quantized.plan.artefact is not None and quantized.pooled is None
    assert quantized.plan.runtime == "onnxruntime"
    a, b = fp32.encode(TEXTS, batch_size=3), quantized.encode(TEXTS, batch_size=3)
    assert b.shape == a.shape and b.dtype == np.float32
    assert cosines(a, b).min() >= 0.97, cosines(a, b)


def test_int8_graph_before_quantization_equals_torch(tokenizer):
    """The exported graph itself (fp32 ONNX on ONNX Runtime) is the torch pooling to float
    rounding: batch and length are dynamic, the Ditto diagonal is in it."""
    import onnxruntime as ort

    fp32, _ = encoders(tokenizer, "ditto", "1-2")
    session = ort.InferenceSession(artefacts.export_onnx(fp32.pooled, tokenizer),
                                   providers=["CPUExecutionProvider"])
    for batch in fp32.length_sorted_batches(fp32.tokenize(TEXTS), batch_size=3):
        got = session.run(None, {"input_ids": batch.input_ids.numpy(),
                                 "attention_mask": batch.attention_mask.numpy()})[0]
        want = fp32.embed_tokens(batch.input_ids, batch.attention_mask).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # kernel rounding


def test_int8_model_is_prepared_once_and_cached(tokenizer, monkeypatch):
    _, first = encoders(tokenizer, "mean", None)
    record = first.plan.artefact
    assert (artefacts.cache_folder("int8", record.key) / "model.onnx").is_file()
    monkeypatch.setattr(artefacts, "quantize", lambda *a, **k: pytest.fail("quantized again"))
    _, second = encoders(tokenizer, "mean", None)
    assert second.plan.artefact.digest == record.digest
    read_out = (record.pooling, record.head, record.max_length)
    assert artefacts.find_cached(record.digest, read_out).key == record.key
    # the same file made for another length is not this read-out's (a query at that length
    # would be refused by its plan)
    assert artefacts.find_cached(record.digest, (*read_out[:2], read_out[2] + 1)) is None
    # how it was made is in its versions (`RECIPE`), so in its key; one made before the recipe
    # was recorded keeps the key it was made with: an output holding one still takes it
    assert record.versions["recipe"] == artefacts.RECIPE
    model = make_tiny_bert(tokenizer.vocab_size)  # the same seeded weights
    identity = artefacts.model_identity(second.plan, model)
    calibration = artefacts.Calibration(rows=64)
    assert artefacts.made_for(record, second.plan, calibration, identity)
    older = {k: v for k, v in record.versions.items() if k != "recipe"}
    key = artefacts.artefact_key(second.plan, "onnx-int8", calibration, identity, older)
    assert key != record.key
    assert artefacts.made_for(dataclasses.replace(record, key=key, versions=older), second.plan,
                              calibration, identity)
    # another calibration is another model
    monkeypatch.undo()
    _, other = encoders(tokenizer, "mean", None, int8_calibration_rows=32)
    assert other.plan.artefact.key != record.key


def test_int8_model_of_another_pooling_is_refused(tokenizer):
    _, mean = encoders(tokenizer, "mean", None)
    plan = plan_encoder(EncoderConfig(pooling="first_last_avg", device="cpu"),
                        module=make_tiny_bert(tokenizer.vocab_size), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="was made for pooling"):
        plan.running("int8", why="a kept model", artefact=mean.plan.artefact)


def test_int8_on_a_gpu_is_refused_naming_fp16_and_bf16():
    with pytest.raises(ValueError, match="fp16.*bf16"):
        check_precision("int8", "cuda")


def test_int8_calibration_is_checked(tmp_path):
    with pytest.raises(ValueError, match="int8-calibration is for --precision int8"):
        EncoderConfig(int8_calibration=str(tmp_path / "x.txt"))
    (tmp_path / "one.txt").write_text("only one line\n")
    with pytest.raises(ValueError, match="at least 2 sentences"):
        artefacts.Calibration(str(tmp_path / "one.txt"), 300).texts()
    texts, described = artefacts.Calibration(None, 300).texts()
    assert len(texts) == 300 and described["source"] == artefacts.BUNDLED_SAMPLE
