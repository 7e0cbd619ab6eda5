"""The model SIFTER-SimCSE and SimCSE train: encoder + pooling (+ SimCSE's train-time MLP), and
the encoding of a step's views in one forward call."""

from __future__ import annotations

import torch
from torch import nn

from sentray import models
from sentray.encoder import embed_with
from sentray.pooling import DITTO_POOLINGS, canonical_pooling, parse_head
from sentray.train_config import TrainConfig
from sentray.views import ViewGroup

# poolings that leave encoder layers out of the loss (DDP must be told)
PARTIAL_POOLINGS = frozenset({"static_avg", "ditto_static"})


class ContrastiveModel(nn.Module):
    """Encoder + pooling (+ the train-time MLP): padded batch (B, T) -> embeddings (B, D)."""

    def __init__(self, encoder: nn.Module, pooling: str, *, head: str | None = None,
                 mlp: bool = True) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = canonical_pooling(pooling)
        self.layer_head = None
        if self.pooling in DITTO_POOLINGS:
            if head is None:
                raise ValueError(f"pooling {self.pooling!r} needs a head (L-H)")
            self.layer_head = parse_head(head)
        self.fast_ditto = self.layer_head is not None and models.is_bert_family(encoder.config)
        size = encoder.config.hidden_size
        # SimCSE's MLPLayer: dense + tanh over the pooled vector; dropped for evaluation/export.
        self.mlp = nn.Sequential(nn.Linear(size, size), nn.Tanh()) if mlp else None
        pooler = getattr(encoder, "pooler", None)
        if pooler is not None and self.pooling != "cls":
            pooler.requires_grad_(False)  # not in the loss; DDP rejects parameters without grads

    def forward(self, input_ids: torch.Tensor | list[torch.Tensor],
                attention_mask: torch.Tensor | list[torch.Tensor]
                ) -> torch.Tensor | list[torch.Tensor]:
        """(B, T) ids and mask -> (B, D); or lists of them (groups padded apart, such as SIFTER's
        longer Y) -> a list of (B_g, D), all in one forward call as DDP needs."""
        if isinstance(input_ids, (list, tuple)):
            return [self(ids, mask) for ids, mask in zip(input_ids, attention_mask, strict=True)]
        pooled = embed_with(self.encoder, input_ids, attention_mask, pooling=self.pooling,
                            layer_head=self.layer_head, fast_ditto=self.fast_ditto)  # (B, D)
        return self.mlp(pooled) if self.mlp is not None else pooled


def encode_views(model: nn.Module, groups: list[ViewGroup], views: tuple[str, ...],
                 rows: int, device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Embeddings (rows, D) of each view in `views` order, the groups in one forward call."""
    embeddings = model([g.tokens.input_ids.to(device) for g in groups],
                       [g.tokens.attention_mask.to(device) for g in groups])
    by_view = {view: view_rows
               for group, group_embeddings in zip(groups, embeddings, strict=True)
               for view, view_rows in zip(group.views, group_embeddings.split(rows), strict=True)}
    return [by_view[v] for v in views]


def build_model(config: TrainConfig, encoder_source: str | None = None) -> ContrastiveModel:
    """The model for `config`, its encoder loaded from `encoder_source` (a checkpoint's model
    folder) or the configured initial model, with the training dropout."""
    source = encoder_source or config.model
    needs_eager = (config.pooling in DITTO_POOLINGS
                   and not models.is_bert_family(models.load_config(source)))
    encoder = models.load_encoder(source, dropout=config.dropout,
                                  attn_implementation="eager" if needs_eager else None)
    return ContrastiveModel(encoder, config.pooling, head=config.head, mlp=config.mlp)


__all__ = ["PARTIAL_POOLINGS", "ContrastiveModel", "build_model", "encode_views"]
