"""What a model folder says about itself: its read-out, its length limit, its dimension, and
`ModelFacts`, each of them read once (`model_facts`, kept on the `ResolvedModel`).

`sentray.json` is sentray's own record, written next to every model sentray exports (training's
OUTPUT/best and best-st, `jobs/evaluate.py --export-st`, the sentence-transformers module's
save): the pooling, the Ditto head, the encoding `max_length`, and what made it. `ModelInfo` is
its one reader and writer. A sentence-transformers model declares its pooling in
`1_Pooling/config.json` and its length in `sentence_bert_config.json`; both are read too.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentray.encode.model_loading import (
    ResolvedModel,
    config_value,
    model_file,
    tokenizer_max_length,
)
from sentray.encode.pooling_catalog import canonical_pooling, parse_head

SENTRAY_MODEL_INFO = "sentray.json"
# sentence-transformers pooling modes that map onto a sentray pooling
ST_POOLING_MODES = {"cls_token": "cls_before_pooler", "mean_tokens": "mean"}


@dataclass(frozen=True)
class ModelInfo:
    """The content of `sentray.json`."""

    pooling: str
    head: str | None = None  # Ditto head L-H
    max_length: int | None = None  # the length the model encodes at
    # what else the writer records (base_model, objective, step, stsb_dev, dev_spearman, ...)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "head": self.head, "max_length": self.max_length,
                **self.extra}

    def write(self, folder: str | Path) -> Path:
        path = Path(folder) / SENTRAY_MODEL_INFO
        path.write_text(json.dumps(self.as_dict(), indent=1))
        return path

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelInfo:
        values = dict(values)
        return cls(values.pop("pooling"), values.pop("head", None),
                   values.pop("max_length", None), values)

    @classmethod
    def read(cls, model: ResolvedModel) -> ModelInfo | None:
        """The `sentray.json` of `model` (a folder or a Hub id), or None without one."""
        path = model_file(model, SENTRAY_MODEL_INFO)
        if path is None:
            return None
        try:
            values = json.loads(path.read_text())
        except ValueError as exc:
            raise ValueError(f"{path} is not JSON: {exc}") from exc
        if not values.get("pooling"):
            return None
        try:
            canonical_pooling(values["pooling"])
            if values.get("head") is not None:
                parse_head(values["head"])
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc
        return cls.from_dict(values)


def own_pooling(model: ResolvedModel) -> tuple[str, str | None] | None:
    """The pooling (and Ditto head) the model declares as its own read-out: `sentray.json`,
    else a sentence-transformers `1_Pooling/config.json`; None for a model that declares none
    (a raw pretrained encoder such as bert-base-uncased)."""
    info = ModelInfo.read(model)
    if info is not None:
        return info.pooling, info.head
    st_pooling = model_file(model, "1_Pooling/config.json")
    if st_pooling is not None:
        modes = json.loads(st_pooling.read_text())
        for st_mode, pooling in ST_POOLING_MODES.items():
            if modes.get(f"pooling_mode_{st_mode}"):
                return pooling, None
    return None


def own_normalize(model: ResolvedModel) -> bool:
    """Whether the model's own pipeline L2-normalizes its embeddings: `normalize` in its
    sentray.json, else a sentence-transformers `modules.json` with a Normalize module (as
    all-MiniLM-L6-v2's ends); False for a model that declares neither."""
    info = ModelInfo.read(model)
    if info is not None and info.extra.get("normalize") is not None:
        return bool(info.extra["normalize"])
    modules = model_file(model, "modules.json")
    if modules is None:
        return False
    return any(str(module.get("type", "")).endswith("Normalize")
               for module in json.loads(modules.read_text()))


def default_max_length(model: ResolvedModel, tokenizer=None) -> int:
    """Truncation length: the `max_length` sentray.json records, else a sentence-transformers
    model's own `max_seq_length` (so numbers match its `encode`), else the tokenizer's limit
    capped at the model's positions (as sentence-transformers caps it) and at 512. Every loader
    of an exported model reads the same value: sentray through sentray.json,
    sentence-transformers through its own files."""
    info = ModelInfo.read(model)
    if info is not None and info.max_length:
        return int(info.max_length)
    st_config = model_file(model, "sentence_bert_config.json")
    if st_config is not None:
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    if tokenizer is None:  # read from the folder's files (sentray.encode.model_loading)
        limit = tokenizer_max_length(model) or 512
    else:
        limit = getattr(tokenizer, "model_max_length", 512) or 512
    try:
        positions = config_value(model, "max_position_embeddings")
    except (OSError, ValueError):  # no config.json: a tokenizer folder alone
        positions = None
    if positions and positions > 0:
        limit = min(limit, positions)
    return int(min(limit, 512))


class ModelFacts:
    """What the jobs need to know about a model, each fact read from its files once, when first
    asked for, and kept: the dimension, the length it encodes at, its own pooling (canonical)
    and Ditto head, whether it normalizes, its model type. `model_facts(model)` keeps one
    `ModelFacts` on the `ResolvedModel`, so the facts travel with it (pickled, to the actors);
    `located_model` reads a local model's all in the driver. Its fingerprint is
    `ResolvedModel.fingerprint` (the files hashed: once too)."""

    def __init__(self, model: ResolvedModel) -> None:
        self._model = model

    @functools.cached_property
    def _own(self) -> tuple[str | None, str | None]:
        own = own_pooling(self._model)
        return (canonical_pooling(own[0]), own[1]) if own else (None, None)

    @property
    def pooling(self) -> str | None:
        """Its own read-out, canonical (`own_pooling`); None: it declares none."""
        return self._own[0]

    @property
    def head(self) -> str | None:
        """The Ditto head of that read-out."""
        return self._own[1]

    @functools.cached_property
    def dimension(self) -> int:
        """hidden_size: the width of its token states and of a pooled vector."""
        dimension = config_value(self._model, "hidden_size")
        if dimension is None:
            raise ValueError(f"model {self._model.name!r}: its config gives no hidden_size")
        return int(dimension)

    @functools.cached_property
    def max_length(self) -> int:
        """The length it encodes at unless told (`default_max_length`)."""
        return default_max_length(self._model)

    @functools.cached_property
    def normalize(self) -> bool:
        """Whether its own pipeline L2-normalizes (`own_normalize`)."""
        return own_normalize(self._model)

    @functools.cached_property
    def model_type(self) -> str | None:
        """config.json's model_type (bert, mpnet, ...)."""
        return config_value(self._model, "model_type", kind=str)

    def read_all(self) -> ModelFacts:
        for fact in ("pooling", "dimension", "max_length", "normalize", "model_type"):
            getattr(self, fact)
        return self


def model_facts(model: ResolvedModel) -> ModelFacts:
    """The facts of `model`, kept on it: read from its files once per model object."""
    if model.facts_kept is None:
        model.keep_facts(ModelFacts(model))
    return model.facts_kept
