"""The poolings by name: the valid `--pooling` values with what each computes, their aliases,
the Ditto poolings and the heads Ditto's official code uses per model, the parsing of a head
`L-H`, the read-out a model takes when none or no head is asked for (`read_out`), and the
Ditto path a model's family takes (`decided_ditto_impl`). No torch here:
configs and plans decide against it before any model is loaded; the tensor functions are in
`sentray.encode.pooling`."""

from __future__ import annotations

from typing import Literal

# how Ditto's diagonal is computed: fast, one head recomputed on SDPA (BERT family); eager,
# the attention maps; auto: fast where it applies
DittoImpl = Literal["auto", "fast", "eager"]
# the encoders whose self-attention the fast Ditto path recomputes (BERT's layout)
BERT_FAMILY = frozenset({"bert", "roberta", "xlm-roberta", "electra", "camembert"})

# name -> description; the keys are the valid `pooling` values.
POOLINGS: dict[str, str] = {
    "cls": "the model's pooler output (BERT: dense + tanh over [CLS])",
    "cls_before_pooler": "the last layer's hidden state at the first token ([CLS])",
    "last_avg": "mean of the last layer over real tokens",
    "first_last_avg": "mean of (h^0 + h^L) / 2, h^0 the embedding-layer output (Ditto's first-last)",
    "layer1_last_avg": "mean of (h^1 + h^L) / 2, h^1 the first transformer layer (SimCSE's first-last)",
    # Ditto's official avg_static: the word-embedding table's rows, no transformer forward
    "static_avg": "mean of the word embeddings W[x_i] of the tokens (no transformer forward)",
    "embedding_layer_avg": "mean of the embedding-layer output h^0 (word + position + type, "
                           "LayerNorm)",
    "ditto": "Ditto: 1/2 sum_i A_ii (h^0_i + h^L_i) for head L-H",
    "ditto_last": "Ditto on the last layer: sum_i A_ii h^L_i",
    "ditto_static": "Ditto on the word embeddings: sum_i A_ii W[x_i] (Ditto's att_static)",
    "ditto_layer1_last": "Ditto with SimCSE's first-last: 1/2 sum_i A_ii (h^1_i + h^L_i)",
}
ALIASES: dict[str, str] = {"mean": "last_avg", "avg": "last_avg", "first_last": "first_last_avg"}
DITTO_POOLINGS = frozenset(name for name in POOLINGS if name.startswith("ditto"))
# poolings of the word-embedding table's rows, W[x_i] ([CLS]/[SEP] in, padding out), not of a
# layer's output; static_avg needs nothing else and skips the transformer altogether
WORD_EMBEDDING_POOLINGS = frozenset({"static_avg", "ditto_static"})

# Heads from Ditto's official code (layer-head, 0-based), used when no --head is given.
DITTO_DEFAULT_HEADS: dict[str, str] = {
    "bert-base-uncased": "0-9",
    "roberta-base": "0-4",
    "google/electra-base-discriminator": "0-10",
    "sentence-transformers/bert-base-nli-stsb-mean-tokens": "2-6",
}


def read_out(pooling: str | None, head: str | None, model: str, own_pooling: str | None,
             own_head: str | None, default_pooling: str = "last_avg") -> tuple[str, str | None]:
    """(pooling, head) a model is read out with: the `pooling` asked for, else the model's own
    read-out (`own_pooling`, with its Ditto head), else `default_pooling` (mean for encoding;
    the trainer's [CLS]); a Ditto pooling's `head` asked for, else the model's, else the one
    Ditto's official code uses for `model` (ValueError without one)."""
    if pooling is None:
        pooling = own_pooling or default_pooling
        head = head or (own_head if own_pooling else None)
    if pooling in DITTO_POOLINGS and head is None:
        head = DITTO_DEFAULT_HEADS.get(model)
        if head is None:
            raise ValueError(
                f"pooling {pooling!r} needs a head (--head L-H): no default is known for model "
                f"{model!r} (known: {DITTO_DEFAULT_HEADS}); find one with "
                "`python jobs/evaluate.py --search-head`")
    return pooling, head


def canonical_pooling(name: str) -> str:
    """The canonical pooling name for `name` (aliases resolved); ValueError if unknown."""
    name = ALIASES.get(name, name)
    if name not in POOLINGS:
        valid = sorted(POOLINGS) + sorted(ALIASES)
        raise ValueError(f"unknown pooling {name!r}; valid: {', '.join(valid)}")
    return name


def parse_head(head: str) -> tuple[int, int]:
    """'L-H' -> (layer, head), both 0-based."""
    parts = str(head).split("-")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"head {head!r} is not of the form L-H (0-based layer and head, e.g. 0-9)")
    return int(parts[0]), int(parts[1])




def use_fast_ditto(pooling: str, ditto_impl: DittoImpl, model_type: str | None) -> bool:
    """Whether a model of `model_type` pools `pooling` (a canonical name) with the fast Ditto
    path: a Ditto pooling on a BERT-family model unless `ditto_impl` is eager; ValueError for
    fast on another family."""
    if pooling not in DITTO_POOLINGS or ditto_impl == "eager":
        return False
    supported = model_type in BERT_FAMILY
    if ditto_impl == "fast" and not supported:
        raise ValueError(f"fast Ditto supports {sorted(BERT_FAMILY)} encoders, "
                         f"not {model_type!r}; use ditto_impl='eager'")
    return supported


def decided_ditto_impl(pooling: str, ditto_impl: DittoImpl, model_type: str | None) -> DittoImpl:
    """The Ditto path a model of `model_type` runs `pooling` on, decided once (in the plan):
    "fast" or "eager" for a Ditto pooling (`use_fast_ditto`), else `ditto_impl` as asked (it
    does not apply)."""
    if pooling not in DITTO_POOLINGS:
        return ditto_impl
    return "fast" if use_fast_ditto(pooling, ditto_impl, model_type) else "eager"
