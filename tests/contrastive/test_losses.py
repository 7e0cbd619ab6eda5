"""The contrastive losses against naive loops, a worker's share of the global loss among them
(the 2-process step itself: test_distributed_step.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sentray.contrastive.losses import (
    gather_with_grad,
    global_mean,
    info_nce,
    objective_loss,
    sifter_loss,
    simcse_loss,
    worker_objective_loss,
)
from sentray.contrastive.objectives import SifterWeights, candidate_views


def naive_info_nce(anchors, candidates, temperature, first_positive=0):
    """SimCSE eq. 1 written out row by row: anchor i's positive is candidate first_positive + i."""
    total = 0.0
    for i in range(len(anchors)):
        sims = [F.cosine_similarity(anchors[i], candidates[j], dim=0) / temperature
                for j in range(len(candidates))]
        total += -(sims[first_positive + i] - torch.logsumexp(torch.stack(sims), dim=0))
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
    with pytest.raises(ValueError, match="needs views"):
        objective_loss("sifter", (x, y, z), only_yz)


def test_a_workers_rows_against_the_global_batch_average_to_the_global_loss():
    """Worker r's share: its rows as anchors, every row as a candidate, its positives from row
    r * B on. The mean of the shares is the global loss (each is a mean over B of N rows)."""
    x, y, z = embeddings(n=8)
    for temperature in (0.05, 1.0):
        shares = [info_nce(x[r * 4:(r + 1) * 4], y, temperature, first_positive=r * 4)
                  for r in range(2)]
        for r, share in enumerate(shares):
            assert torch.allclose(share, naive_info_nce(x[r * 4:(r + 1) * 4], y, temperature,
                                                        first_positive=r * 4))
        assert torch.allclose((shares[0] + shares[1]) / 2, info_nce(x, y, temperature))
    halves = [objective_loss("sifter", (x[r * 4:(r + 1) * 4], y[r * 4:(r + 1) * 4],
                                        z[r * 4:(r + 1) * 4]),
                             candidates=(None, y, z), first_positive=r * 4) for r in range(2)]
    assert torch.allclose((halves[0] + halves[1]) / 2, objective_loss("sifter", (x, y, z)))
    halves = [objective_loss("simcse", (x[r * 4:(r + 1) * 4], y[r * 4:(r + 1) * 4]),
                             candidates=(None, y), first_positive=r * 4) for r in range(2)]
    assert torch.allclose((halves[0] + halves[1]) / 2, objective_loss("simcse", (x, y)))


def test_only_candidate_views_are_gathered():
    """X is an anchor only in SIFTER's three pairs (its candidates are Y and Z); the X-X' pair
    and SimCSE take candidates from X'."""
    assert candidate_views("sifter") == {"y", "z"}
    assert candidate_views("sifter", SifterWeights(1, 1, 1, 1)) == {"y", "z", "x2"}
    assert candidate_views("sifter", SifterWeights(1, 0, 0)) == {"y"}
    assert candidate_views("simcse") == {"x2"}


def test_in_one_process_the_workers_loss_is_the_loss():
    """Without a process group nothing is gathered, nothing scaled: the plain loss, its graph
    kept (d/dx sum(x * x) = 2x, one float addition of a value to itself: exact)."""
    x, y, z = embeddings()
    assert gather_with_grad(x) is x
    assert torch.equal(worker_objective_loss("sifter", (x, y, z)),
                       objective_loss("sifter", (x, y, z)))
    assert global_mean(torch.tensor(2.5)) == 2.5
    x.requires_grad_(True)
    (gather_with_grad(x) * x).sum().backward()
    assert torch.equal(x.grad, 2 * x.detach())


def test_bad_arguments_name_the_problem():
    x, y, _ = embeddings()
    with pytest.raises(ValueError, match="one dimension"):
        info_nce(x, y[:, :3])
    with pytest.raises(ValueError, match="positives of 6 anchors from candidate 2 on lie outside "
                                         "the 6 candidates"):
        info_nce(x, y, first_positive=2)
    with pytest.raises(ValueError, match="objective"):
        objective_loss("triplet", (x, y))
    with pytest.raises(ValueError, match="not all 0"):
        SifterWeights(0.0, 0.0, 0.0)
