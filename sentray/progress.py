"""What a person watching a job sees: its own progress, and not Ray's internals.

- `RowProgress`: rows written / rows in, rate and time left, for a corpus job. On a terminal a
  tqdm bar; in a log (stderr not a terminal) one line every `every` seconds. It counts from the
  part names the job writes (sentray.parts), so it needs nothing from the actors.
- `steps` and `bar`: tqdm over an iterable (the head search, the STS tasks) or a count (the
  LSTM's steps), on a terminal only, so logs stay one line per event.
- `quiet_ray`: unless `-v`, Ray Data's own progress tables and INFO lines stay out of the job's
  output, and so do the worker log lines that are Ray's noise, not the job's (a Ray Train
  internal actor warns every second that it cannot query the state API, which a private
  cluster without a dashboard does not have; Hugging Face's weight-loading bars in every actor).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from sentray import parts, storage
from sentray.corpus import Source, estimate_rows

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Forwarded worker log lines that are Ray's or a library's noise, not the job's (unless -v):
# every line of these Ray-internal actors (a Ray Train helper that polls the state API, which
# a private cluster without a dashboard lacks, every second, and warns each time) ...
RAY_INTERNAL_ACTORS = frozenset({"PlacementGroupCleaner"})
# ... the autoscaler's notes (a fixed local cluster has nothing to scale) ...
RAY_INTERNAL_PIDS = frozenset({"autoscaler"})
# ... and lines holding one of these, with the traceback that follows one. (The raylet's
# notes are kept, for they report real failures too, but for its count of worker processes.)
RAY_NOISE = (
    "Failed to query Ray Train Controller actor state",
    "Failed to send resource request",  # Ray Train's autoscaling client, on a fixed cluster
    "Requesting resources: {",
    "training worker group of size",
    "- (ip=",  # the worker group's members, one line each
    "Setting up process group for",
    "Moving model to device",
    "Checkpoint successfully created at",
    "Reporting training result",
    "Starting execution of Dataset",
    "Execution plan of Dataset",
    "execution finished in",
    "Progress bars disabled",
    "has constructor arguments in the object store",  # ray-project/ray#53727
    "Loading weights:",
    "Writing model shards:",
    "PYTHON worker processes have been started",  # Ray Data's tasks, normal on a small node
)


def verbose() -> bool:
    """True when the job was started with -v (its logging at DEBUG)."""
    return logging.getLogger("sentray").isEnabledFor(logging.DEBUG)


def on_terminal() -> bool:
    return sys.stderr.isatty()


def steps(items: Iterable[T], *, desc: str, total: int | None = None) -> Iterator[T]:
    """`items`, with a progress bar on a terminal (nothing in a log)."""
    if not on_terminal():
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, leave=False, dynamic_ncols=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def bar(total: int, *, desc: str, enabled: bool = True):
    """A tqdm bar of `total` steps on a terminal (when `enabled`: rank 0, say); a bar that does
    nothing in a log, where the caller's own log lines say the same."""
    if not (enabled and on_terminal()):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, dynamic_ncols=True)


def rows_written(folders: Sequence[storage.Location], source_key: str) -> int:
    """Rows of one source already in `folders`: each row range once, wherever it went (an
    augmentation writes a range's kept and rejected rows to two folders)."""
    ranges = {(first, end) for folder in folders
              for first, end, _, _ in parts.row_ranges(folder, source_key)}
    return sum(end - first for first, end in ranges)


class RowProgress:
    """Rows written by a corpus job, polled from its folders by a background thread."""

    def __init__(self, folders: Sequence[storage.Location], sources: Sequence[Source], *,
                 every: float = 10.0, poll: float = 1.0) -> None:
        self.folders, self.sources = list(folders), list(sources)
        self.total = sum(estimate_rows(source) for source in sources)
        self.exact = all(source.num_rows is not None for source in sources)
        self.every, self.poll = every, poll
        self.done = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._started = time.monotonic()

    def count(self) -> int:
        return sum(rows_written(self.folders, source.key) for source in self.sources)

    def line(self, seconds: float) -> str:
        rate = self.done / seconds if seconds > 0 else 0.0
        total = f"{self.total:,}" if self.exact else f"~{self.total:,}"
        left = (f", about {max(self.total - self.done, 0) / rate:.0f} s left"
                if rate > 0 and self.done < self.total else "")
        return f"{self.done:,}/{total} rows, {rate:,.0f} rows/s{left}"

    def __enter__(self) -> RowProgress:
        if on_terminal():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, unit="rows", dynamic_ncols=True,
                             desc="rows" if self.exact else "rows (estimated total)")
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="RowProgress", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        last_line = time.monotonic()
        while not self._stop.wait(self.poll):
            self._update()
            now = time.monotonic()
            if self._bar is None and now - last_line >= self.every:
                logger.info("%s", self.line(now - self._started))
                last_line = now

    def _update(self) -> None:
        try:
            done = self.count()
        except OSError:  # a listing that failed (S3 hiccup): the next poll tries again
            return
        if self._bar is not None:
            if done > self._bar.total:
                self._bar.total = done
            self._bar.update(done - self._bar.n)
        self.done = done

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._update()
        if self._bar is not None:
            self._bar.close()
        else:  # the log's one closing line
            self.total, self.exact = max(self.total, self.done), True
            logger.info("%s", self.line(time.monotonic() - self._started))


def quiet_ray() -> None:
    """Keep Ray's internals out of the job's output unless the job runs with -v. Call after
    `ray.init` (it changes this driver's log forwarding and Ray Data's settings)."""
    if verbose():
        return
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the job's own RowProgress says the same in a line
    for name in ("ray.data", "ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # ... and not the warning that says so, nor one Ray raises on its own default options
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*ExecutionOptions.exclude_resources")
    _filter_worker_logs(RAY_NOISE)


def _filter_worker_logs(noise: Sequence[str]) -> None:
    """Drop forwarded log lines that `keep_lines` rejects; the rest print as Ray prints them.
    Ray offers no public hook. Worker output reaches the driver's console through the
    "ray_print_logs" handler of its log dispatcher, and the raylet's notes through
    `ray._private.worker.print_to_stdstream` itself (pinned ray==2.60.0; tested), so both are
    pointed at one filtering printer."""
    import functools

    from ray._private import worker

    original = getattr(worker.print_to_stdstream, "__wrapped__", worker.print_to_stdstream)
    skipping: dict = {}

    def print_filtered(data: dict, ignore_prefix: bool) -> None:
        lines = keep_lines(data, noise, skipping)
        if lines:
            original({**data, "lines": lines}, ignore_prefix=ignore_prefix)

    print_filtered.__wrapped__ = original  # type: ignore[attr-defined]
    worker.print_to_stdstream = print_filtered
    dispatcher = worker.global_worker_stdstream_dispatcher
    if any(name == "ray_print_logs" for name, _ in dispatcher.handlers):
        dispatcher.remove_handler("ray_print_logs")
        dispatcher.add_handler("ray_print_logs",
                               functools.partial(print_filtered, ignore_prefix=False))


def _is_traceback_line(line: str) -> bool:
    return (line.startswith((" ", "\t", "Traceback", "During handling", "The above exception"))
            or ": " in line and line.split(": ", 1)[0].replace(".", "").replace("_", "").isalnum()
            and line.split(": ", 1)[0].endswith(("Error", "Exception", "Timeout")))


def keep_lines(data: dict, noise: Sequence[str], skipping: dict | None = None) -> list[str]:
    """The lines of one forwarded batch that are the job's: none from Ray's internal actors
    and processes, none holding a `noise` substring, nor the traceback that follows one (which
    may come in the process's next batch: `skipping` carries that across calls, per pid)."""
    if data.get("actor_name") in RAY_INTERNAL_ACTORS or data.get("pid") in RAY_INTERNAL_PIDS:
        return []
    skipping = {} if skipping is None else skipping
    pid = data.get("pid")
    kept = []
    for line in data.get("lines", []):
        if any(n in line for n in noise):
            skipping[pid] = True
            continue
        if skipping.get(pid) and _is_traceback_line(line):
            continue
        skipping[pid] = False
        if line.strip():  # a blank line alone says nothing (Ray Train's print patch adds them)
            kept.append(line)
    return kept


def quiet_libraries() -> None:
    """Unless -v: no Hugging Face progress bars (weights loaded and saved), in this process
    and in the workers of a cluster it starts (they inherit the environment)."""
    if verbose():
        return
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import huggingface_hub.utils
        import transformers.utils.logging

        huggingface_hub.utils.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - both are dependencies
        pass
