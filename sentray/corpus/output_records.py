"""What a corpus job keeps at the top of its output folder besides the rows: the settings its
rows depend on, the claims of the runs writing it, and the record of the runs that did (so that
a rerun never mixes two configurations, and every run that did work is on record).

- `_settings.json` records what the output's rows depend on (for embeddings: the model and its
  files, pooling, dimension, normalization, dtype, ...). A run whose settings differ from the
  stored ones stops before Ray starts, naming each differing key with both values; `--overwrite`
  deletes the job's own files (`remove_job_files`, only those) and starts afresh. Settings that
  do not change the rows (actors, batch sizes, GPUs) are not recorded and may differ.
- `_runs/<run id>.json` is each running job's claim, refreshed every `HEARTBEAT_S` seconds. A
  run that finds a live claim with other settings stops before writing anything; two runs with
  the same settings both proceed (they write the same part names). A claim not refreshed for
  `STALE_S` seconds belongs to a run that died without cleaning up: it is reported and removed.
- `_summary.json` (`write_summary`, `recorded`) holds the row accounting of the whole output,
  the latest run's figures at the top (processed files, seconds, rows/s, timings), and `runs`,
  one entry for every run that did work there, oldest first. A rerun that finds nothing to do
  writes nothing: the record of the runs that did the work (and their `_config.yaml`) stays as
  they left it.
"""

from __future__ import annotations

import logging
import os
import posixpath
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs

from sentray.corpus import part_files
from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder
from sentray.kit.repeating import Repeating
from sentray.kit.settings_record import (
    differences,
    mixing_error,
    read_settings,
    settings_digest,
    write_settings,
)

logger = logging.getLogger(__name__)

HEARTBEAT_S = 10.0
STALE_S = 60.0


def holds_rows(folder: storage.Location) -> bool:
    """Whether `folder` holds any part file of a corpus job."""
    return any(info.type == pafs.FileType.File
               and part_files.PART_NAME.match(posixpath.basename(info.path))
               for info in storage.entries(folder, recursive=True))


def check_settings(folders: Sequence[storage.Location], settings: dict) -> None:
    """ValueError when the output already holds rows made with other settings."""
    stored = read_settings(folders[0])
    if stored is None or not any(holds_rows(folder) for folder in folders):
        return
    changed = differences(stored, settings)
    if changed:
        raise mixing_error(folders[0].uri, changed,
                           "Rerun with the stored settings, write to another output, or add "
                           "--overwrite to delete this job's files there and start afresh.")


def remove_job_files(folders: Sequence[storage.Location]) -> int:
    """--overwrite: delete what a corpus job writes in `folders` (part files, the files in
    `OutputFolder.JOB_FILES`), and folders left empty by that; nothing else. The run claims are kept: the
    overwriting run deletes under its own claim, which must stay for others to see (a dead
    run's claim is reported and taken over as in any run). Returns the files deleted."""
    deleted = 0
    for folder in folders:
        infos = storage.entries(folder, recursive=True)
        for info in infos:
            name, parent = posixpath.basename(info.path), posixpath.dirname(info.path)
            ours = (part_files.PART_NAME.match(name) or name.startswith(".tmp-")
                    or (parent == folder.path and name in OutputFolder.JOB_FILES))
            if info.type == pafs.FileType.File and ours:
                folder.filesystem.delete_file(info.path)
                deleted += 1
        for info in sorted(infos, key=lambda i: -len(i.path)):  # deepest first
            if info.type == pafs.FileType.Directory and not folder.filesystem.get_file_info(
                    pafs.FileSelector(info.path)):
                folder.filesystem.delete_dir(info.path)
    return deleted


def prepare(folders: Sequence[storage.Location], settings: dict, job: str, overwrite: bool,
            files: Mapping[str, bytes]) -> None:
    """Under the run's claim, before any row is written: --overwrite's deletion of the job's
    own files (`remove_job_files`), else the settings checked again (another run may have
    written since the first check); the folders made; the settings record written, then the
    job's `files` beside its rows ({name: bytes}, in order) at the top of the output."""
    if overwrite:
        deleted = remove_job_files(folders)
        logger.info("--overwrite: deleted %d files of this job in %s", deleted,
                    ", ".join(f.uri for f in folders))
    else:
        check_settings(folders, settings)
    for folder in folders:
        folder.filesystem.create_dir(folder.path, recursive=True)
    write_settings(folders[0], settings, job)
    for name, data in files.items():
        OutputFolder(folders[0]).write_bytes(name, data)


@dataclass(frozen=True)
class Claim:
    run: str
    host: str
    pid: int
    started: float
    heartbeat: float
    digest: str

    def describe(self) -> str:
        return (f"run {self.run} (host {self.host}, pid {self.pid}, started "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started))})")


class RunClaim:
    """This run's claim on an output folder, held while the job runs (a context manager)."""

    def __init__(self, output: storage.Location, settings: dict) -> None:
        self.output, self.digest = output, settings_digest(settings)
        self.run = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        self.folder = OutputFolder(output).claims()
        self.location = self.folder.join(f"{self.run}.json")
        self.started = time.time()
        self._heartbeat: Repeating | None = None

    def claims(self) -> list[Claim]:
        folder, found = self.folder, []
        for info in storage.entries(folder):
            if not info.path.endswith(".json"):  # a claim being written (`.tmp-<id>`)
                continue
            values = storage.read_json(storage.Location(folder.filesystem, info.path, info.path))
            if values is not None and info.path != self.location.path:
                found.append(Claim(**values))
        return found

    def others_running(self) -> list[Claim]:
        """Live claims of other runs, whatever their settings: a run beside this one that may
        still be writing parts (so this one must not merge them)."""
        return [claim for claim in self.claims() if time.time() - claim.heartbeat <= STALE_S]

    def _conflicts(self) -> list[Claim]:
        """Live claims with other settings; stale claims are reported and removed."""
        live = []
        for claim in self.claims():
            age = time.time() - claim.heartbeat
            if age > STALE_S:
                logger.warning("%s stopped %.0f s ago without cleaning up its claim on %s (a "
                               "stale lock): removed", claim.describe(), age, self.output.uri)
                self.output.filesystem.delete_file(self.folder.join(f"{claim.run}.json").path)
            elif claim.digest != self.digest:
                live.append(claim)
        return live

    def _refuse(self, other: Claim) -> None:
        raise ValueError(f"{other.describe()} is writing {self.output.uri} with other settings "
                         "right now; this run stops before writing anything. Wait for it, write "
                         "elsewhere, or stop it.")

    def __enter__(self) -> RunClaim:
        for other in self._conflicts():
            self._refuse(other)
        self.output.filesystem.create_dir(self.folder.path, recursive=True)
        self._beat()
        # Two runs that started together both wrote a claim: the later one (by start, then
        # by id) steps back.
        for other in self._conflicts():
            if (other.started, other.run) < (self.started, self.run):
                self._release()
                self._refuse(other)
        self._heartbeat = Repeating("RunClaim", self._keep_alive, HEARTBEAT_S).start()
        return self

    def _beat(self) -> None:
        storage.write_json(self.location, {"run": self.run, "host": socket.gethostname(),
                                    "pid": os.getpid(), "started": self.started,
                                    "heartbeat": time.time(), "digest": self.digest})

    def _keep_alive(self) -> None:
        try:
            self._beat()
        except OSError as exc:  # a storage hiccup: the next beat tries again
            logger.warning("could not refresh this run's claim on %s: %s", self.output.uri, exc)

    def _release(self) -> None:
        """Delete this run's claim, and the claims folder when no other run holds one."""
        try:
            self.output.filesystem.delete_file(self.location.path)
            if not self.output.filesystem.get_file_info(pafs.FileSelector(self.folder.path)):
                self.output.filesystem.delete_dir(self.folder.path)
        except (FileNotFoundError, OSError):
            pass

    def __exit__(self, *exc) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
        self._release()


# -- the run records ------------------------------------------------------------------------------


def write_summary(folder: storage.Location, summary: dict) -> None:
    OutputFolder(folder).write_summary(summary)


def read_summary(folder: storage.Location) -> dict | None:
    """The output's summary, or None (none yet, or unreadable)."""
    return OutputFolder(folder).summary()


def this_run(started_at: float, processed: list[str], rows: int, seconds: float,
             timings: dict | None) -> dict:
    """One run's entry: when it started (UTC), the files it processed, its rows, seconds,
    rows/s and timings (None: it ran no Ray work)."""
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            "processed_this_run": processed, "rows_this_run": rows,
            "seconds": round(seconds, 2),
            "sentences_per_second": round(rows / seconds, 1) if processed and rows else None,
            "timings": timings}


def recorded(previous: dict | None, summary: dict, run: dict, settings: dict, config: dict,
             overwrite: bool) -> dict:
    """The summary to write: the whole output's accounting, this run's figures at the top, the
    settings and config, and every run that did work (a run with --overwrite starts the list
    afresh)."""
    runs = [] if previous is None or overwrite else previous.get("runs", [])
    return {**summary, **run, "settings": settings, "config": config, "runs": [*runs, run]}
