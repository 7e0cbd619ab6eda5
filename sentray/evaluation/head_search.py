"""Ditto's head search: every layer-head scored on STS-B **dev** (never a test split), the best
one chosen, and the grid drawn as a heatmap."""

from __future__ import annotations

import os

import numpy as np

from sentray.evaluation.metrics import cosine_rows, spearman
from sentray.evaluation.senteval import load_sts_benchmark, resolve_data_dir


def search_head(encoder, data_dir: str | os.PathLike | None = None,
                batch_size: int | None = None, max_pairs: int | None = None) -> np.ndarray:
    """Spearman x 100 on STS-B **dev** (its first `max_pairs` pairs if given) for every head:
    (L, H). The encoder's pooling must be a Ditto pooling; its own head is ignored."""
    pairs = load_sts_benchmark(resolve_data_dir(data_dir), "dev").head(max_pairs)
    first = encoder.encode_every_head(pairs.first, batch_size)  # (L, H, N, D)
    second = encoder.encode_every_head(pairs.second, batch_size)
    return spearman(cosine_rows(first, second), pairs.gold) * 100.0  # (L, H)


def best_head(grid: np.ndarray) -> str:
    layer, head = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
    return f"{layer}-{head}"


def save_head_heatmap(grid: np.ndarray, path: str | os.PathLike, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1 + 0.55 * grid.shape[1], 1 + 0.45 * grid.shape[0]))
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    for (layer, head), value in np.ndenumerate(grid):
        ax.text(head, layer, f"{value:.1f}", ha="center", va="center", fontsize=7, color="w")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(grid.shape[1]))
    ax.set_yticks(range(grid.shape[0]))
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, label="STS-B dev Spearman x 100")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
