"""Shared fixtures. The environment lines run before anything imports Ray: a local cluster must
bind 127.0.0.1 only and never probe cloud metadata addresses (see README, "Ray on loopback")."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_bootstrap = Path.home() / "ray_bootstrap_config.yaml"
if not _bootstrap.exists():  # its absence makes Ray's dashboard probe cloud metadata endpoints
    _bootstrap.write_text("{}\n")

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The SentEval folder: $SENTRAY_DATA_DIR, else ../shared/data/senteval beside the repo."""
    path = Path(os.environ.get("SENTRAY_DATA_DIR", ROOT.parent / "shared" / "data" / "senteval"))
    if not (path / "STS").is_dir():
        pytest.fail(f"STS data not found at {path}: set SENTRAY_DATA_DIR to SentEval's "
                    "data/downstream folder")
    return path


@pytest.fixture(scope="session")
def brown_corpus() -> Path:
    path = ROOT.parent / "shared" / "data" / "corpus" / "brown.txt"
    if not path.is_file():
        pytest.fail(f"Brown corpus not found at {path}")
    return path


@pytest.fixture(scope="session")
def tokenizer():
    """The packaged model's tokenizer (local, no network)."""
    from sentray.models import load_tokenizer

    return load_tokenizer("all-MiniLM-L6-v2")


def make_tiny_bert(vocab_size: int, *, seed: int = 0, model_type: str = "bert",
                   attn_implementation: str | None = None):
    """A 2-layer, hidden-32, 4-head random encoder built in-process."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(seed)
    config = AutoConfig.for_model(
        model_type, vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = AutoModel.from_config(config, attn_implementation=attn_implementation)
    return model.eval()


@pytest.fixture()
def tiny_bert(tokenizer):
    return make_tiny_bert(tokenizer.vocab_size)


@pytest.fixture()
def ray_cluster():
    """A real local Ray cluster on loopback, with more logical CPUs than actors (Ray Data's read
    tasks need free CPUs besides the actor pool). Started once and shared; started again if a
    test shut it down (the `ray job submit` test stops every Ray process on the machine)."""
    import ray

    from sentray.runtime import init_ray

    if not ray.is_initialized():
        init_ray(num_cpus=4)
    return ray


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A saved tiny random encoder with the packaged tokenizer, loadable by path (Ray workers
    load models by name)."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    make_tiny_bert(tokenizer.vocab_size).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
