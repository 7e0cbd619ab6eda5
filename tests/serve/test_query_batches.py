"""`QueryBatches`: a lone item runs at once; what arrives while a batch runs is the next batch
(at most max_batch_size); a cancelled wait is left out; a failure reaches every item of its
batch."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sentray.serve.query_batches import QueryBatches


def held_first(gate: threading.Event):
    """A batch runner that holds the batch of the lone "first" item until `gate` is set, so
    that what arrives meanwhile queues; it answers each item with "item!"."""
    def run(items):
        if items == ["first"]:
            gate.wait(5)
        return [f"{item}!" for item in items]
    return run


def test_batches_hold_what_queued_while_the_last_ran():
    gate = threading.Event()
    run = held_first(gate)

    async def scenario():
        batches = QueryBatches(run, max_batch_size=3)
        first = asyncio.ensure_future(batches.submit("first"))
        await asyncio.sleep(0.05)
        rest = [asyncio.ensure_future(batches.submit(f"q{i}")) for i in range(5)]
        late = asyncio.ensure_future(batches.submit("cancelled"))
        await asyncio.sleep(0.05)
        late.cancel()
        gate.set()
        return await first, await asyncio.gather(*rest), batches.sizes

    first, rest, sizes = asyncio.run(scenario())
    assert first.result == "first!" and [r.result for r in rest] == [f"q{i}!" for i in range(5)]
    assert sizes == [1, 3, 2]  # the cancelled one left out of the last batch
    assert [r.batch_size for r in rest] == [3, 3, 3, 2, 2]
    # the first ran at once; the rest waited for it (held ~0.05 s by the gate at least)
    assert first.waited_s < 0.05 and min(r.waited_s for r in rest) >= 0.04


def test_a_failure_reaches_every_item_of_its_batch():
    def run(items):
        raise RuntimeError("the encoder broke")

    async def scenario():
        batches = QueryBatches(run, max_batch_size=4)
        return await asyncio.gather(*(batches.submit(i) for i in range(3)),
                                    return_exceptions=True)

    assert [str(e) for e in asyncio.run(scenario())] == ["the encoder broke"] * 3


@pytest.mark.parametrize("count", [1, 10])
def test_every_item_is_answered_in_order(count):
    async def scenario():
        batches = QueryBatches(lambda items: [i * 2 for i in items], max_batch_size=4)
        return await asyncio.gather(*(batches.submit(i) for i in range(count)))

    assert [r.result for r in asyncio.run(scenario())] == [i * 2 for i in range(count)]


def test_powers_of_two_take_the_largest_whole_bucket_of_those_waiting():
    """11 waiting behind a running batch, at most 32: batches of 8, 2, 1 (the shapes a
    bucketed encoder runs unpadded), every item answered with its own result."""
    gate = threading.Event()
    run = held_first(gate)

    async def scenario():
        batches = QueryBatches(run, max_batch_size=32, powers_of_two=True)
        first = asyncio.ensure_future(batches.submit("first"))
        await asyncio.sleep(0.05)
        rest = [asyncio.ensure_future(batches.submit(f"q{i}")) for i in range(11)]
        await asyncio.sleep(0.05)
        gate.set()
        return await first, await asyncio.gather(*rest), batches.sizes

    first, rest, sizes = asyncio.run(scenario())
    assert sizes == [1, 8, 2, 1]
    assert [r.result for r in rest] == [f"q{i}!" for i in range(11)]


def test_the_second_stage_runs_beside_the_next_batch_s_first():
    """With `then` (the service's search), a batch's second stage runs on its own thread: the
    next batch's first stage (the encoder) starts while the first batch's search is still
    held, and each item gets then(items, run(items)) of its own batch."""
    from concurrent.futures import ThreadPoolExecutor

    search_held, second_encoded = threading.Event(), threading.Event()

    def encode(items):
        if items != ["first"]:
            second_encoded.set()
        return [f"<{item}>" for item in items]

    def search(items, encoded):
        if items == ["first"]:
            search_held.wait(5)  # released only once the next batch was encoded
        return [f"{e}!" for e in encoded]

    async def scenario():
        batches = QueryBatches(encode, 4, ThreadPoolExecutor(1), then=search,
                               then_executor=ThreadPoolExecutor(1))
        first = asyncio.ensure_future(batches.submit("first"))
        await asyncio.sleep(0.05)
        rest = asyncio.gather(*(batches.submit(f"q{i}") for i in range(2)))
        await asyncio.get_running_loop().run_in_executor(None, second_encoded.wait, 5)
        encoded_meanwhile = second_encoded.is_set() and not first.done()
        search_held.set()
        return encoded_meanwhile, await first, await rest

    encoded_meanwhile, first, rest = asyncio.run(scenario())
    assert encoded_meanwhile
    assert first.result == "<first>!" and [r.result for r in rest] == ["<q0>!", "<q1>!"]
    assert first.batch_size == 1 and rest[0].batch_size == 2


def test_a_failure_of_the_second_stage_reaches_its_batch():
    def search(items, encoded):
        raise RuntimeError("the search broke")

    async def scenario():
        batches = QueryBatches(lambda items: items, 4, then=search)
        return await asyncio.gather(*(batches.submit(i) for i in range(3)),
                                    return_exceptions=True)

    assert [str(e) for e in asyncio.run(scenario())] == ["the search broke"] * 3


def test_a_slow_second_stage_holds_the_first_so_that_batches_grow():
    """Where the second stage (a large table's search) is the slower, one batch is in it while
    the next runs its first stage, no more: what arrives meanwhile makes the next batch rather
    than batches of one queued for the search."""
    import time as clock
    from concurrent.futures import ThreadPoolExecutor

    def search(items, encoded):
        clock.sleep(0.05)
        return encoded

    async def scenario():
        batches = QueryBatches(lambda items: items, 16, ThreadPoolExecutor(1), then=search,
                               then_executor=ThreadPoolExecutor(1))
        sent = []
        for i in range(24):  # one every 5 ms: ~10 arrive during each search
            sent.append(asyncio.ensure_future(batches.submit(i)))
            await asyncio.sleep(0.005)
        answers = await asyncio.gather(*sent)
        return answers, batches.sizes

    answers, sizes = asyncio.run(scenario())
    assert [a.result for a in answers] == list(range(24))
    assert len(sizes) <= 8 and max(sizes) >= 4, sizes  # unbounded: 24 batches of one
