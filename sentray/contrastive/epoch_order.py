"""The seeded order of a training epoch: a hash of (seed, epoch, row id) per row.

The driver orders an epoch of one sort partition with it (`sentray.contrastive.input_data`); a larger epoch
is ordered by Ray Data's tasks, and a task's process imports the module of what it runs: this one
imports pyarrow and the standard library only, so those processes do not pay for torch (a few
seconds of CPU each on a small machine; `tests/test_layout.py` keeps it so)."""

from __future__ import annotations

import hashlib

import pyarrow as pa


class EpochOrder:
    """Adds `order`, a hash of (seed, epoch, id): sorting on it shuffles the rows the same way
    on every run, whatever the block layout. With `sort`, also sorts the table on it (for an
    epoch ordered as one table)."""

    def __init__(self, seed: int, epoch: int, sort: bool = False) -> None:
        self.salt = f"{seed}:{epoch}:".encode()
        self.sort = sort

    def __call__(self, table: pa.Table) -> pa.Table:
        ids = table.column("id").cast(pa.string()).to_pylist()
        keys = [int.from_bytes(hashlib.blake2b(self.salt + i.encode(), digest_size=8).digest(),
                               "little") for i in ids]
        table = table.append_column("order", pa.array(keys, pa.uint64()))
        return table.sort_by("order") if self.sort else table
