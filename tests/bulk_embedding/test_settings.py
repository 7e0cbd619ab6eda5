"""A rerun never mixes two configurations: every setting a stored vector depends on is recorded,
and a rerun into the same output that changes any of them stops before Ray starts (and before
an int8 code book is measured), naming the setting with both values, and touches nothing;
a rerun whose settings leave every vector the same (the model by another name, --format text
over text files, --truncate-dim of the whole dimension) is not refused."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from conftest import make_tiny_bert

from sentray.bulk_embedding import job as embed_job
from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import EmbedConfig, VectorConfig
from sentray.bulk_embedding.job import run_embedding, stored_vector
from sentray.bulk_embedding.output import embed_settings
from sentray.corpus import output_records
from sentray.corpus.sources import CorpusConfig, Source, input_settings
from sentray.encode.config import EncoderConfig
from sentray.kit import storage
from sentray.kit.settings_record import write_settings
from sentray.precision.plan import plan_encoder


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model_dir, tokenizer):
    """The tiny model, a copy with other weights (same files, other bytes) and a copy under
    another name."""
    root = tmp_path_factory.mktemp("models")
    other_weights = root / "weights"
    shutil.copytree(tiny_model_dir, other_weights)
    make_tiny_bert(tokenizer.vocab_size, seed=1).save_pretrained(other_weights)
    renamed = root / "renamed"
    shutil.copytree(tiny_model_dir, renamed)
    return {"base": str(tiny_model_dir), "weights": str(other_weights), "renamed": str(renamed)}


# The input as the settings see it: a text file read as its suffix says.
SOURCES = [Source("/in/a.txt", "/in/a.txt", None, "a.txt", "text")]


def base_config(model: str, output: str) -> EmbedConfig:
    return EmbedConfig(corpus=CorpusConfig(input="unused.txt"), output=output,
                       encoder=EncoderConfig(model=model, pooling="ditto", head="0-1",
                                             max_length=12),
                       vector=VectorConfig(normalize=False, long_text="chunk", max_windows=8))


def variants(models) -> dict[str, callable]:
    """setting -> a change of the config that changes only that setting (and what follows)."""
    def encoder(**kw):
        return lambda c: dataclasses.replace(c, encoder=dataclasses.replace(c.encoder, **kw))

    def vector(**kw):
        return lambda c: dataclasses.replace(c, vector=dataclasses.replace(c.vector, **kw))

    def corpus(**kw):
        return lambda c: dataclasses.replace(c, corpus=dataclasses.replace(c.corpus, **kw))

    return {
        "model_files": encoder(model=models["weights"]),
        "pooling": encoder(pooling="last_avg", head=None),
        "head": encoder(head="1-2"),
        "max_length": encoder(max_length=16),
        "precision": encoder(precision="bf16"),
        "truncate_dim": vector(truncate_dim=16),
        "normalize": vector(normalize=True),
        "output_dtype": vector(output_dtype="float16"),
        "long_text": vector(long_text="truncate"),
        "chunk_overlap": vector(chunk_overlap=2),
        "max_windows": vector(max_windows=4),
        "text_column": corpus(text_column="body"),
        "id_column": corpus(id_column="key"),
    }


def settings_of(config: EmbedConfig, ranges=None, sources=SOURCES) -> dict:
    """The settings the job records for `config`: its encoder planned, its vector for the
    plan."""
    plan = plan_encoder(config.encoder)
    return embed_settings(plan, stored_vector(config.vector, plan),
                          input_settings(config.corpus, sources), ranges)


def stored_output(tmp_path, settings: dict) -> storage.Location:
    """An output folder that holds one part and the settings it was made with."""
    output = storage.locate(str(tmp_path / "out"))
    (tmp_path / "out" / "a-123").mkdir(parents=True)
    (tmp_path / "out" / "a-123" / "part-000000000000-000000000010-of-000000000010.parquet"
     ).write_bytes(b"PAR1")
    write_settings(output, settings, "embed")
    return output


def test_every_setting_the_vectors_depend_on_is_recorded(models, tmp_path):
    settings = settings_of(base_config(models["base"], str(tmp_path)))
    assert set(variants(models)) | {"dimension", "quantization_ranges", "model",
                                    "format"} <= set(settings)


@pytest.mark.parametrize("key", ["model_files", "pooling", "head", "max_length",
                                 "precision", "truncate_dim", "normalize", "output_dtype",
                                 "long_text", "chunk_overlap", "max_windows", "text_column",
                                 "id_column"])
def test_a_rerun_that_changes_a_setting_is_refused_naming_it(models, tmp_path, key):
    base = base_config(models["base"], str(tmp_path / "out"))
    stored = settings_of(base)
    output = stored_output(tmp_path, stored)
    changed = settings_of(variants(models)[key](base))
    assert changed[key] != stored[key]
    with pytest.raises(ValueError) as info:
        output_records.check_settings([output], changed)
    message = str(info.value)
    assert f"{key}: {stored[key]!r} (stored) != {changed[key]!r} (this run)" in message
    assert "--overwrite" in message
    output_records.check_settings([output], stored)  # the same settings: a resume


def test_other_quantization_ranges_are_refused(models, tmp_path):
    import numpy as np

    base = base_config(models["base"], str(tmp_path / "out"))
    base = dataclasses.replace(base, vector=dataclasses.replace(base.vector, output_dtype="int8"))
    ranges = vectors.CodeBook(np.zeros(32, np.float32), np.ones(32, np.float32))
    output = stored_output(tmp_path, settings_of(base, ranges, SOURCES))
    other = vectors.CodeBook(np.zeros(32, np.float32), np.full(32, 2.0, np.float32))
    with pytest.raises(ValueError, match="quantization_ranges"):
        output_records.check_settings([output], settings_of(base, other, SOURCES))


@pytest.mark.parametrize("change", ["model by another name", "format text over text files",
                                    "truncate_dim of the whole dimension"])
def test_settings_that_leave_every_vector_the_same_are_not_refused(models, tmp_path, change):
    base = base_config(models["base"], str(tmp_path / "out"))
    stored = settings_of(base)
    output = stored_output(tmp_path, stored)
    other = {
        # a copy of the same files in another folder: the same weights, another string
        "model by another name": lambda c: dataclasses.replace(
            c, encoder=dataclasses.replace(c.encoder, model=models["renamed"])),
        "format text over text files": lambda c: dataclasses.replace(
            c, corpus=dataclasses.replace(c.corpus, format="text")),
        "truncate_dim of the whole dimension": lambda c: dataclasses.replace(
            c, vector=dataclasses.replace(c.vector, truncate_dim=32)),  # the tiny model's
    }[change](base)
    settings = settings_of(other, None, SOURCES)
    output_records.check_settings([output], settings)  # not refused
    assert output_records.RunClaim(output, settings).digest == output_records.RunClaim(
        output, stored).digest  # and a run beside it with either is the same run


def test_a_format_that_overrides_the_suffix_is_a_setting(models, tmp_path):
    """A .dat file read as text, then as Parquet: other rows, other vectors."""
    base = base_config(models["base"], str(tmp_path / "out"))
    as_text = dataclasses.replace(base, corpus=dataclasses.replace(base.corpus, format="text"))
    as_parquet = dataclasses.replace(base, corpus=dataclasses.replace(base.corpus,
                                                                      format="parquet"))
    data = [Source("/in/a.dat", "/in/a.dat", None, "a.dat", "text")]
    stored = settings_of(as_text, None, data)
    assert stored["format"] == "text"
    output = stored_output(tmp_path, stored)
    parquet = [dataclasses.replace(data[0], format="parquet")]
    with pytest.raises(ValueError, match="format: 'text' \\(stored\\) != 'parquet'"):
        output_records.check_settings([output], settings_of(as_parquet, None, parquet))


def test_an_int8_rerun_is_refused_before_its_code_book_is_measured(models, tmp_path, monkeypatch):
    """Measuring the code book embeds code_book_rows texts (minutes on a CPU): a rerun that
    will be refused is refused first."""

    corpus = tmp_path / "in.txt"
    corpus.write_text("One sentence.\nTwo sentences.\nThree of them.\n")
    config = dataclasses.replace(base_config(models["base"], str(tmp_path / "out")),
                                 corpus=CorpusConfig(input=str(corpus)))
    config = dataclasses.replace(config, vector=dataclasses.replace(config.vector,
                                                                    output_dtype="int8"))
    sources = [Source(str(corpus), str(corpus), None, "in.txt", "text")]
    stored_output(tmp_path, settings_of(config, None, sources))

    def must_not_run(*args, **kwargs):
        raise AssertionError("a code book measured for a run that is refused")

    monkeypatch.setattr(embed_job, "measure_code_book", must_not_run)
    changed = variants(models)["long_text"](config)
    with pytest.raises(ValueError, match="long_text: 'chunk' \\(stored\\) != 'truncate'"):
        run_embedding(changed)


def test_the_job_refuses_before_ray_starts_and_touches_nothing(models, tmp_path, monkeypatch):
    import ray

    corpus = tmp_path / "in.txt"
    corpus.write_text("One sentence.\nTwo sentences.\n")
    config = dataclasses.replace(base_config(models["base"], str(tmp_path / "out")),
                                 corpus=CorpusConfig(input=str(corpus)))
    sources = [Source(str(corpus), str(corpus), None, "in.txt", "text")]
    output = stored_output(tmp_path, settings_of(config, None, sources))
    before = sorted((p, p.stat().st_mtime_ns) for p in (tmp_path / "out").rglob("*"))

    def must_not_run(*args, **kwargs):
        raise AssertionError("Ray started for a run that mixes settings")

    monkeypatch.setattr(ray, "init", must_not_run)
    changed = variants(models)["pooling"](config)
    with pytest.raises(ValueError, match="pooling: 'ditto' \\(stored\\) != 'last_avg'"):
        run_embedding(changed)
    assert sorted((p, p.stat().st_mtime_ns) for p in (tmp_path / "out").rglob("*")) == before
    assert output  # the folder is still there, as it was


def test_overwrite_deletes_only_the_jobs_files(tmp_path):
    out = tmp_path / "out"
    output = stored_output(tmp_path, {"pooling": "x"})
    (out / "_summary.json").write_text("{}")
    (out / "_runs").mkdir()
    (out / "_runs" / "r.json").write_text("{}")
    (out / "notes.txt").write_text("mine")  # the user's own file
    (out / "a-123" / "README").write_text("mine too")
    assert output_records.remove_job_files([output]) == 3  # the claims stay (test_output_records)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "_runs", "_runs/r.json", "a-123", "a-123/README", "notes.txt"]
