"""Every sentray pooling, Ditto included, as a sentence-transformers directory
(sentray.encode.export, sentray.encode.st_module): `SentenceTransformer(DIR)` gives sentray's
embeddings, and sentray's own jobs read the directory back with the same pooling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest
from conftest import load_job

from sentray.encode.export import save_model_directory
from sentray.encode.model_info import ModelInfo

SENTRAY_MODULE = "sentray.encode.st_module.SentrayEncoder"
ST_MODULES = ["sentence_transformers.base.modules.transformer.Transformer",
              "sentence_transformers.sentence_transformer.modules.pooling.Pooling"]
TEXTS = ["A man is playing a guitar.", "Stocks fell sharply on Monday after the report.",
         "hi", "The cat sat on the mat, and the dog watched it from the door all afternoon."]
# (pooling flag, head, module types in modules.json)
CASES = [("mean", None, ST_MODULES), ("cls_before_pooler", None, ST_MODULES),
         ("ditto", "1-2", [SENTRAY_MODULE]), ("ditto_last", "0-3", [SENTRAY_MODULE])]


def sentence_transformer(folder: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)


@pytest.mark.parametrize(("pooling", "head", "modules"), CASES)
def test_evaluate_export_loads_in_sentence_transformers_and_back_in_sentray(
        tmp_path, tiny_model_dir, data_dir, pooling, head, modules):
    """`jobs/evaluate.py --export-st DIR`: sentence-transformers encodes as sentray's encoder
    does, and `jobs/evaluate.py --model DIR` (no pooling given) scores the same table."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder

    evaluate = load_job("evaluate")
    flags = ["--tasks", "STSB,SICK-R", "--max-pairs", "30", "--data-dir", str(data_dir)]
    original = evaluate.main(["--model", str(tiny_model_dir), "--pooling", pooling,
                              *(["--head", head] if head else []), "--export-st",
                              str(tmp_path / "st"), "--out", str(tmp_path / "a"), *flags])
    assert [m["type"] for m in json.loads((tmp_path / "st" / "modules.json").read_text())] == (
        modules)
    reloaded = evaluate.main(["--model", str(tmp_path / "st"), "--out", str(tmp_path / "b"),
                              *flags])
    # the same weights through the same code in one process: equal up to float rounding
    assert reloaded == pytest.approx(original, abs=1e-6)

    expected = SentenceEncoder(EncoderConfig(model=str(tiny_model_dir), pooling=pooling,
                                             head=head, device="cpu")).encode(TEXTS)
    got = sentence_transformer(tmp_path / "st").encode(TEXTS)
    # sentence-transformers pads the whole list as one batch, sentray by length: padding
    # changes the float rounding of the same sums, not the values beyond 1e-5
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_training_export_makes_a_ditto_model_loadable(tmp_path, tiny_model_dir):
    """jobs/train.py's OUTPUT/best-st for a Ditto run is `save_model_directory` with what the
    run records: sentence-transformers loads it through SentrayEncoder, at its max_length, and
    sentray.json keeps the records."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder

    expected = SentenceEncoder(EncoderConfig(model=str(tiny_model_dir), pooling="ditto",
                                             head="1-0", max_length=16, device="cpu"))
    target = save_model_directory(expected, tmp_path / "best-st",
                                  extra={"objective": "sifter", "step": 7})
    assert ModelInfo.read(str(target)) == ModelInfo("ditto", "1-0", 16,
                                                    {"objective": "sifter", "step": 7})
    model = sentence_transformer(target)
    assert model.max_seq_length == 16
    np.testing.assert_allclose(model.encode(TEXTS), expected.encode(TEXTS), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.ray
def test_embed_job_and_sentence_transformers_agree_on_an_exported_ditto_model(
        ray_cluster, tmp_path, tiny_model_dir):
    """jobs/embed.py --model DIR (its pooling and head from DIR) and SentenceTransformer(DIR)
    give the same Ditto embeddings."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder

    folder = save_model_directory(SentenceEncoder(EncoderConfig(
        model=str(tiny_model_dir), pooling="ditto", head="1-2", device="cpu")), tmp_path / "st")
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    load_job("embed").main(["--input", str(corpus), "--output", str(tmp_path / "out"),
                            "--model", str(folder), "--actors", "1"])
    table = pads.dataset(tmp_path / "out", format="parquet").to_table().sort_by("row")
    embedded = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(embedded, sentence_transformer(folder).encode(TEXTS),
                               rtol=1e-5, atol=1e-6)  # batches differ (see above)


def test_a_sentray_folder_loads_without_trusting_the_folders_code(tmp_path, tiny_model_dir):
    """sentence-transformers refuses a Ditto folder without trust_remote_code (a flag that
    trusts any class a folder names); `load_sentence_transformer` builds sentray's own module
    from the installed package and refuses folders naming other classes."""
    from sentence_transformers import SentenceTransformer

    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.encode.st_module import load_sentence_transformer

    folder = save_model_directory(SentenceEncoder(EncoderConfig(
        model=str(tiny_model_dir), pooling="ditto", head="1-2", device="cpu")), tmp_path / "st")
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folder), device="cpu")
    ours = load_sentence_transformer(folder, device="cpu").encode(TEXTS)
    trusted = sentence_transformer(folder).encode(TEXTS)
    np.testing.assert_allclose(ours, trusted, rtol=1e-6, atol=1e-7)  # the same module, same code
    mean = save_model_directory(SentenceEncoder(EncoderConfig(
        model=str(tiny_model_dir), pooling="mean", device="cpu")), tmp_path / "mean")
    assert load_sentence_transformer(mean, device="cpu").encode(TEXTS).shape == (4, 32)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([{**modules[0], "type": "evil.Module"}]))
    with pytest.raises(ValueError, match="not a folder sentray wrote"):
        load_sentence_transformer(folder)
