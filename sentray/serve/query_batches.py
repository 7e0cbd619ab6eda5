"""`QueryBatches`: the searches a replica is asked for at once, run as batches. While one batch
runs (in a thread: encoding and the table's search block), the searches that arrive wait; when
it ends, all of them (up to --max-batch-size) are the next batch. A lone query runs at once,
with no wait for company; under load each batch holds what queued during the last.

Why not Ray Serve's `@serve.batch`: it forms a batch as soon as its wait (`batch_wait_timeout_s`)
runs out, even while the previous batch still runs, and queues it behind that one. Measured on
this service (issue 56, 16 clients, a 1 ms wait): batches of one query, each behind the other,
~600 ms a query in the replica; a longer wait is paid in full by every lone query."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Batched(Generic[R]):
    """What `submit` answers: the item's result, how long it waited for its batch to start
    (seconds), and that batch's size."""

    result: R
    waited_s: float
    batch_size: int


class QueryBatches(Generic[T, R]):
    """`await batches.submit(item)` -> `Batched(run(batch)[i], ...)` for the batch `item` ran
    in.

    run: items -> one result per item, in order; called in a worker thread (of `executor`),
    one batch at a time. A submission cancelled while it waits (its request timed out) is left
    out of its batch. `powers_of_two`: a batch is the largest power of two of those waiting
    (9 waiting: 8 now, 1 next), the shapes an encoder with `ShapeBuckets` runs unpadded
    (padding 9 rows to 16 would cost 7 rows' encoding; a batch of 1 after 8 costs one)."""

    def __init__(self, run: Callable[[list[T]], Sequence[R]], max_batch_size: int,
                 executor: Executor | None = None, *, powers_of_two: bool = False) -> None:
        self.run, self.max_batch_size = run, max_batch_size
        self.powers_of_two = powers_of_two
        self.executor = executor  # where `run` runs (None: asyncio's default threads)
        self.pending: list[tuple[T, asyncio.Future, float]] = []  # item, answer, when sent
        self.running = False
        self.sizes: list[int] = []  # each batch's size, for tests and the curious

    async def submit(self, item: T) -> Batched[R]:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((item, future, time.perf_counter()))
        if not self.running:
            self.running = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self.pending:
                waiting = [entry for entry in self.pending if not entry[1].cancelled()]
                size = min(len(waiting), self.max_batch_size)
                if self.powers_of_two and size:
                    size = 1 << (size.bit_length() - 1)
                batch, self.pending = waiting[:size], waiting[size:]
                if batch:
                    await self._run_one(batch)
        finally:
            self.running = False

    async def _run_one(self, batch: list[tuple[T, asyncio.Future, float]]) -> None:
        self.sizes.append(len(batch))
        started = time.perf_counter()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.run, [item for item, _, _ in batch])
        except Exception as exc:  # every search of the batch fails with it
            for _, future, _ in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future, sent), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(Batched(result, started - sent, len(batch)))
