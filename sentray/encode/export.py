"""A model folder that both sentray and sentence-transformers load, for every pooling.

`save_model_directory` writes an encoder (any model, pooling and head) as the Hugging Face model
and tokenizer plus `sentray.json` (`ModelInfo`: what sentray's loaders read), and, by default,
sentence-transformers' own files, written by sentence-transformers' own `save`: its Transformer
+ Pooling modules where they compute the pooling (mean, [CLS]), so no sentray code is needed to
load it; otherwise (Ditto and the other sentray poolings) one `SentrayEncoder` module, which
needs sentray installed and `trust_remote_code=True` (sentence-transformers asks it of any
module class not its own; the code comes from the installed package, not from the folder).
A model whose own pipeline L2-normalizes (`own_normalize`: all-MiniLM-L6-v2 ends with a
Normalize module) keeps doing so: a sentence-transformers `Normalize` module after the pooling,
and `normalize` recorded in sentray.json, so the export's vectors are the ones `jobs/embed.py`
writes for the source model with the same pooling and head (its `--normalize` default is the
model's own), whoever loads it.
Used by `jobs/evaluate.py --export-st` and by training's export (OUTPUT/best, OUTPUT/best-st).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sentray.encode.encoder import SentenceEncoder
from sentray.encode.model_files import ModelInfo

# sentray poolings that sentence-transformers' own Pooling module computes the same way
ST_POOLING = {"cls_before_pooler": "cls", "last_avg": "mean"}


def save_model_directory(encoder: SentenceEncoder, target: str | Path, *,
                         extra: dict | None = None, sentence_transformers: bool = True) -> Path:
    """Write `encoder` into the folder `target`; `extra` adds to what sentray.json records.
    sentray.json's `normalize` is `extra`'s when given, else the source model's own (the plan's
    `normalize`). Without `sentence_transformers`: the Hugging Face files and sentray.json
    only."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    extra = dict(extra or {})
    # recorded either way: the choice is explicit, and sentray's loaders read it from here
    extra.setdefault("normalize", encoder.plan.normalize)
    info = ModelInfo(encoder.plan.pooling, encoder.plan.head, encoder.max_length, extra)
    if not sentence_transformers:
        encoder.model.save_pretrained(target)
        encoder.tokenizer.save_pretrained(target)
    else:
        _sentence_transformer(encoder, info).save(str(target), create_model_card=False)
    info.write(target)
    return target


def _sentence_transformer(encoder: SentenceEncoder, info: ModelInfo):
    """The encoder as a `SentenceTransformer`: its own modules where they compute the pooling,
    else sentray's `SentrayEncoder`; then `Normalize` when sentray.json says `normalize`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Normalize,
        Pooling,
        Transformer,
    )

    from sentray.encode.st_module import SentrayEncoder

    mode = ST_POOLING.get(info.pooling)
    if mode is None:
        modules = [SentrayEncoder(encoder, info.extra)]
    else:
        with tempfile.TemporaryDirectory() as staging:  # Transformer loads from a folder
            encoder.model.save_pretrained(staging)
            encoder.tokenizer.save_pretrained(staging)
            transformer = Transformer(staging, max_seq_length=info.max_length)
        modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)]
    if info.extra["normalize"]:
        modules.append(Normalize())  # (B, D) -> unit rows, as the embed job stores them
    return SentenceTransformer(modules=modules, device=str(encoder.device),
                               similarity_fn_name="cosine")
