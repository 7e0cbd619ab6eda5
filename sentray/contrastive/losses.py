"""Contrastive losses of SimCSE and SIFTER-SimCSE, as pure functions of sentence embeddings.

InfoNCE (SimCSE eq. 1): for anchors a_i and candidates b_j, with sim the cosine similarity,

    l_i = -log( exp(sim(a_i, b_i) / tau) / sum_j exp(sim(a_i, b_j) / tau) )

averaged over the batch; the other rows' candidates are the in-batch negatives.

SIFTER-SimCSE (SIFTER eq. 2): L = lambda_XY l(X, Y) + lambda_XZ l(X, Z) + lambda_YZ l(Y, Z), with Y
the sentence plus its backbone and Z the sentence without articles, conjunctions and pronouns.
An optional fourth term lambda_XX' l(X, X') adds SimCSE's own pair (X under a second dropout
mask; 0 in the paper), for ablations.

Under data parallelism (W workers of B rows each, N = W * B) the negatives come from every
worker. Each worker gathers every worker's embeddings *with* their gradient
(`gather_with_grad`: the backward sums each row's gradient over the workers and hands it to the
worker that owns the row) and computes its share of the loss: its own B rows as anchors against
all N candidates, averaged over its B rows (`worker_objective_loss`). DDP then averages the
workers' gradients:

    (1/W) sum_r grad( (1/B) sum_{i in r} l_i ) = grad( (1/N) sum_i l_i ),

the single-process gradient of the global batch, with no scale by W. (Official SimCSE has every
worker compute the whole global loss with only its own rows in the graph; DDP's average is then
1/W of the single-process gradient, which changes what gradient clipping at a fixed norm does.)
tests/contrastive/test_distributed_step.py holds a 2-worker step equal to a 1-worker step on the
same global batch: gradients, clipping and updated weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from sentray.contrastive.objectives import (
    OBJECTIVES,
    PAPER_WEIGHTS,
    SIFTER_PAIRS,
    Objective,
    SifterWeights,
    candidate_views,
    objective_views,
)


def info_nce(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float = 0.05,
             first_positive: int = 0) -> torch.Tensor:
    """Mean InfoNCE of anchors (B, D) against candidates (N, D), N >= B: anchor i's positive is
    candidate `first_positive + i`, every other candidate a negative. With the same rows on
    both sides (N = B, first_positive 0): SimCSE eq. 1 on one batch; under data parallelism a
    worker's rows against every worker's, its own starting at row `first_positive`."""
    if anchors.ndim != 2 or candidates.ndim != 2 or anchors.shape[1] != candidates.shape[1]:
        raise ValueError(f"anchors {tuple(anchors.shape)} and candidates "
                         f"{tuple(candidates.shape)} must be (rows, dimension) of one dimension")
    if not 0 <= first_positive <= len(candidates) - len(anchors):
        raise ValueError(f"the positives of {len(anchors)} anchors from candidate "
                         f"{first_positive} on lie outside the {len(candidates)} candidates")
    logits = F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T  # (B, N) cosine
    labels = torch.arange(len(anchors), device=anchors.device) + first_positive  # (B,)
    return F.cross_entropy(logits / temperature, labels)


def sifter_loss(x: torch.Tensor | None, y: torch.Tensor | None, z: torch.Tensor | None,
                weights: SifterWeights = PAPER_WEIGHTS, temperature: float = 0.05,
                x_again: torch.Tensor | None = None, *,
                candidates: Mapping[str, torch.Tensor] | None = None,
                first_positive: int = 0) -> torch.Tensor:
    """SIFTER eq. 2 on embeddings of the sentences x (B, D), their backbone view y (B, D) and
    their pruned view z (B, D), plus lambda_XX' l(x, x_again) when `weights.xx` is set (x_again:
    x under another dropout mask). Pairs with a zero weight are not computed, and the views
    they alone use may be None. `candidates` (view name x, y, z or x2 -> (N, D)): the views
    over the whole global batch, this worker's rows from `first_positive` on (default: the
    views themselves)."""
    named = {"x": x, "y": y, "z": z, "x2": x_again}
    candidates = named if candidates is None else candidates
    loss = None
    for key, anchors, against in SIFTER_PAIRS:
        weight = getattr(weights, key)
        if weight:
            term = weight * info_nce(named[anchors], candidates[against], temperature,
                                     first_positive)
            loss = term if loss is None else loss + term
    return loss


def simcse_loss(first: torch.Tensor, second: torch.Tensor, temperature: float = 0.05, *,
                candidates: torch.Tensor | None = None,
                first_positive: int = 0) -> torch.Tensor:
    """Unsupervised SimCSE: the same sentences (B, D) under two dropout masks; `candidates`:
    the second view over the whole global batch (N, D), this worker's rows from
    `first_positive` on (default: `second`)."""
    return info_nce(first, second if candidates is None else candidates, temperature,
                    first_positive)


def objective_loss(objective: Objective, views: Sequence[torch.Tensor],
                   weights: SifterWeights = PAPER_WEIGHTS, temperature: float = 0.05, *,
                   candidates: Sequence[torch.Tensor | None] | None = None,
                   first_positive: int = 0) -> torch.Tensor:
    """The loss of `objective` on its views (each (B, D)): sifter `weights.views` ((x, y, z) by
    default), simcse (x, x'). `candidates`: the same views over the whole global batch (each
    (N, D), this worker's rows from `first_positive` on; None for a view that is no pair's
    candidate: `candidate_views`); default: `views`."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    names = objective_views(objective, weights)
    if len(views) != len(names) or (candidates is not None and len(candidates) != len(names)):
        raise ValueError(f"{objective} with {weights} needs views {names}, got {len(views)} "
                         f"views" + ("" if candidates is None else
                                     f" and {len(candidates)} candidate views"))
    named = dict(zip(names, views, strict=True))
    against = named if candidates is None else dict(zip(names, candidates, strict=True))
    if objective == "simcse":
        return simcse_loss(named["x"], named["x2"], temperature, candidates=against["x2"],
                           first_positive=first_positive)
    return sifter_loss(named.get("x"), named.get("y"), named.get("z"), weights, temperature,
                       named.get("x2"), candidates=against, first_positive=first_positive)


def worker_objective_loss(objective: Objective, local_views: Sequence[torch.Tensor],
                          weights: SifterWeights = PAPER_WEIGHTS,
                          temperature: float = 0.05) -> torch.Tensor:
    """This worker's share of the global loss: its rows of each view (B, D) as anchors against
    every worker's rows (gathered with their gradient), averaged over its B rows. Under DDP's
    gradient average this is the exact single-process step on the global batch (the module
    docstring's identity); in one process, the plain `objective_loss`."""
    if not _distributed():
        return objective_loss(objective, local_views, weights, temperature)
    wanted = candidate_views(objective, weights)  # the others are only ever anchors
    candidates = [gather_with_grad(view) if name in wanted else None  # each (W*B, D)
                  for name, view in zip(objective_views(objective, weights), local_views,
                                        strict=True)]
    first = dist.get_rank() * len(local_views[0])
    return objective_loss(objective, local_views, weights, temperature,
                          candidates=candidates, first_positive=first)


def global_mean(value: torch.Tensor) -> float:
    """The mean of a worker's scalar over all workers (the global batch's loss from each
    worker's share of it; the value itself in one process). A collective: every worker calls
    it."""
    value = value.detach().float().reshape(1).clone()
    if _distributed():
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return float(value)


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose backward sums the gathered rows' gradients over the workers and returns
    this worker's slice: the gradient every worker's loss sends to this worker's rows. (All-reduce,
    not reduce-scatter: gloo has no reduce-scatter; torch.distributed.nn's all_gather emulates one
    with all-to-all and is deprecated.)"""

    @staticmethod
    def forward(ctx, local: torch.Tensor) -> torch.Tensor:  # (B, D) -> (W*B, D)
        ctx.rows, ctx.rank = len(local), dist.get_rank()
        gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, local.contiguous())
        return torch.cat(gathered, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # (W*B, D) -> (B, D)
        grad = grad.clone(memory_format=torch.contiguous_format)  # autograd's own: not in place
        dist.all_reduce(grad)  # sum over the workers' losses
        return grad[ctx.rank * ctx.rows:(ctx.rank + 1) * ctx.rows]


def gather_with_grad(local: torch.Tensor) -> torch.Tensor:
    """All workers' rows (W*B, D) in rank order, differentiable with respect to every worker's
    rows: a worker's backward reaches the other workers' rows too (they receive it in their own
    backward). Every worker must pass the same B. In one process: `local`."""
    return _GatherWithGrad.apply(local) if _distributed() else local


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
