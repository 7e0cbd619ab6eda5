"""A 2-worker training step equals a 1-worker step on the same global batch.

Two processes on gloo (CPU), each a DDP replica of a tiny BERT with mean pooling + SimCSE's
MLP and no dropout, take their half of a global batch of 8 sentences through the trainer's own
pieces: `tokenize_batch` (this worker's rows), `encode_views`, `worker_objective_loss` (its rows
against every worker's, gathered with their gradient) and `clipped_step` (AdamW, the global
norm clipped at 1.0, which this model's gradient, ~70, exceeds). One process does the same on
the whole batch. The gradients, the norm clipping saw and the updated weights must agree.

The same processes also take the step official SimCSE takes (every worker computes the whole
global loss with only its own rows in the graph): DDP's average then holds 1/W of the gradient,
which is why the trainer once scaled that loss by the world size, and why a loss that is each
worker's share of the global mean (DDP averaging the shares) needs no scale."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import free_port, make_tiny_bert

from sentray.contrastive.losses import global_mean, objective_loss, worker_objective_loss
from sentray.contrastive.model import ContrastiveModel, encode_views
from sentray.contrastive.objectives import objective_views
from sentray.contrastive.optimizer import adamw, clipped_step
from sentray.contrastive.view_tokens import tokenize_batch

WORLD, GLOBAL_BATCH, MAX_LENGTH, LR, MAX_GRAD_NORM = 2, 8, 16, 1e-3, 1.0
OBJECTIVES = ("sifter", "simcse")
TEXTS = ["A man is playing a guitar on the stage.", "Nobody came to the party.",
         "The jury said nothing about the verdict.", "She sold the old house in May.",
         "It rained and the game was called off.", "The committee approved the budget.",
         "Two dogs chase a ball across the park.", "He never answers his phone."]


def global_batch() -> dict[str, np.ndarray]:
    """X, Y (X + a backbone) and Z (X without articles) of 8 sentences, as jobs/augment.py."""
    return {"text": np.array(TEXTS),
            "backbone_text": np.array([t + " " + " ".join(t.split()[:3]) + "." for t in TEXTS]),
            "pruned_text": np.array([" ".join(w for w in t.split()
                                              if w.lower() not in {"a", "an", "the"})
                                     for t in TEXTS])}


def tiny_model(vocab_size: int, state: dict | None = None) -> ContrastiveModel:
    """The tiny BERT (no dropout), mean pooling + SimCSE's MLP, with the weights `state` when
    given."""
    torch.manual_seed(0)
    # mean pooling: a random tiny BERT's [CLS] is nearly one vector for every sentence (the
    # loss sits at ln 8 and its gradient, ~1e-2, is mostly rounding); the mean of its tokens is
    # not (gradient norm ~70: clipping at 1.0 acts)
    model = ContrastiveModel(make_tiny_bert(vocab_size), "last_avg", mlp=True)
    if state is not None:
        model.load_state_dict(state)
    return model.train()


def one_step(objective: str, tokenizer, state: dict, rank: int = 0, world: int = 1) -> dict:
    """This worker's step on its rows of the global batch (the whole batch for world 1): the
    raw gradient, the official-SimCSE gradient, then the trainer's clipped AdamW step."""
    bare = tiny_model(tokenizer.vocab_size, state)
    model = torch.nn.parallel.DistributedDataParallel(bare) if world > 1 else bare
    rows = GLOBAL_BATCH // world
    groups = tokenize_batch(tokenizer, global_batch(), objective, slice(rank * rows,
                                                                       (rank + 1) * rows),
                            MAX_LENGTH)

    def views() -> list[torch.Tensor]:
        return encode_views(model, groups, objective_views(objective), rows)

    def gradients() -> dict[str, torch.Tensor]:
        found = {n: p.grad.clone() for n, p in bare.named_parameters() if p.grad is not None}
        bare.zero_grad(set_to_none=True)
        return found

    loss = worker_objective_loss(objective, views())
    loss.backward()
    raw = gradients()
    objective_loss(objective, [official_simcse_gather(v) for v in views()]).backward()
    official = gradients()
    optimizer = adamw(model, LR, weight_decay=0.01)
    norm = clipped_step(model, worker_objective_loss(objective, views()), optimizer, None,
                        MAX_GRAD_NORM)
    return {"loss": global_mean(loss), "gradients": raw, "official": official, "norm": norm,
            "weights": {n: p.detach().clone() for n, p in bare.named_parameters()}}


def official_simcse_gather(local: torch.Tensor) -> torch.Tensor:
    """SimCSE's gather (its models.py, cl_forward): every worker's rows, the others' detached,
    this worker's own kept in the graph."""
    if not dist.is_initialized():
        return local
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local.detach().contiguous())
    gathered[dist.get_rank()] = local
    return torch.cat(gathered)


def _worker(rank: int, port: int, tokenizer, state: dict, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        torch.save({o: one_step(o, tokenizer, state, rank, WORLD) for o in OBJECTIVES},
                   os.path.join(folder, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def steps(tokenizer, tmp_path_factory) -> tuple[dict, list[dict]]:
    """(one process's steps, each of the two workers' steps), per objective."""
    state = tiny_model(tokenizer.vocab_size).state_dict()
    single = {o: one_step(o, tokenizer, state) for o in OBJECTIVES}
    folder = tmp_path_factory.mktemp("workers")
    # fork: the workers start in a second, where spawned ones import torch and transformers
    # afresh (10-45 s on this busy 2-core machine); each takes one torch thread first
    mp.start_processes(_worker, args=(free_port(), tokenizer, state, str(folder)),
                       nprocs=WORLD, join=True, start_method="fork")
    return single, [torch.load(folder / f"rank{r}.pt") for r in range(WORLD)]


def flat(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([tensors[name].flatten() for name in sorted(tensors)])


def relative_error(found: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> float:
    """||found - expected|| / ||expected|| over every parameter's gradient at once (a tensor
    whose true gradient is 0, such as an attention key's bias, holds rounding only)."""
    assert found.keys() == expected.keys()
    return float((flat(found) - flat(expected)).norm() / flat(expected).norm())


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_two_workers_take_the_one_worker_step(steps, objective):
    """float32 on other batch shapes (each worker pads its own half; DDP sums the halves): the
    gradients agree to ~3e-7 here and the bound is 1e-5, the updated weights to ~1e-6 and the
    bound is 1% of AdamW's first step (about lr = 1e-3 a weight). A loss of official SimCSE's
    kind halves the gradient (the next test), a gather without the other workers' gradient
    leaves out their losses' pull on this worker's rows, missing negatives change the loss."""
    single, workers = steps[0][objective], [w[objective] for w in steps[1]]
    assert single["norm"] > 10 * MAX_GRAD_NORM  # clipping acts, so the gradient's scale counts
    for worker in workers:
        assert worker["loss"] == pytest.approx(single["loss"], rel=1e-5)
        assert worker["norm"] == pytest.approx(single["norm"], rel=1e-5)
        assert relative_error(worker["gradients"], single["gradients"]) < 1e-5
        moved = flat(worker["weights"]) - flat(single["weights"])
        assert float(moved.abs().max()) < 1e-2 * LR
    # DDP keeps the replicas identical, bit for bit (one all-reduced gradient, one kernel set)
    assert torch.equal(flat(workers[0]["weights"]), flat(workers[1]["weights"]))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_the_official_simcse_step_takes_one_over_w_of_the_gradient(steps, objective):
    """Why the trainer scaled its loss by W while it gathered as SimCSE does, and why it no
    longer needs to: that gradient is the single-process one divided by the world size. (In
    one process the two losses are the same computation: equal bit for bit.)"""
    single, worker = steps[0][objective], steps[1][0][objective]
    assert relative_error({n: WORLD * g for n, g in worker["official"].items()},
                          single["gradients"]) < 1e-5
    assert relative_error(worker["official"], single["gradients"]) > 0.4  # half of it
    assert relative_error(single["official"], single["gradients"]) == 0.0
