"""Model folders that are not what they claim stop a job when it plans its encoder, before Ray
starts or anything is written, with a message naming the file and the problem."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import load_job


@pytest.fixture
def model(tmp_path, tiny_model_dir):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    return folder


def refused(folder, exit_message, job: str = "embed") -> str:
    output = folder.parent / f"{job}-output"
    with pytest.raises(SystemExit) as info:  # the plan comes first: no Ray yet
        load_job(job).main(["--model", str(folder), "--output", str(output)])
    assert not output.exists() or not any(output.iterdir())  # nothing written
    return exit_message(info)


def test_a_missing_config_is_named(model, exit_message):
    (model / "config.json").unlink()
    assert "has no config.json" in refused(model, exit_message)
    (model / "config.json").write_text("{not json")
    assert "config.json is not JSON" in refused(model, exit_message, "evaluate")


def test_truncated_weights_are_named(model, exit_message):
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    message = refused(model, exit_message)
    assert "model.safetensors is cut short" in message and "its header says" in message
    weights.unlink()
    assert "has no weights" in refused(model, exit_message, "train")


def test_a_tokenizer_that_is_not_the_models_is_named(model, exit_message):
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "vocab_size": 1000}))
    message = refused(model, exit_message)
    assert "tokenizer has 30522 tokens" in message and "1000 embeddings" in message


def test_a_bad_sentray_json_is_named(model, exit_message):
    (model / "sentray.json").write_text(json.dumps({"pooling": "maxpool"}))
    message = refused(model, exit_message)
    assert "sentray.json" in message and "unknown pooling 'maxpool'" in message
    (model / "sentray.json").write_text(json.dumps({"pooling": "ditto", "head": "7-0"}))
    message = refused(model, exit_message)
    assert "sentray.json: head '7-0' is outside the model" in message
