"""The contrastive trainer's optimisation, as the Hugging Face Trainer that SimCSE and
sentence-transformers train with: AdamW without decay on biases and LayerNorm weights,
transformers' own linear warm-up/decay schedule, and the clipped (AMP-aware) optimizer step."""

from __future__ import annotations

import torch
from torch import nn


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, weight decay on the matrices only: biases and
    LayerNorm weights (the 1-d parameters) are not decayed, as in the Hugging Face Trainer that
    SimCSE and sentence-transformers train with."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
         {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}], lr=lr)


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int,
                    warmup: int = 0) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0 over `warmup` steps, then linear decay to 0 at `total_steps`:
    `transformers.get_linear_schedule_with_warmup`, the Trainer's `linear` schedule that
    SimCSE trained with. The lr of the s-th optimizer step (0-based) is lr * s / warmup during
    the warm-up, then lr * (total - s) / (total - warmup)."""
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(optimizer, warmup, total_steps)


def clipped_step(model: nn.Module, loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler | None,
                 max_grad_norm: float | None) -> float:
    """Backward (under DDP: the workers' gradients averaged), clip the global gradient norm to
    `max_grad_norm` (after AMP unscaling), optimizer step. Returns the gradient norm before
    clipping (nan without one)."""
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    norm = float("nan")
    if max_grad_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return norm
