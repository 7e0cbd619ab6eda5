"""The record of what an output depends on (its settings, `OutputFolder.settings_record`), so
that a rerun never mixes two configurations in one output: the corpus jobs' rows
(`sentray.corpus.output_records`) and a training run's model (`sentray.contrastive.job`) are
compared against it before anything runs."""

from __future__ import annotations

import hashlib
import json

from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder

# A setting that only names what another identifies exactly: `model` (a Hub id, a name, or a
# folder: the same weights under three spellings) beside `model_files` (a digest of the files
# themselves). The name is recorded for the reader, and compared only when the files could not
# be fingerprinted (a Hub id not in the local cache: `model_files` is then "hub:<id>").
NAMED_BY = {"model": "model_files"}


class Settings(dict):
    """A job's settings, written as the plain dict they are. A kind of output whose records once
    lacked a setting subclasses it and says what the absence meant: `implied` maps a setting to
    (the setting it followed, {that setting's value: the value it implied}); a plain dict
    implies nothing."""

    @property
    def implied(self) -> dict[str, tuple[str, dict]]:
        return {}


def comparable(settings: dict, implied: dict[str, tuple[str, dict]] | None = None) -> dict:
    """`settings` without the names that their identifying setting makes redundant, and
    without the runtime of fp32 vectors (every fp32 runtime gives the same vectors, within
    1e-5); a setting a record lacks is what `implied` (default: the settings' own) says its
    absence meant."""
    implied = getattr(settings, "implied", {}) if implied is None else implied
    dropped = {name for name, identity in NAMED_BY.items()
               if not str(settings.get(identity, "hub:")).startswith("hub:")}
    if settings.get("precision") == "fp32":
        dropped.add("runtime")
    kept = {key: value for key, value in settings.items() if key not in dropped}
    for name, (followed, values) in implied.items():
        if followed in kept and name not in dropped and name not in kept:
            kept[name] = values.get(kept[followed])
    return kept


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(comparable(settings), sort_keys=True,
                                     default=str).encode()).hexdigest()


def read_settings(folder: storage.Location) -> dict | None:
    """The settings recorded in `folder`, or None."""
    record = OutputFolder(folder).settings_record()
    return None if record is None else record.get("settings", {})


def write_settings(folder: storage.Location, settings: dict, job: str) -> None:
    OutputFolder(folder).write_settings_record(job, settings)


def differences(stored: dict, wanted: dict) -> list[str]:
    """'key: stored value (stored) != this run's value (this run)' for each key that differs
    (a model's name is not compared where its files are; a setting an older record lacks is
    what this run's settings say its absence meant: `comparable`)."""
    implied = getattr(wanted, "implied", {})
    stored, wanted = comparable(stored, implied), comparable(wanted, implied)
    keys = sorted(set(stored) | set(wanted))
    return [f"{key}: {stored.get(key)!r} (stored) != {wanted.get(key)!r} (this run)"
            for key in keys if stored.get(key) != wanted.get(key)]


def mixing_error(where: str, changed: list[str], remedy: str) -> ValueError:
    return ValueError(f"{where} holds what was made with other settings, and this run would "
                      "mix them in:\n  " + "\n  ".join(changed) + f"\n{remedy}")
