"""A training run's steps: `StepPlan` (steps per epoch, the run's last step, when to log and to
evaluate), the `Step`s it yields (which epoch and batch each reads) and the seeds a step draws
from."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class StepPlan:
    """Epochs of `rows // batch_size` full global batches (the rows past the last one are not
    trained on), capped at `max_steps`: a capped run is a complete short run, its schedule ends
    with it (the Hugging Face Trainer's rule). Evaluates every `eval_steps` and at the last
    step; logs at step 1 and every `log_steps`."""

    rows: int
    batch_size: int
    epochs: int = 1
    max_steps: int | None = None
    eval_steps: int = 125
    log_steps: int = 10

    def __post_init__(self) -> None:
        if self.rows // self.batch_size == 0:
            raise ValueError(f"{self.rows} rows, fewer than one global batch ({self.batch_size})")

    @property
    def steps_per_epoch(self) -> int:
        return self.rows // self.batch_size

    @property
    def total_steps(self) -> int:
        total = self.steps_per_epoch * self.epochs
        return min(total, self.max_steps) if self.max_steps else total

    @property
    def epochs_run(self) -> int:
        """Epochs the run reads, the last perhaps in part."""
        return math.ceil(self.total_steps / self.steps_per_epoch)

    @property
    def dropped_per_epoch(self) -> int:
        """Rows of an epoch past its last full global batch."""
        return self.rows - self.steps_per_epoch * self.batch_size

    def warmup_steps(self, ratio: float) -> int:
        """Steps of a linear warm-up over `ratio` of the run."""
        return math.ceil(ratio * self.total_steps)

    def evaluates_at(self, step: int) -> bool:
        return step % self.eval_steps == 0 or step == self.total_steps

    def logs_at(self, step: int) -> bool:
        return step % self.log_steps == 0 or step == 1

    def epochs_from(self, done: int) -> range:
        """The epochs a run that has trained `done` steps still reads."""
        return range(done // self.steps_per_epoch, self.epochs_run)

    def steps(self, done: int = 0) -> Iterator[Step]:
        """The steps after the first `done` (a run restarted from a checkpoint), in order."""
        for number in range(done + 1, self.total_steps + 1):
            yield Step(number, (number - 1) // self.steps_per_epoch,
                       (number - 1) % self.steps_per_epoch)


@dataclass(frozen=True)
class Step:
    """One optimizer step: its number (1-based), its epoch and its batch within the epoch."""

    number: int
    epoch: int
    batch: int


def step_seed(seed: int, rank: int, step: int) -> int:
    """The dropout seed of one worker's training step: a function of (seed, rank, step) only,
    so a run restarted from a checkpoint draws the same masks. Both trainers use it."""
    import numpy as np

    return int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0])


def epoch_permutation(seed: int, epoch: int, rows: int):
    """The rows 0..rows-1 of an epoch in a seeded order, the same on every worker and rerun
    (the LSTM's order; the contrastive trainer orders rows by id: `contrastive.epoch_order`)."""
    import numpy as np

    return np.random.default_rng([seed, epoch]).permutation(rows)
