"""What a model's files say, and nothing that loads a model: the files of a model looked up and
checked whole (`sentray.encode.model_lookup`; `checked_model` adds the sentray.json head's
check), what they say about the model (`ModelInfo`, sentray's own
`sentray.json`; `ModelFacts`: its read-out, length, dimension, normalization, each read once and
kept on the `ResolvedModel`). `checked_model` is what a job's driver does with a model it located:
check its head, read its facts. No transformers or torch here, but for a Hub id (whose config and
tokenizer transformers reads, `sentray.encode.model_loading`).

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

from sentray.encode.model_lookup import ResolvedModel
from sentray.encode.pooling_catalog import canonical_pooling, parse_head


def _local_json(model: ResolvedModel, filename: str) -> dict | None:
    """A local model folder's JSON file as written (no transformers import, which costs a job's
    driver 2 s of start-up); None for a Hub id or a missing file."""
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
    from sentray.encode.model_loading import load_config

    return getattr(load_config(model), field, None)


def tokenizer_max_length(model: ResolvedModel) -> int | None:
    """The tokenizer's `model_max_length`: from a local folder's tokenizer_config.json (None
    when it has none, as transformers then has no limit), else from the tokenizer."""
    local = _local_json(model, "tokenizer_config.json")
    if local is not None:
        value = local.get("model_max_length")
        return int(value) if isinstance(value, (int, float)) else None
    from sentray.encode.model_loading import load_tokenizer

    return getattr(load_tokenizer(model), "model_max_length", None)


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
    if tokenizer is None:  # read from the folder's files (`tokenizer_max_length`)
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
    `checked_model` reads a local model's all in the driver. Its fingerprint is
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


def checked_model(model: ResolvedModel) -> ResolvedModel:
    """A model looked up and its files checked whole (`model_lookup.located_model`), its
    sentray.json head checked against the model, and a local model's facts read: what a job's
    plan does once, in its driver, before anything is loaded or any actor starts. A Hub id's
    facts are fetched when first asked for (still in the driver: the plan asks), so that a
    config naming one is built without the network."""
    info = ModelInfo.read(model) if model.is_local else None
    if info is not None and info.head is not None:
        layer, head = (int(x) for x in info.head.split("-"))
        config = _local_json(model, "config.json") or {}
        layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
        if layers and heads and not (layer < layers and head < heads):
            raise ValueError(f"{Path(model.path) / SENTRAY_MODEL_INFO}: head {info.head!r} is "
                             f"outside the model, which has layers 0-{layers - 1} and heads "
                             f"0-{heads - 1}")
    if model.is_local:
        model_facts(model).read_all()  # read here, once: what travels to the actors has them
    return model
