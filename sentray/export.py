"""A model directory that both sentray and sentence-transformers load, for every pooling.

`write_metadata` turns a folder holding a Hugging Face model and tokenizer into one:
`sentray.json` (pooling, Ditto head, max_length: what sentray's loaders read) and the
sentence-transformers files (`modules.json`, ...). For mean and [CLS] those name
sentence-transformers' own Transformer + Pooling modules; for Ditto and the other sentray
poolings the one module `sentray.st_module.SentrayEncoder`. Used by `jobs/evaluate.py
--export-st` (`save_directory`) and by jobs/train.py's export (OUTPUT/best-st).
"""

from __future__ import annotations

import json
from pathlib import Path

from sentray import models

MODULE_TYPE = "sentray.st_module.SentrayEncoder"

# sentray poolings that sentence-transformers' own Pooling module computes the same way
ST_POOLING = {"cls_before_pooler": "cls_token", "last_avg": "mean_tokens"}
ST_POOLING_FLAGS = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                    "weightedmean_tokens", "lasttoken")


def write_metadata(target: Path, info: dict) -> None:
    """Make `target`, which holds a Hugging Face model and tokenizer, a sentence-transformers
    directory for `info` (pooling, head, max_length, ...; also written as `sentray.json`, which
    sentray's loaders read): sentence-transformers' own Transformer + Pooling modules where they
    compute the pooling (mean, [CLS]), so no sentray code is needed to load it; otherwise (Ditto
    and the other sentray poolings) one `SentrayEncoder` module, which needs sentray installed
    and `trust_remote_code=True` (sentence-transformers asks it of any module class not its own;
    the code comes from the installed package, not from the directory)."""
    (target / models.SENTRAY_MODEL_INFO).write_text(json.dumps(info, indent=1))
    (target / "config_sentence_transformers.json").write_text(json.dumps(
        {"similarity_fn_name": "cosine", "prompts": {}, "default_prompt_name": None}, indent=1))
    mode = ST_POOLING.get(info["pooling"])
    if mode is None:
        (target / "modules.json").write_text(json.dumps(
            [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}], indent=1))
        return
    (target / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"}], indent=1))
    (target / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": info["max_length"], "do_lower_case": False}, indent=1))
    hidden = json.loads((target / "config.json").read_text())["hidden_size"]
    (target / "1_Pooling").mkdir(exist_ok=True)
    (target / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": hidden,
         **{f"pooling_mode_{flag}": flag == mode for flag in ST_POOLING_FLAGS},
         "include_prompt": True}, indent=1))


def save_directory(encoder, target: str | Path, **info) -> Path:
    """Write `encoder` (a `SentenceEncoder`: any model, pooling and head) as such a directory;
    `info` adds to what `sentray.json` records."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    encoder.model.save_pretrained(target)
    encoder.tokenizer.save_pretrained(target)
    write_metadata(target, {"pooling": encoder.config.pooling, "head": encoder.config.head,
                            "max_length": encoder.max_length, **info})
    return target
