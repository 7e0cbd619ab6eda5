"""A local model folder checked before Ray starts, every problem named with its file: no
config.json (or one that is not JSON), no weights, weights cut short (a safetensors file shorter
than its own header says, a PyTorch checkpoint that is not a whole zip), a tokenizer that does
not load or has more tokens than the model has embeddings, a `sentray.json` naming an unknown
pooling or a head outside the model. A Hub id is left to transformers, which checks what it
downloads."""

from __future__ import annotations

import functools
import json
import struct
import zipfile
from pathlib import Path

from sentray.encode.model_info import SENTRAY_MODEL_INFO, ModelInfo, model_facts
from sentray.encode.model_loading import ResolvedModel, load_tokenizer, resolve_model

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def located_model(name: str) -> ResolvedModel:
    """Model `name` looked up (`resolve_model`), checked, and a local model's facts read
    (`facts`): what a job's config does once, in its driver, before anything is loaded or any
    actor starts. A Hub id's facts are fetched when first asked for (still in the driver: the
    jobs' `resolved()` ask), so that a config naming one is built without the network."""
    model = resolve_model(name)
    check_model(model)
    if model.is_local:
        model_facts(model).read_all()  # read here, once: what travels to the actors has them
    return model


def check_model(model: ResolvedModel) -> None:
    """ValueError / FileNotFoundError naming the file and the problem, or nothing. A folder
    checked before in this process, unchanged since (file names, sizes, times), is not read
    again."""
    if not model.is_local:
        return
    folder = Path(model.path)
    stamp = tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                         for p in folder.iterdir() if p.is_file()))
    _check_folder(model, stamp)


@functools.lru_cache(maxsize=64)
def _check_folder(model: ResolvedModel, stamp: tuple) -> None:
    folder = Path(model.path)
    config = _read_config(folder)
    weights = [folder / f for f in WEIGHT_FILES if (folder / f).is_file()]
    if not weights:
        raise FileNotFoundError(f"model folder {folder} has no weights: none of "
                                f"{', '.join(WEIGHT_FILES)}")
    for path in weights:
        if path.suffix == ".safetensors":
            check_safetensors(path)
        elif path.suffix == ".bin" and not zipfile.is_zipfile(path):
            raise ValueError(f"{path} is not a whole PyTorch checkpoint (no zip directory at "
                             "its end: cut short?)")
    tokens = tokenizer_size(model)
    vocabulary = config.get("vocab_size")
    if vocabulary and tokens > vocabulary:
        raise ValueError(f"model folder {folder}: its tokenizer has {tokens} tokens but "
                         f"config.json gives the model {vocabulary} embeddings: the tokenizer is "
                         "not this model's")
    info = ModelInfo.read(model)  # sentray.json's pooling and head: checked as read
    if info is not None and info.head is not None:
        layer, head = (int(x) for x in info.head.split("-"))
        layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
        if layers and heads and not (layer < layers and head < heads):
            raise ValueError(f"{folder / SENTRAY_MODEL_INFO}: head {info.head!r} is outside the "
                             f"model, which has layers 0-{layers - 1} and heads 0-{heads - 1}")


def tokenizer_size(model: ResolvedModel) -> int:
    """Tokens of the folder's tokenizer, added ones included (ValueError if it does not load).
    A fast tokenizer's tokenizer.json is read by `tokenizers` alone: no transformers, no torch,
    so that a job's driver, which checks the model before Ray starts, imports neither (2 s of
    a 2-core machine's start-up, spent beside the actors' own imports)."""
    folder = Path(model.path)
    try:
        if (folder / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            for name in ("tokenizer_config.json", "special_tokens_map.json"):
                if (folder / name).is_file():
                    json.loads((folder / name).read_text())
            return Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size(
                with_added_tokens=True)
        return len(load_tokenizer(model))
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
