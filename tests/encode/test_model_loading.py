"""Model resolution: packaged short names offline, local folders, clear errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentray.encode.model_files import default_max_length, own_pooling
from sentray.encode.model_loading import load_config, load_tokenizer
from sentray.encode.model_lookup import resolve_model


def test_packaged_name_resolves_to_installed_directory():
    resolved = resolve_model("all-MiniLM-L6-v2")
    assert resolved.is_local and (Path(resolved.path) / "model.safetensors").is_file()
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2").path == resolved.path
    assert load_config(resolve_model("all-MiniLM-L6-v2")).num_hidden_layers == 6


def test_local_directory_and_hub_id(tmp_path):
    assert resolve_model(str(tmp_path)).path == str(tmp_path.resolve())
    hub = resolve_model("bert-base-uncased")
    assert not hub.is_local and hub.path == "bert-base-uncased"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing" / "model"))
    with pytest.raises(ValueError, match="packaged models"):
        resolve_model("")


def test_unknown_model_without_hub_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="not a packaged model .*HF_HUB_OFFLINE is set"):
        load_config(resolve_model("no-such-org/no-such-model-xyz"))
    with pytest.raises(OSError, match="could not load model 'no-such-org/no-such-model-xyz'"):
        load_tokenizer(resolve_model("no-such-org/no-such-model-xyz"))


def test_max_length_comes_from_the_sentence_transformers_config(tiny_model_dir):
    tokenizer = load_tokenizer(resolve_model("all-MiniLM-L6-v2"))
    assert default_max_length(resolve_model("all-MiniLM-L6-v2"), tokenizer) == 256
    # a model with fewer positions than its tokenizer's limit (128 vs 512) reads at most its
    # positions, as sentence-transformers caps it (more would index past the position table)
    assert default_max_length(resolve_model(str(tiny_model_dir)), tokenizer) == 128


def test_a_sentray_export_records_the_one_max_length_and_pooling(tmp_path):
    """sentray.json's max_length wins over the tokenizer's limit (it was written and never
    read: exported models encoded at 512 while their sentence-transformers copy used 256)."""
    tokenizer = load_tokenizer(resolve_model("all-MiniLM-L6-v2"))
    folder = tmp_path / "export"
    folder.mkdir()
    assert default_max_length(resolve_model(str(folder)), tokenizer) == 512  # the tokenizer's limit
    assert own_pooling(resolve_model(str(folder))) is None  # a raw encoder declares no read-out
    (folder / "sentray.json").write_text('{"pooling": "last_avg", "max_length": 77}')
    assert default_max_length(resolve_model(str(folder)), tokenizer) == 77
    assert own_pooling(resolve_model(str(folder))) == ("last_avg", None)
    assert own_pooling(resolve_model("all-MiniLM-L6-v2")) == ("mean", None)  # its 1_Pooling


def test_a_hub_model_without_network_declares_nothing(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert own_pooling(resolve_model("no-such-org/no-such-model-xyz")) is None
