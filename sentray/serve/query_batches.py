"""`QueryBatches`: the searches a replica is asked for at once, run as batches. While one batch
runs (in a thread: encoding and the table's search block), the searches that arrive wait; when
it ends, all of them (up to --max-batch-size) are the next batch. A lone query runs at once,
with no wait for company; under load each batch holds what queued during the last.

With `then` (the service: the search), a batch's second stage runs on a thread of its own while
the next batch's first stage (the encoder) runs: the encoder's thread never waits for a search.

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
    in (`then(batch, run(batch))[i]` where a second stage is given).

    run: items -> one result per item, in order; called in a worker thread (of `executor`),
    one batch at a time. A submission cancelled while it waits (its request timed out) is left
    out of its batch. `powers_of_two`: a batch is the largest power of two of those waiting
    (9 waiting: 8 now, 1 next), the shapes an encoder with `ShapeBuckets` runs unpadded
    (padding 9 rows to 16 would cost 7 rows' encoding; a batch of 1 after 8 costs one)."""

    def __init__(self, run: Callable[[list[T]], Sequence[R]], max_batch_size: int,
                 executor: Executor | None = None, *, powers_of_two: bool = False,
                 then: Callable | None = None, then_executor: Executor | None = None) -> None:
        self.run, self.max_batch_size = run, max_batch_size
        self.powers_of_two = powers_of_two
        self.executor = executor  # where `run` runs (None: asyncio's default threads)
        # then(items, run(items)) -> one result per item: a second stage, on `then_executor`,
        # while the next batch's `run` goes on (None: run's results are the answers)
        self.then, self.then_executor = then, then_executor
        self.pending: list[tuple[T, asyncio.Future, float]] = []  # item, answer, when sent
        self.running = False
        self.sizes: list[int] = []  # each batch's size, for tests and the curious
        self.finishing: set[asyncio.Task] = set()  # batches in their second stage

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
                # one batch in its second stage while the next runs its first, no more: where
                # the second stage is the slower (a million rows' table search), what waits
                # meanwhile makes the next batch, rather than batches of one queued for it
                while len(self.finishing) > 1:
                    await asyncio.wait(set(self.finishing), return_when=asyncio.FIRST_COMPLETED)
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
        items = [item for item, _, _ in batch]
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self.executor, self.run, items)
        except Exception as exc:  # every search of the batch fails with it
            self._fail(batch, exc)
            return
        if self.then is None:
            self._answer(batch, results, started)
            return
        # the second stage beside the next batch's first (held: a task's only reference)
        self.finishing.add(task := loop.create_task(self._then(batch, items, results, started)))
        task.add_done_callback(self.finishing.discard)

    async def _then(self, batch, items, results, started: float) -> None:
        try:
            answers = await asyncio.get_running_loop().run_in_executor(
                self.then_executor, self.then, items, results)
        except Exception as exc:
            self._fail(batch, exc)
            return
        self._answer(batch, answers, started)

    def _answer(self, batch, results, started: float) -> None:
        for (_, future, sent), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(Batched(result, started - sent, len(batch)))

    @staticmethod
    def _fail(batch, exc: Exception) -> None:
        for _, future, _ in batch:
            if not future.done():
                future.set_exception(exc)
