"""The record of what a table holds (`TABLE/_sentray_index.json`): the table version it
describes, the runs of rows of each source it has read, and the rows its ANN index was trained
on. The rule that makes reruns exact: every change to the table is a new Lance version, and the
record is rewritten after each; a run that finds the table at another version than its record
was killed between the two, and the table is rolled back to the record's version (`LanceDB
restore`), so a killed run's half-done append is never seen, and its rows are added again."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from sentray.index.rows_to_add import PartWork, Runs
from sentray.kit import storage

logger = logging.getLogger(__name__)
STATE_FILE = "_sentray_index.json"


def add_run(done: Runs, first: int, end: int) -> Runs:
    """`done` with [first, end) added, merged into sorted disjoint runs."""
    merged: Runs = []
    for a, b in sorted([*done, [first, end]]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


@dataclass
class IndexState:
    """What the table holds at `version`."""

    version: int
    digest: str  # the embedding settings' digest
    indexed: dict[str, Runs] = field(default_factory=dict)  # source key -> runs of rows read
    rows: int = 0  # rows in the table
    null_rows: int = 0  # rows read that had no vector (null, empty, invalid_utf8): left out
    trained_rows: int = 0  # rows the ANN index was trained on (0: no ANN index)
    index_type: str | None = None
    partitions: int = 0  # the ANN index's IVF partitions

    @classmethod
    def read(cls, table: storage.Location) -> IndexState | None:
        record = storage.read_json(table.join(STATE_FILE))
        return None if record is None else cls(**record)

    def add(self, parts: Sequence[PartWork], rows: int, read: int) -> None:
        """`parts` read whole: `rows` of their `read` rows added (the rest had no vector)."""
        self.rows, self.null_rows = self.rows + rows, self.null_rows + read - rows
        for part in parts:
            for a, b in part.runs:
                self.indexed[part.source_key] = add_run(self.indexed.get(part.source_key, []),
                                                        a, b)

    def write(self, table: storage.Location, version: int) -> None:
        """The record of the table at `version`, written whole (a reader never sees half)."""
        self.version = version
        storage.write_bytes(table.join(STATE_FILE), json.dumps(asdict(self)).encode())


def roll_back(table, state: IndexState, location: storage.Location) -> bool:
    """Restore the LanceDB `table` to the version `state` describes if a killed run left it at
    another; True when it did."""
    if table.version == state.version:
        return False
    logger.info("%s is at version %d but its record at version %d: a run was stopped between "
                "the two; rolling back to version %d", location.uri, table.version,
                state.version, state.version)
    table.restore(state.version)
    state.write(location, table.version)
    return True
