"""What a corpus job records of its runs in OUTPUT/_summary.json: the row accounting of the
whole output, the latest run's figures at the top (processed files, seconds, rows/s, timings),
and `runs`, one entry for every run that did work there, oldest first. A rerun that finds
nothing to do writes nothing: the record of the runs that did the work (and their
`_config.yaml`) stays as they left it."""

from __future__ import annotations

import json
import time

from sentray.kit import storage
from sentray.kit.settings_record import read_json

SUMMARY_FILE = "_summary.json"


def write_summary(folder: storage.Location, summary: dict) -> None:
    storage.write_bytes(folder.join(SUMMARY_FILE),
                        json.dumps(summary, indent=1, default=str).encode())


def read_summary(folder: storage.Location) -> dict | None:
    """The output's `_summary.json`, or None (none yet, or unreadable)."""
    return read_json(folder.join(SUMMARY_FILE))


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
