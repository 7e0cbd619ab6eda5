"""Rows written / rows in, rate and time left, for a corpus job: `RowProgress`. On a terminal a
tqdm bar; in a log (stderr not a terminal) one line every `every` seconds. It counts from the
part names the job writes (`sentray.corpus.part_files`), so it needs nothing from the actors.

Rows land in blocks (thousands of rows a part), after a start (model load, the precision probe,
actors starting) that writes none. So a line says how long the start has taken until the first
rows land, the rate is measured from the first block landed to the last (the start left out;
with one block landed, from the start), and the time left counts down between blocks instead of
growing as a rate over the whole time would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from sentray.corpus.source_runs import parts_of
from sentray.corpus.sources import Source, estimate_all
from sentray.kit import storage
from sentray.kit.progress_bars import on_terminal
from sentray.kit.repeating import Repeating

logger = logging.getLogger(__name__)


def rows_written(folders: Sequence[storage.Location], source_key: str) -> int:
    """Rows of one source already in `folders`: each row range once, wherever it went (an
    augmentation writes a range's kept and rejected rows to two folders)."""
    ranges = {(part.first, part.end) for folder in folders for part in parts_of(folder, source_key)}
    return sum(end - first for first, end in ranges)


class RowProgress:
    """Rows written by a corpus job, polled from its folders by a background thread."""

    def __init__(self, folders: Sequence[storage.Location], sources: Sequence[Source], *,
                 every: float = 10.0, poll: float = 1.0) -> None:
        self.folders, self.sources = list(folders), list(sources)
        self.total = sum(estimate_all(sources))
        self.exact = all(source.num_rows is not None for source in sources)
        self.every, self.poll = every, poll
        self.done = 0
        self._finished: dict[str, int] = {}  # source key -> rows, once all are written
        self._loop: Repeating | None = None
        self._last_line = 0.0
        self._bar = None
        self._started = time.monotonic()
        self._first: tuple[float, int] | None = None  # (when, rows) the first rows landed
        self._changed = 0.0  # when the rows written last grew

    def count(self) -> int:
        """Rows written so far; a source found complete is not listed again."""
        total = 0
        for source in self.sources:
            if source.key in self._finished:
                total += self._finished[source.key]
                continue
            rows = rows_written(self.folders, source.key)
            if source.num_rows is not None and rows >= source.num_rows:
                self._finished[source.key] = rows
            total += rows
        return total

    def rate(self) -> float:
        """Rows/s from the first block landed to the last (from the start, with one landed)."""
        if self._first is None:
            return 0.0
        since, rows = self._first
        if self._changed > since and self.done > rows:
            return (self.done - rows) / (self._changed - since)
        return self.done / max(self._changed - self._started, 1e-9)

    def line(self, now: float) -> str:
        total = f"{self.total:,}" if self.exact else f"~{self.total:,}"
        if self._first is None:
            return f"0/{total} rows: starting ({now - self._started:.0f} s: model, plan, actors)"
        rate = self.rate()
        # counted down from the last block: the rows still to do at the measured rate
        seconds_left = (max(self.total - self.done, 0) / rate - (now - self._changed)
                        if rate > 0 else 0.0)
        left = f", about {seconds_left:.0f} s left" if self.done < self.total and \
            seconds_left >= 1 else ""
        return f"{self.done:,}/{total} rows, {rate:,.0f} rows/s{left}"

    def __enter__(self) -> RowProgress:
        if on_terminal():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, unit="rows", dynamic_ncols=True,
                             desc="rows" if self.exact else "rows (estimated total)")
        self._started = self._last_line = time.monotonic()
        self._loop = Repeating("RowProgress", self._poll, self.poll).start()
        return self

    def _poll(self) -> float:
        """One poll; the seconds to the next: listing never takes more than a tenth of the time
        (S3 LISTs at a million parts)."""
        listed = time.monotonic()
        self._update()
        now = time.monotonic()
        if self._bar is None and now - self._last_line >= self.every:
            logger.info("%s", self.line(now))
            self._last_line = now
        return max(self.poll, 10 * (now - listed))

    def _update(self) -> None:
        try:
            done = self.count()
        except OSError:  # a listing that failed (S3 hiccup): the next poll tries again
            return
        if self._bar is not None:
            if done > self._bar.total:
                self._bar.total = done
            self._bar.update(done - self._bar.n)
        if done > self.done:
            self._changed = time.monotonic()
            if self._first is None:
                self._first = (self._changed, done)
        self.done = done

    def __exit__(self, *exc) -> None:
        if self._loop is not None:
            self._loop.stop()
        self._update()
        if self._bar is not None:
            self._bar.close()
        else:  # the log's one closing line
            self.total, self.exact = max(self.total, self.done), True
            logger.info("%s", self.line(time.monotonic()))
