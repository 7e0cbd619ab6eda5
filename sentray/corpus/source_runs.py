"""Which rows of each input file an output already holds, from its part names alone.

A part is named by the run of rows it covers (`part-<first>-<end>-of-<rows>[-rows-<n>]`); a run
is done when its rows add up across the job's folders (kept + rejected). `source_runs` finds the
done runs of a source, the runs still missing (what a rerun reads and writes, so a killed run
keeps every part it finished), and the parts to delete: a run that died half-way (its rows do not
add up), a part inside a bigger done part (left by a compaction that stopped before deleting
what it merged), or parts of an input file whose row count has changed since.

The resume plan of a run: `pending_sources`, each input file not yet complete with the runs of
its rows still to do (`Pending`), after the parts to delete are deleted.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from sentray.corpus.part_files import PART_NAME
from sentray.corpus.sources import Source, estimate_rows
from sentray.kit import storage

logger = logging.getLogger(__name__)

Run = tuple[int, int]  # [first, end) rows of a source


@dataclass(frozen=True)
class Part:
    first: int
    end: int
    total: int  # the source's rows
    rows: int  # rows this part holds (fewer than end - first when a run is split over folders)
    path: str
    folder: storage.Location = field(repr=False)


def parts_of(folder: storage.Location, source_key: str) -> list[Part]:
    """Every part of one source in `folder`."""
    parts = []
    for info in storage.entries(folder.join(source_key)):
        match = PART_NAME.match(posixpath.basename(info.path))
        if match:
            first, end, total, rows = match.groups()
            first, end, total = int(first), int(end), int(total)
            held = end - first if rows is None else int(rows)
            parts.append(Part(first, end, total, held, info.path, folder))
    return parts


@dataclass(frozen=True)
class SourceRuns:
    """What the folders hold of one source."""

    total: int | None  # the source's rows, as the parts (or the input's metadata) say
    done: tuple[Run, ...]  # runs whose rows are all there, in order, disjoint
    stale: tuple[Part, ...]  # parts to delete before the source is (re)done
    parts: tuple[Part, ...]  # the parts of the done runs

    @property
    def missing(self) -> list[Run] | None:
        """The runs of [0, total) not done; None: all of it (the row count is not known)."""
        if self.total is None:
            return None
        runs, position = [], 0
        for first, end in self.done:
            if first > position:
                runs.append((position, first))
            position = end
        if position < self.total:
            runs.append((position, self.total))
        return runs

    @property
    def complete(self) -> bool:
        """Every row there; a 0-row source is complete once its empty part is."""
        return self.total is not None and self.missing == [] and (self.total > 0
                                                                  or bool(self.parts))


def source_runs(folders: Sequence[storage.Location], source: Source) -> SourceRuns:
    """The done runs, missing runs and stale parts of `source` in `folders`."""
    parts = [part for folder in folders for part in parts_of(folder, source.key)]
    totals = {part.total for part in parts}
    if len(totals) > 1 or (totals and source.num_rows is not None
                           and totals != {source.num_rows}):
        return SourceRuns(source.num_rows, (), tuple(parts), ())  # the input changed
    total = totals.pop() if totals else source.num_rows
    by_run: dict[Run, list[Part]] = {}
    for part in parts:
        by_run.setdefault((part.first, part.end), []).append(part)
    whole = [run for run, held in by_run.items()
             if sum(p.rows for p in held) == run[1] - run[0]]
    done: list[Run] = []
    for run in sorted(whole, key=lambda r: (r[0] - r[1], r[0])):  # longest first
        if all(run[1] <= a or b <= run[0] for a, b in done):
            done.append(run)
    done.sort()
    kept = {run for run in done}
    stale = [p for run, held in by_run.items() if run not in kept for p in held]
    return SourceRuns(total, tuple(done), tuple(stale),
                      tuple(p for run in done for p in by_run[run]))


def remove_temporaries(folders: Sequence[storage.Location], source_key: str) -> int:
    """Delete the `.tmp-*` files a write left in a source's folders (a part being written when
    its process died or its disk filled: never a part, never counted). Returns how many."""
    removed = 0
    for folder in folders:
        for info in storage.entries(folder.join(source_key)):
            if posixpath.basename(info.path).startswith(".tmp-"):
                folder.filesystem.delete_file(info.path)
                removed += 1
    return removed


def remove_parts(parts: Sequence[Part]) -> None:
    for part in parts:
        try:
            part.folder.filesystem.delete_file(part.path)
        except FileNotFoundError:
            pass


def parts_in(runs: SourceRuns, folder: storage.Location) -> list[Part]:
    """The done parts of one folder, in row order."""
    return [part for part in runs.parts if part.folder.path == folder.path]


def incomplete_sources(folders: Sequence[storage.Location], sources: Sequence[Source]) -> list:
    return [s.uri for s in sources if not source_runs(folders, s).complete]


# -- the resume plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    """A source with rows still to do: `runs` of them, or all of it (None)."""

    source: Source
    runs: list[Run] | None

    @property
    def rows(self) -> int:
        """Rows to do (text files without parts: estimated from their first MiB)."""
        return (estimate_rows(self.source) if self.runs is None
                else sum(end - first for first, end in self.runs))


def pending_sources(sources: Sequence[Source],
                    folders: Sequence[storage.Location]) -> list[Pending]:
    """The sources not yet complete in `folders`, with the runs of rows still to do: the parts
    a stopped run finished are kept; parts of runs that died half-way (or of an input whose row
    count has changed) are deleted, and so are parts a stopped compaction left behind."""
    todo = []
    for source in sources:
        runs = source_runs(folders, source)
        remove_parts(runs.stale)
        if not runs.complete:
            remove_temporaries(folders, source.key)
        if not runs.complete:
            todo.append(Pending(source, runs.missing))
    partial = sum(1 for p in todo if p.runs is not None and p.runs != [(0, p.source.num_rows)])
    logger.info("%d input files, %d already done, %d to process (%d of them in part)",
                len(sources), len(sources) - len(todo), len(todo), partial)
    return todo
