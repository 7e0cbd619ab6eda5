"""`PooledEncoder`: a Hugging Face encoder and one sentray pooling as one `nn.Module`, padded
batch (B, T) -> sentence embeddings (B, D) in fp32. The one forward pass behind encoding
(`SentenceEncoder`), training (`ContrastiveModel`) and the sentence-transformers module
(`SentrayEncoder`).

Fast Ditto: for BERT-family encoders the model runs on SDPA (no attention maps at all) and only
the chosen head's diagonal is recomputed from that layer's input with its own query/key
weights. Other architectures run eagerly with `output_attentions=True` and read the head from
there (with SDPA, transformers 5 silently returns no attentions).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sentray.encode import model_loading, model_lookup
from sentray.encode.pooling import attention_diagonal, masked_mean, pool
from sentray.encode.pooling_catalog import (
    DITTO_POOLINGS,
    POOLINGS,
    WORD_EMBEDDING_POOLINGS,
    DittoImpl,
    parse_head,
    use_fast_ditto,
)


def attention_implementation(pooling: str, ditto_impl: DittoImpl) -> str | None:
    """"eager" where the pooling reads attention maps (a Ditto pooling on the eager path, as
    the plan decided it: `pooling_catalog.decided_ditto_impl`), else None (transformers'
    choice)."""
    assert pooling not in DITTO_POOLINGS or ditto_impl != "auto", "the plan decides the path"
    return "eager" if pooling in DITTO_POOLINGS and ditto_impl == "eager" else None


class PooledEncoder(nn.Module):
    """A Hugging Face encoder (`model`) read out by `pooling` (and a Ditto `head` L-H)."""

    def __init__(self, model: nn.Module, pooling: str, *, head: str | None = None,
                 ditto_impl: DittoImpl = "auto") -> None:
        super().__init__()
        if pooling not in POOLINGS:  # canonical names only: configs make them so, once
            raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(sorted(POOLINGS))} "
                             "(EncoderConfig also takes the aliases)")
        self.model = model
        self.pooling = pooling
        self.head = head
        self.layer_head = parse_head(head) if head else None
        ditto = self.pooling in DITTO_POOLINGS
        if ditto and self.layer_head is None:
            raise ValueError(f"pooling {self.pooling!r} needs a head (L-H)")
        config = model.config
        if self.layer_head is not None:
            layer, index = self.layer_head
            layers, heads = config.num_hidden_layers, config.num_attention_heads
            if not (layer < layers and index < heads):
                raise ValueError(f"head {head!r} is outside model {config._name_or_path!r}, "
                                 f"which has layers 0-{layers - 1} and heads 0-{heads - 1}")
        self.fast_ditto = use_fast_ditto(self.pooling, ditto_impl, config.model_type)
        if ditto and not self.fast_ditto and config._attn_implementation != "eager":
            model.set_attn_implementation("eager")

    @classmethod
    def load(cls, source: model_lookup.ResolvedModel, pooling: str, *, ditto_impl: DittoImpl,
             head: str | None = None, device: str | torch.device = "cpu",
             dropout: float | None = None) -> PooledEncoder:
        """The model at `source` loaded with the attention its pooling needs (`ditto_impl`: the
        path the plan decided), in eval mode on `device`."""
        attention = attention_implementation(pooling, ditto_impl)
        model = model_loading.load_encoder(source, attn_implementation=attention, device=device,
                                           dropout=dropout)
        return cls(model, pooling, head=head, ditto_impl=ditto_impl)

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def word_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The word-embedding table's rows of the tokens (B, T, D) in fp32: what the static
        poolings read (no position or type embeddings, no LayerNorm)."""
        return self.model.get_input_embeddings()(input_ids).float()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) ids and mask -> (B, D) fp32; differentiable. static_avg runs no transformer
        layer at all: a table lookup and a masked mean."""
        if self.pooling == "static_avg":
            return masked_mean(self.word_embeddings(input_ids), attention_mask)  # (B, D)
        ditto = self.pooling in DITTO_POOLINGS
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             output_hidden_states=True,
                             output_attentions=ditto and not self.fast_ditto)
        # Pooling runs in fp32 even under the caller's autocast (the diagonal's softmax needs it).
        with torch.autocast(input_ids.device.type, enabled=False):
            hidden = tuple(h.float() for h in outputs.hidden_states)  # L+1 x (B, T, D)
            diagonal = self.head_diagonal(outputs, attention_mask) if ditto else None
            pooler_output = getattr(outputs, "pooler_output", None)
            words = (self.word_embeddings(input_ids) if self.pooling in WORD_EMBEDDING_POOLINGS
                     else None)
            return pool(self.pooling, hidden, attention_mask, diagonal=diagonal,
                        pooler_output=None if pooler_output is None else pooler_output.float(),
                        word_embeddings=words)

    def head_diagonal(self, outputs, attention_mask: torch.Tensor) -> torch.Tensor:
        """A_ii (B, T) of the head: recomputed from that layer's input with the head's own
        query/key weights (fast, BERT family on SDPA), or read from eager `outputs.attentions`."""
        layer, head = self.layer_head
        if not self.fast_ditto:
            return outputs.attentions[layer][:, head].diagonal(dim1=-2, dim2=-1).float()
        attention = self.model.encoder.layer[layer].attention.self
        size = attention.attention_head_size
        rows = slice(head * size, (head + 1) * size)
        layer_input = outputs.hidden_states[layer]  # (B, T, D): the input of layer `layer`
        query = F.linear(layer_input, attention.query.weight[rows], attention.query.bias[rows])
        key = F.linear(layer_input, attention.key.weight[rows], attention.key.bias[rows])
        return attention_diagonal(query.float(), key.float(), attention_mask,
                                  scaling=1.0 / math.sqrt(size))  # (B, T)
