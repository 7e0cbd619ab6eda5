"""Sentence pooling: the one implementation every job uses (evaluate, embed, train).

Pure tensor functions. Shapes: B sentences, T tokens, D hidden size, L layers, H heads.
`hidden_states` is the encoder's tuple of L+1 tensors (B, T, D): index 0 is the embedding-layer
output h^0, index l the output of transformer layer l, index L the last layer h^L.

Ditto (Chen et al., "Ditto: A Simple and Efficient Approach to Improve Sentence Embeddings"):
    e = 1/2 * sum_i A_ii (h^0_i + h^L_i)
with A the attention matrix of one head l-h. No division by N (the paper's footnote 2); padding
is excluded; special tokens ([CLS], [SEP]) are included, as in Ditto's official code.
"""

from __future__ import annotations

import torch

# name -> description; the keys are the valid `pooling` values.
POOLINGS: dict[str, str] = {
    "cls": "the model's pooler output (BERT: dense + tanh over [CLS])",
    "cls_before_pooler": "the last layer's hidden state at the first token ([CLS])",
    "last_avg": "mean of the last layer over real tokens",
    "first_last_avg": "mean of (h^0 + h^L) / 2, h^0 the embedding-layer output (Ditto's first-last)",
    "layer1_last_avg": "mean of (h^1 + h^L) / 2, h^1 the first transformer layer (SimCSE's first-last)",
    "static_avg": "mean of the embedding-layer output h^0",
    "ditto": "Ditto: 1/2 sum_i A_ii (h^0_i + h^L_i) for head L-H",
    "ditto_last": "Ditto on the last layer: sum_i A_ii h^L_i",
    "ditto_static": "Ditto on the embedding layer: sum_i A_ii h^0_i",
    "ditto_layer1_last": "Ditto with SimCSE's first-last: 1/2 sum_i A_ii (h^1_i + h^L_i)",
}
ALIASES: dict[str, str] = {"mean": "last_avg", "avg": "last_avg", "first_last": "first_last_avg"}
DITTO_POOLINGS = frozenset(name for name in POOLINGS if name.startswith("ditto"))

# Heads from Ditto's official code (layer-head, 0-based), used when no --head is given.
DITTO_DEFAULT_HEADS: dict[str, str] = {
    "bert-base-uncased": "0-9",
    "roberta-base": "0-4",
    "google/electra-base-discriminator": "0-10",
    "sentence-transformers/bert-base-nli-stsb-mean-tokens": "2-6",
}


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


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real tokens. hidden (B, T, D), mask (B, T) of 0/1 -> (B, D)."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def diagonal_weighted_sum(hidden: torch.Tensor, diagonal: torch.Tensor,
                          mask: torch.Tensor) -> torch.Tensor:
    """Ditto's sum_i A_ii h_i over real tokens. hidden (B, T, D), diagonal (B, T), mask (B, T)
    -> (B, D). No division by the length (Ditto, footnote 2)."""
    weights = (diagonal * mask.to(diagonal.dtype)).to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(dim=1)


def attention_diagonal(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor,
                       scaling: float) -> torch.Tensor:
    """A_ii of one head's softmax(q k^T * scaling) with padded keys masked out.

    query, key (B, T, d) for one head; mask (B, T) -> (B, T). Equals the diagonal of the
    eager attention probabilities, without materialising every head.
    """
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, T, T)
    key_is_pad = ~mask.bool().unsqueeze(1)  # (B, 1, T)
    scores = scores.masked_fill(key_is_pad, torch.finfo(scores.dtype).min)
    log_norm = torch.logsumexp(scores, dim=-1)  # (B, T)
    return torch.exp(scores.diagonal(dim1=-2, dim2=-1) - log_norm)  # (B, T)


def pool(
    pooling: str,
    hidden_states: tuple[torch.Tensor, ...],
    mask: torch.Tensor,
    *,
    diagonal: torch.Tensor | None = None,
    pooler_output: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sentence embeddings (B, D) from the encoder's hidden states (L+1 tensors (B, T, D)).

    `diagonal` (B, T) is A_ii of the chosen head, required for the Ditto poolings;
    `pooler_output` (B, D) is required for `cls`.
    """
    pooling = canonical_pooling(pooling)
    first, layer1, last = hidden_states[0], hidden_states[1], hidden_states[-1]
    if pooling == "cls":
        if pooler_output is None:
            raise ValueError("pooling 'cls' needs the model's pooler, which this model does not "
                             "have; use 'cls_before_pooler'")
        return pooler_output
    if pooling == "cls_before_pooler":
        return last[:, 0]
    if pooling == "last_avg":
        return masked_mean(last, mask)
    if pooling == "first_last_avg":
        return masked_mean((first + last) / 2.0, mask)
    if pooling == "layer1_last_avg":
        return masked_mean((layer1 + last) / 2.0, mask)
    if pooling == "static_avg":
        return masked_mean(first, mask)
    if diagonal is None:
        raise ValueError(f"pooling {pooling!r} needs the attention diagonal of a head")
    if pooling == "ditto":
        return diagonal_weighted_sum(first + last, diagonal, mask) / 2.0
    if pooling == "ditto_layer1_last":
        return diagonal_weighted_sum(layer1 + last, diagonal, mask) / 2.0
    if pooling == "ditto_last":
        return diagonal_weighted_sum(last, diagonal, mask)
    assert pooling == "ditto_static", pooling
    return diagonal_weighted_sum(first, diagonal, mask)
