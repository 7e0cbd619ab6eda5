"""The model SIFTER-SimCSE and SimCSE train: the pooled encoder (`PooledEncoder`, the same one
every sentray job encodes with) plus SimCSE's train-time MLP, and the encoding of a step's
views in one forward call."""

from __future__ import annotations

import torch
from torch import nn

from sentray.contrastive.config import MlpInit
from sentray.contrastive.view_tokens import ViewGroup
from sentray.encode.config import DittoImpl
from sentray.encode.model_lookup import ResolvedModel
from sentray.encode.plan import EncoderPlan
from sentray.encode.pooled_model import PooledEncoder

# poolings that leave encoder layers out of the loss (DDP must be told)
PARTIAL_POOLINGS = frozenset({"static_avg", "embedding_layer_avg", "ditto_static"})


class ContrastiveModel(nn.Module):
    """Pooled encoder (+ the train-time MLP): padded batch (B, T) -> embeddings (B, D)."""

    def __init__(self, encoder: nn.Module, pooling: str, *, head: str | None = None,
                 mlp: bool = True, mlp_init: MlpInit = "simcse",
                 ditto_impl: DittoImpl = "auto") -> None:
        super().__init__()
        self.pooled = PooledEncoder(encoder, pooling, head=head, ditto_impl=ditto_impl)
        size = self.pooled.dimension
        # SimCSE's MLPLayer: dense + tanh over the pooled vector; dropped for evaluation/export.
        self.mlp = nn.Sequential(nn.Linear(size, size), nn.Tanh()) if mlp else None
        if self.mlp is not None and mlp_init == "simcse":
            init_like_simcse(self.mlp[0], getattr(encoder, "config", None))
        pooler = getattr(encoder, "pooler", None)
        if pooler is not None and self.pooled.pooling != "cls":
            pooler.requires_grad_(False)  # not in the loss; DDP rejects parameters without grads

    @property
    def encoder(self) -> nn.Module:
        """The Hugging Face encoder."""
        return self.pooled.model

    def forward(self, input_ids: torch.Tensor | list[torch.Tensor],
                attention_mask: torch.Tensor | list[torch.Tensor]
                ) -> torch.Tensor | list[torch.Tensor]:
        """(B, T) ids and mask -> (B, D); or lists of them (groups padded apart, such as SIFTER's
        longer Y) -> a list of (B_g, D), all in one forward call as DDP needs."""
        if isinstance(input_ids, (list, tuple)):
            return [self(ids, mask) for ids, mask in zip(input_ids, attention_mask, strict=True)]
        pooled = self.pooled(input_ids, attention_mask)  # (B, D)
        return self.mlp(pooled) if self.mlp is not None else pooled


def init_like_simcse(linear: nn.Linear, encoder_config: object | None) -> None:
    """SimCSE's MLP initialisation: its `cl_init` calls the model's `init_weights`, whose BERT
    `_init_weights` draws a Linear's weight from N(0, initializer_range) and zeroes its bias
    (PyTorch's default is Kaiming-uniform weights and a uniform bias)."""
    std = getattr(encoder_config, "initializer_range", None) or 0.02
    nn.init.normal_(linear.weight, mean=0.0, std=std)
    nn.init.zeros_(linear.bias)


def encode_views(model: nn.Module, groups: list[ViewGroup], views: tuple[str, ...],
                 rows: int, device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Embeddings (rows, D) of each view in `views` order, the groups in one forward call."""
    embeddings = model([g.tokens.input_ids.to(device) for g in groups],
                       [g.tokens.attention_mask.to(device) for g in groups])
    by_view = {view: view_rows
               for group, group_embeddings in zip(groups, embeddings, strict=True)
               for view, view_rows in zip(group.views, group_embeddings.split(rows), strict=True)}
    return [by_view[v] for v in views]


def build_model(plan: EncoderPlan, *, dropout: float | None, mlp: bool,
                mlp_init: MlpInit = "simcse", encoder_source: ResolvedModel | None = None
                ) -> ContrastiveModel:
    """The model a run trains: the encoder of `plan` (its model, pooling, head and Ditto
    path), its weights loaded from `encoder_source` (a checkpoint's model folder) or the plan's
    model, with the training `dropout`, and the train-time MLP."""
    pooled = PooledEncoder.load(encoder_source or plan.model, plan.pooling, head=plan.head,
                                ditto_impl=plan.ditto_impl, dropout=dropout)
    return ContrastiveModel(pooled.model, plan.pooling, head=plan.head, mlp=mlp,
                            mlp_init=mlp_init, ditto_impl=plan.ditto_impl)
