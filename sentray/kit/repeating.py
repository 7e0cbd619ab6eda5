"""`Repeating`: a daemon thread that calls a function every few seconds until stopped. The one
loop behind a run's claim heartbeat (`sentray.corpus.output_records`), the row-progress line
(`sentray.corpus.row_progress`) and the watch on the Ray head (`sentray.kit.ray_cluster`)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Repeating:
    """Calls `step()` every `every` seconds on a daemon thread named `name`, from `start()` until
    `stop()`; a `step` that returns a number waits that many seconds before the next call
    instead. The first call comes after the first wait."""

    def __init__(self, name: str, step: Callable[[], float | None], every: float) -> None:
        self.name, self.step, self.every = name, step, every
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Repeating:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        wait = self.every
        while not self._stopped.wait(wait):
            chosen = self.step()
            wait = self.every if chosen is None else chosen

    def stop(self) -> None:
        """Stop, and wait for a call in progress to finish."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
