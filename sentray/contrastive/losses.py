"""Contrastive losses of SimCSE and SIFTER-SimCSE, as pure functions of sentence embeddings.

InfoNCE (SimCSE eq. 1): for anchors a_i and candidates b_j, with sim the cosine similarity,

    l_i = -log( exp(sim(a_i, b_i) / tau) / sum_j exp(sim(a_i, b_j) / tau) )

averaged over the batch; the other rows' candidates are the in-batch negatives.

SIFTER-SimCSE (SIFTER eq. 2): L = lambda_XY l(X, Y) + lambda_XZ l(X, Z) + lambda_YZ l(Y, Z), with Y
the sentence plus its backbone and Z the sentence without articles, conjunctions and pronouns.
An optional fourth term lambda_XX' l(X, X') adds SimCSE's own pair (X under a second dropout
mask; 0 in the paper), for ablations.

Under data parallelism the negatives come from every worker: `gather_with_local_grad` returns the
global batch with this worker's rows still attached to its graph, as SimCSE does. Every worker
then computes the same global loss, and its backward reaches only its own rows; DDP averages the
workers' gradients, so the loss is scaled by the world size before backward (`scale_for_ddp`) and
the averaged gradient equals the gradient of the global loss in a single process.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from sentray.contrastive.objectives import (
    OBJECTIVES,
    PAPER_WEIGHTS,
    SIFTER_PAIRS,
    Objective,
    SifterWeights,
)


def info_nce(anchors: torch.Tensor, candidates: torch.Tensor,
             temperature: float = 0.05) -> torch.Tensor:
    """Mean InfoNCE of anchors (N, D) against candidates (N, D); row i's positive is row i."""
    if anchors.shape != candidates.shape:
        raise ValueError(f"anchors {tuple(anchors.shape)} and candidates "
                         f"{tuple(candidates.shape)} must have the same shape")
    logits = F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T  # (N, N) cosine
    labels = torch.arange(len(anchors), device=anchors.device)
    return F.cross_entropy(logits / temperature, labels)


def sifter_loss(x: torch.Tensor | None, y: torch.Tensor | None, z: torch.Tensor | None,
                weights: SifterWeights = PAPER_WEIGHTS, temperature: float = 0.05,
                x_again: torch.Tensor | None = None) -> torch.Tensor:
    """SIFTER eq. 2 on embeddings of the sentences x (N, D), their backbone view y (N, D) and
    their pruned view z (N, D), plus lambda_XX' l(x, x_again) when `weights.xx` is set (x_again:
    x under another dropout mask). Pairs with a zero weight are not computed, and the views
    they alone use may be None."""
    named = {"x": x, "y": y, "z": z, "x2": x_again}
    loss = None
    for key, anchors, candidates in SIFTER_PAIRS:
        weight = getattr(weights, key)
        if weight:
            term = weight * info_nce(named[anchors], named[candidates], temperature)
            loss = term if loss is None else loss + term
    return loss


def simcse_loss(first: torch.Tensor, second: torch.Tensor,
                temperature: float = 0.05) -> torch.Tensor:
    """Unsupervised SimCSE: the same sentences (N, D) under two dropout masks."""
    return info_nce(first, second, temperature)


def objective_loss(objective: Objective, views: Sequence[torch.Tensor],
                   weights: SifterWeights = PAPER_WEIGHTS,
                   temperature: float = 0.05) -> torch.Tensor:
    """The loss of `objective` on its views: sifter `weights.views` ((x, y, z) by default),
    simcse (x, x')."""
    if objective == "sifter":
        if len(views) != len(weights.views):
            raise ValueError(f"SIFTER weights {weights} need views {weights.views}, got "
                             f"{len(views)} views")
        named = dict(zip(weights.views, views, strict=True))
        return sifter_loss(named.get("x"), named.get("y"), named.get("z"), weights, temperature,
                           named.get("x2"))
    if objective == "simcse":
        first, second = views
        return simcse_loss(first, second, temperature)
    raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")


def gather_with_local_grad(local: torch.Tensor) -> torch.Tensor:
    """All workers' rows (W*B, D) in rank order, this worker's own rows (B, D) kept in the
    autograd graph (the others are constants). Every worker must pass the same B. Without an
    initialised process group (a single process) returns `local`."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return local
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local.detach().contiguous())
    gathered[dist.get_rank()] = local
    return torch.cat(gathered, dim=0)


def scale_for_ddp(loss: torch.Tensor) -> torch.Tensor:
    """The global loss times the world size, so that DDP's gradient average over workers equals
    the single-process gradient of the global loss (each worker's backward covers its rows)."""
    if dist.is_available() and dist.is_initialized():
        return loss * dist.get_world_size()
    return loss
