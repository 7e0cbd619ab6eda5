"""Keeping Ray's internals out of a job's output (unless the job runs with -v).

Public settings do most of it: Ray Data's progress tables off, Ray's loggers at WARNING, Hugging
Face's progress bars off. One thing Ray offers no public hook for: the worker log lines it
forwards to the driver, where a Ray Train internal actor warns every second that it cannot query
the state API (a private cluster without a dashboard has none) and every actor prints Hugging
Face's weight-loading bars. Those are filtered by replacing two private printers of the pinned
ray==2.60.0 (`ray._private.worker`). That is cosmetic, so it fails open: `private_hook` turns a
missing or changed private name into one warning, and Ray's output is then printed unfiltered.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from collections.abc import Iterator, Sequence

from sentray.kit.progress_bars import verbose

logger = logging.getLogger(__name__)

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

_warned: set[str] = set()


@contextlib.contextmanager
def private_hook(what: str) -> Iterator[None]:
    """Run code that touches Ray's private names; if one is missing or has changed (an
    AttributeError, ImportError, TypeError or KeyError), warn once that `what` is off and go
    on: the job works, only less quietly or less quickly."""
    try:
        yield
    except (AttributeError, ImportError, TypeError, KeyError) as exc:
        if what not in _warned:
            _warned.add(what)
            import ray

            logger.warning("%s is off: ray %s does not have the private hook sentray uses "
                           "(%s: %s); the job goes on without it", what, ray.__version__,
                           type(exc).__name__, exc)


def quiet_ray() -> None:
    """Keep Ray's internals out of the job's output unless the job runs with -v. Call after
    `ray.init` (it changes this driver's log forwarding and Ray Data's settings)."""
    if verbose():
        return
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the job's own row progress says the same in a line
    for name in ("ray.data", "ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # ... and not the warning that says so, nor one Ray raises on its own default options
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*ExecutionOptions.exclude_resources")
    with private_hook("filtering Ray's forwarded log lines (Ray's output is unfiltered)"):
        filter_worker_logs(RAY_NOISE)


def filter_worker_logs(noise: Sequence[str]) -> None:
    """Drop forwarded log lines that `keep_lines` rejects; the rest print as Ray prints them.
    Worker output reaches the driver's console through the "ray_print_logs" handler of Ray's
    log dispatcher, and the raylet's notes through `ray._private.worker.print_to_stdstream`
    itself, so both are pointed at one filtering printer. Raises AttributeError (or another
    error `private_hook` takes) when those private names are gone."""
    from ray._private import worker

    original = getattr(worker.print_to_stdstream, "__wrapped__", worker.print_to_stdstream)
    dispatcher = worker.global_worker_stdstream_dispatcher
    handlers = dispatcher.handlers  # checked before anything is replaced
    skipping: dict = {}

    def print_filtered(data: dict, ignore_prefix: bool) -> None:
        lines = keep_lines(data, noise, skipping)
        if lines:
            original({**data, "lines": lines}, ignore_prefix=ignore_prefix)

    print_filtered.__wrapped__ = original  # type: ignore[attr-defined]
    worker.print_to_stdstream = print_filtered
    if any(name == "ray_print_logs" for name, _ in handlers):
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
    import sys

    # both read it when imported; a library imported already is told directly (importing
    # transformers here to tell it cost 0.7 s of every command's start)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub.utils" in sys.modules:
        sys.modules["huggingface_hub.utils"].disable_progress_bars()
    if "transformers.utils.logging" in sys.modules:
        sys.modules["transformers.utils.logging"].disable_progress_bar()
