"""The contrastive losses against naive loops, and the cross-worker gather against one process."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from sentray.contrastive.losses import (
    gather_with_local_grad,
    info_nce,
    objective_loss,
    scale_for_ddp,
    sifter_loss,
    simcse_loss,
)
from sentray.contrastive.objectives import SifterWeights


def naive_info_nce(anchors, candidates, temperature):
    """SimCSE eq. 1 written out row by row."""
    total = 0.0
    for i in range(len(anchors)):
        sims = [F.cosine_similarity(anchors[i], candidates[j], dim=0) / temperature
                for j in range(len(candidates))]
        total += -(sims[i] - torch.logsumexp(torch.stack(sims), dim=0))
    return total / len(anchors)


def embeddings(n=6, d=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, d, generator=generator, dtype=torch.float64) for _ in range(3)]


def test_info_nce_matches_the_naive_loop():
    x, y, _ = embeddings()
    for temperature in (0.05, 1.0):
        assert torch.allclose(info_nce(x, y, temperature), naive_info_nce(x, y, temperature))


def test_info_nce_is_low_for_matching_rows_and_high_for_shuffled_ones():
    x, _, _ = embeddings(n=16, d=256)
    assert info_nce(x, x) < 1e-3
    assert info_nce(x, x.roll(1, dims=0)) > 10


def test_sifter_loss_is_the_weighted_sum_of_three_pairs():
    x, y, z = embeddings()
    weights = SifterWeights(xy=1.0, xz=0.5, yz=2.0)
    expected = (naive_info_nce(x, y, 0.05) + 0.5 * naive_info_nce(x, z, 0.05)
                + 2.0 * naive_info_nce(y, z, 0.05))
    assert torch.allclose(sifter_loss(x, y, z, weights), expected)
    only_xy = SifterWeights(xy=1.0, xz=0.0, yz=0.0)
    assert torch.allclose(sifter_loss(x, y, z, only_xy), naive_info_nce(x, y, 0.05))
    assert torch.allclose(objective_loss("sifter", (x, y, z)), sifter_loss(x, y, z))
    assert torch.allclose(objective_loss("simcse", (x, y)), simcse_loss(x, y))


def test_ablation_weights_compute_only_their_pairs_and_views():
    x, y, z = embeddings()
    x_again = embeddings(seed=1)[0]
    with_dropout_pair = SifterWeights(1.0, 1.0, 1.0, xx=0.5)
    expected = (naive_info_nce(x, y, 0.05) + naive_info_nce(x, z, 0.05)
                + naive_info_nce(y, z, 0.05) + 0.5 * naive_info_nce(x, x_again, 0.05))
    assert torch.allclose(objective_loss("sifter", (x, y, z, x_again), with_dropout_pair),
                          expected)
    only_yz = SifterWeights(0.0, 0.0, 1.0)
    assert only_yz.views == ("y", "z")  # X is not encoded at all
    assert torch.allclose(objective_loss("sifter", (y, z), only_yz), naive_info_nce(y, z, 0.05))
    assert torch.allclose(sifter_loss(None, y, z, only_yz), naive_info_nce(y, z, 0.05))
    with pytest.raises(ValueError, match="need views"):
        objective_loss("sifter", (x, y, z), only_yz)


def test_bad_arguments_name_the_problem():
    x, y, _ = embeddings()
    with pytest.raises(ValueError, match="same shape"):
        info_nce(x, y[:3])
    with pytest.raises(ValueError, match="objective"):
        objective_loss("triplet", (x, y))
    with pytest.raises(ValueError, match="not all 0"):
        SifterWeights(0.0, 0.0, 0.0)


def test_gather_is_the_identity_in_one_process():
    x, _, _ = embeddings()
    assert gather_with_local_grad(x) is x
    # Without a process group the loss is not scaled and keeps its graph: worked by hand,
    # d/dx sum(x * x) = x + x = 2x: one float addition of a value to itself, exact on any CPU.
    # The scaling itself is checked by the two-process test below, where an unscaled loss
    # would halve DDP's gradient.
    x.requires_grad_(True)
    scale_for_ddp((x * x).sum()).backward()
    assert torch.equal(x.grad, 2 * x.detach())


# -- two processes: gloo on loopback --------------------------------------------------------------

WORLD, LOCAL, DIM = 2, 4, 6


def global_batch():
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(WORLD * LOCAL, DIM, generator=generator) for _ in range(3)]


def make_encoder():
    torch.manual_seed(0)
    return torch.nn.Linear(DIM, DIM)


def single_process_reference(objective):
    """The loss and gradient of the whole global batch in one process."""
    encoder = make_encoder()
    views = [encoder(v) for v in global_batch()[:3 if objective == "sifter" else 2]]
    loss = objective_loss(objective, views)
    loss.backward()
    return float(loss), encoder.weight.grad.clone()


def _worker(rank, port, objective, results):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        encoder = torch.nn.parallel.DistributedDataParallel(make_encoder())
        rows = slice(rank * LOCAL, (rank + 1) * LOCAL)
        inputs = [v[rows] for v in global_batch()[:3 if objective == "sifter" else 2]]
        local = encoder(torch.cat(inputs))  # one forward for every view, as the trainer does
        views = [gather_with_local_grad(v) for v in local.split(LOCAL)]
        loss = objective_loss(objective, views)
        scale_for_ddp(loss).backward()
        results[rank] = (float(loss), encoder.module.weight.grad.clone())
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("objective", ["sifter", "simcse"])
def test_gathered_loss_and_ddp_gradient_equal_the_single_process_ones(objective):
    """Each worker holds half of the global batch; after the gather every worker's loss is the
    global loss and DDP's averaged gradient is the single-process gradient."""
    expected_loss, expected_grad = single_process_reference(objective)
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_worker, args=(free_port(), objective, results), nprocs=WORLD, join=True)
    # float32 in other processes on other batch shapes (one forward of half the rows, DDP's
    # averaged halves): other kernels and summation orders, ~1e-7 relative. The bounds sit
    # far below the faults they catch (gradients here are ~2): an unscaled loss halves the
    # gradient, a gather that cuts the local rows from the graph leaves none, and without
    # the other worker's rows the loss has half the negatives.
    for rank in range(WORLD):
        loss, grad = results[rank]
        assert math.isclose(loss, expected_loss, rel_tol=1e-5)
        assert torch.allclose(grad, expected_grad, atol=1e-6), (rank, grad - expected_grad)
