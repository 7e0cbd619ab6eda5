"""Sentence pooling: the one implementation every job uses (evaluate, embed, train). The names,
aliases and known Ditto heads are in `sentray.encode.pooling_catalog`.

Pure tensor functions. Shapes: B sentences, T tokens, D hidden size, L layers, H heads.
`hidden_states` is the encoder's tuple of L+1 tensors (B, T, D): index 0 is the embedding-layer
output h^0, index l the output of transformer layer l, index L the last layer h^L.

Ditto (Chen et al., "Ditto: A Simple and Efficient Approach to Improve Sentence Embeddings"):
    e = 1/2 * sum_i A_ii (h^0_i + h^L_i)
with A the attention matrix of one head l-h. No division by N (the paper's footnote 2); padding
is excluded; special tokens ([CLS], [SEP]) are included, as in Ditto's official code. The
static poolings, as that code's avg_static and att_static, read the word-embedding table's rows
W[x_i] of the tokens (`word_embeddings` (B, T, D)), not the embedding layer's output h^0 (which
adds position and type embeddings and a LayerNorm: `embedding_layer_avg`).
"""

from __future__ import annotations

import torch


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
    hidden_states: tuple[torch.Tensor, ...] | None,
    mask: torch.Tensor,
    *,
    diagonal: torch.Tensor | None = None,
    pooler_output: torch.Tensor | None = None,
    word_embeddings: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sentence embeddings (B, D) from the encoder's hidden states (L+1 tensors (B, T, D)).

    `diagonal` (B, T) is A_ii of the chosen head, required for the Ditto poolings;
    `pooler_output` (B, D) is required for `cls`; `word_embeddings` (B, T, D), the table's
    rows of the tokens, for static_avg and ditto_static (static_avg needs nothing else:
    `hidden_states` may be None). `pooling` is a canonical name (a config made it one), never
    looked up again here, on every forward pass.
    """
    if pooling in ("static_avg", "ditto_static") and word_embeddings is None:
        raise ValueError(f"pooling {pooling!r} needs the tokens' word embeddings")
    if pooling == "static_avg":
        return masked_mean(word_embeddings, mask)
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
    if pooling == "embedding_layer_avg":
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
    return diagonal_weighted_sum(word_embeddings, diagonal, mask)
