"""Every sentray pooling, Ditto included, as a sentence-transformers directory
(sentray.encode.export, sentray.encode.st_module): `SentenceTransformer(DIR)` gives sentray's
embeddings, normalized as the source model's own pipeline normalizes them (as the embed job
writes them), and sentray's own jobs read the directory back with the same pooling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest
from conftest import encoder_of, load_job

from sentray.encode.export import save_model_directory
from sentray.encode.model_files import ModelInfo, own_normalize
from sentray.encode.model_lookup import resolve_model

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


def exported(model: str | Path, pooling: str, head: str | None, target: Path) -> Path:
    """`jobs/evaluate.py --model MODEL --pooling POOLING --head HEAD --export-st TARGET`."""
    from sentray.encode.config import EncoderConfig

    return save_model_directory(encoder_of(EncoderConfig(
        model=str(model), pooling=pooling, head=head, device="cpu")), target)


def embed_job_vectors(model: str | Path, pooling: str | None = None,
                      head: str | None = None) -> tuple[np.ndarray, bool]:
    """The vectors `jobs/embed.py --model MODEL [--pooling POOLING --head HEAD]` stores for
    TEXTS (its vector planned as the job plans it: --normalize from the model), through the
    job's own `EmbedBatch`, in-process; and whether they were normalized."""
    import pyarrow as pa

    from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
    from sentray.bulk_embedding.config import EmbedConfig
    from sentray.bulk_embedding.job import stored_vector
    from sentray.encode.config import EncoderConfig
    from sentray.precision.plan import plan_encoder

    config = EmbedConfig(encoder=EncoderConfig(model=str(model), pooling=pooling, head=head,
                                               device="cpu"))
    plan = plan_encoder(config.encoder)
    vector = stored_vector(config.vector, plan)
    n = len(TEXTS)
    table = EmbedBatch(EmbedSpec(plan, vector))(pa.table({
        "id": [str(i) for i in range(n)], "text": TEXTS, "read_error": [None] * n,
        "source": ["s"] * n, "row": list(range(n)), "source_rows": [n] * n}))
    return np.stack(table.column("embedding").to_pylist()), vector.normalize


@pytest.fixture(scope="module")
def normalizing_model_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny model as a sentence-transformers folder whose pipeline ends with Normalize
    (Transformer + mean Pooling + Normalize, as all-MiniLM-L6-v2's does)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Normalize,
        Pooling,
        Transformer,
    )

    folder = tmp_path_factory.mktemp("tiny-normalized")
    transformer = Transformer(str(tiny_model_dir))
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension()),
                                 Normalize()], device="cpu").save(str(folder),
                                                                  create_model_card=False)
    assert own_normalize(resolve_model(str(folder)))
    return folder


@pytest.mark.parametrize(("pooling", "head", "modules"), CASES)
def test_evaluate_export_loads_in_sentence_transformers_and_back_in_sentray(
        tmp_path, tiny_model_dir, data_dir, pooling, head, modules):
    """`jobs/evaluate.py --export-st DIR`: sentence-transformers encodes as sentray's encoder
    does, and `jobs/evaluate.py --model DIR` (no pooling given) scores the same table."""
    from sentray.encode.config import EncoderConfig

    evaluate = load_job("evaluate")
    flags = ["--tasks", "STSB,SICK-R", "--max-pairs", "30", "--data-dir", str(data_dir)]
    original = evaluate.main(["--model", str(tiny_model_dir), "--pooling", pooling,
                              *(["--head", head] if head else []), "--export-st",
                              str(tmp_path / "st"), "--output", str(tmp_path / "a"), *flags])
    assert [m["type"] for m in json.loads((tmp_path / "st" / "modules.json").read_text())] == (
        modules)
    reloaded = evaluate.main(["--model", str(tmp_path / "st"), "--output", str(tmp_path / "b"),
                              *flags])
    # the same weights through the same code in one process: equal up to float rounding
    assert reloaded == pytest.approx(original, abs=1e-6)

    expected = encoder_of(EncoderConfig(model=str(tiny_model_dir), pooling=pooling,
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

    expected = encoder_of(EncoderConfig(model=str(tiny_model_dir), pooling="ditto",
                                             head="1-0", max_length=16, device="cpu"))
    target = save_model_directory(expected, tmp_path / "best-st",
                                  extra={"objective": "sifter", "step": 7})
    assert ModelInfo.read(resolve_model(str(target))) == ModelInfo(
        "ditto", "1-0", 16, {"objective": "sifter", "step": 7, "normalize": False})
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

    folder = save_model_directory(encoder_of(EncoderConfig(
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
    from sentray.encode.st_module import load_sentence_transformer

    folder = save_model_directory(encoder_of(EncoderConfig(
        model=str(tiny_model_dir), pooling="ditto", head="1-2", device="cpu")), tmp_path / "st")
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folder), device="cpu")
    ours = load_sentence_transformer(folder, device="cpu").encode(TEXTS)
    trusted = sentence_transformer(folder).encode(TEXTS)
    np.testing.assert_allclose(ours, trusted, rtol=1e-6, atol=1e-7)  # the same module, same code
    mean = save_model_directory(encoder_of(EncoderConfig(
        model=str(tiny_model_dir), pooling="mean", device="cpu")), tmp_path / "mean")
    assert load_sentence_transformer(mean, device="cpu").encode(TEXTS).shape == (4, 32)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([{**modules[0], "type": "evil.Module"}]))
    with pytest.raises(ValueError, match="not a folder sentray wrote"):
        load_sentence_transformer(folder)


@pytest.mark.parametrize(("pooling", "head"), [("mean", None), ("cls_before_pooler", None),
                                               ("ditto", "1-2")])
def test_an_export_of_a_normalizing_model_gives_the_embed_jobs_unit_vectors(
        tmp_path, normalizing_model_dir, pooling, head):
    """The source model normalizes (its Normalize module), so `jobs/embed.py` on it stores unit
    vectors by default; its export with the same pooling and head ends with a Normalize module
    and records `normalize` in sentray.json, and gives those vectors to sentence-transformers,
    to sentray's loader without trust_remote_code, and to the embed job run on the export."""
    from sentray.encode.st_module import load_sentence_transformer

    expected, normalized = embed_job_vectors(normalizing_model_dir, pooling, head)
    assert normalized
    folder = exported(normalizing_model_dir, pooling, head, tmp_path / "st")
    assert json.loads((folder / "modules.json").read_text())[-1]["type"].endswith(".Normalize")
    assert ModelInfo.read(resolve_model(str(folder))).extra["normalize"] is True
    got = sentence_transformer(folder).encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # sentence-transformers pads the whole list as one batch, the embed job by length (and
    # normalizes in numpy, not torch): rounding of the same sums differs, not beyond 1e-5
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(load_sentence_transformer(folder, device="cpu").encode(TEXTS),
                               got, atol=1e-6)  # the same modules
    # jobs/embed.py --model EXPORT, nothing else given: its pooling, head and normalization
    again, normalized = embed_job_vectors(folder)
    assert normalized
    np.testing.assert_allclose(again, expected, atol=1e-6)  # the same batches, same code


def test_an_export_of_a_model_that_does_not_normalize_stays_unnormalized(
        tmp_path, tiny_model_dir):
    """No Normalize module in the source, so none in the export: sentence-transformers gives
    the embed job's raw pooled vectors (their norms far from 1), and sentray.json says so."""
    expected, normalized = embed_job_vectors(tiny_model_dir, "ditto", "1-2")
    assert not normalized
    folder = exported(tiny_model_dir, "ditto", "1-2", tmp_path / "st")
    assert [m["type"] for m in json.loads((folder / "modules.json").read_text())] == [
        SENTRAY_MODULE]
    assert ModelInfo.read(resolve_model(str(folder))).extra["normalize"] is False
    got = sentence_transformer(folder).encode(TEXTS)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)  # batches differ (above)
    assert not embed_job_vectors(folder)[1]


@pytest.mark.slow
def test_a_ditto_export_of_all_minilm_gives_the_embed_jobs_unit_vectors(tmp_path):
    """Issue 33: `jobs/evaluate.py --pooling ditto --head 0-8 --export-st DIR` on the packaged
    all-MiniLM-L6-v2 (which ends with Normalize) gives the unit vectors `jobs/embed.py --pooling
    ditto --head 0-8` writes, not vectors of norm ~10."""
    expected, normalized = embed_job_vectors("all-MiniLM-L6-v2", "ditto", "0-8")
    assert normalized
    got = sentence_transformer(exported("all-MiniLM-L6-v2", "ditto", "0-8",
                                        tmp_path / "st")).encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(got, expected, atol=1e-5)  # batches differ (above)
