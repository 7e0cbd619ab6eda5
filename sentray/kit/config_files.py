"""A job's configuration as a flat YAML file: what `--config FILE.yaml` reads (as the default
instance the command line's flags then override) and what a job writes next to its outputs
(`OUTPUT/_config.yaml`), so that the same command with `--config OUTPUT/_config.yaml` repeats
the run.

The keys are the flags without their dashes (`batch_size: 16` for `--batch-size 16`); nested
configs (an embed job's corpus, encoder and actor pool) are flattened, as their flags are.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
import typing
from typing import Annotated, Any, Literal

import tyro
import yaml

from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder

_SWITCH_WORDS = {"true": True, "false": False, "auto": None, "none": None}


def _is_suppressed(hint: Any) -> bool:
    return typing.get_origin(hint) is Annotated and any(
        marker is tyro.conf.Suppress for marker in hint.__metadata__)


def flag_name(item: dataclasses.Field, hint: Any) -> str:
    """The flag of a field: its name, or the name its `tyro.conf.arg(name=...)` gives it (the
    trainer's encoder batch is `eval_batch_size`: `TrainEncoderConfig`)."""
    if typing.get_origin(hint) is Annotated:
        for marker in hint.__metadata__:
            if getattr(marker, "name", None) and hasattr(marker, "constructor_factory"):
                return marker.name
    return item.name


def _bare(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


def is_single_flag(value_or_type: Any) -> bool:
    """A dataclass written as one flag value, such as SIFTER's lambdas `1,1,1`: it has
    `spec()` (the value as text) and `parse(text)`."""
    return hasattr(value_or_type, "spec") and hasattr(value_or_type, "parse")


def _is_group(hint: Any) -> bool:
    """A nested config: a dataclass that is not a single flag."""
    return dataclasses.is_dataclass(hint) and not is_single_flag(hint)


def flat_fields(config_type: type) -> dict[str, Any]:
    """Every flag of a config type: {field name: type}, nested configs flattened."""
    fields: dict[str, Any] = {}
    hints = typing.get_type_hints(config_type, include_extras=True)
    for item in dataclasses.fields(config_type):
        hint = hints[item.name]
        if _is_suppressed(hint):
            continue
        nested = (flat_fields(_bare(hint)) if _is_group(_bare(hint))
                  else {flag_name(item, hint): _bare(hint)})
        clash = set(nested) & set(fields)
        assert not clash, f"{config_type.__name__}: flags {clash} defined twice"
        fields.update(nested)
    return fields


def as_record(config: Any) -> dict[str, Any]:
    """The config as JSON values (what a summary and a log line record): `dataclasses.asdict`,
    values JSON does not know written as text."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {item.name: plain(getattr(value, item.name))
                    for item in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return json.loads(json.dumps(plain(config), default=str))


def flat_record(config: Any) -> dict[str, Any]:
    """`as_record` with nested configs flattened as their flags are (a trainer's encoder and
    cluster): one key per flag, what a trainer's summary records."""
    record: dict[str, Any] = {}
    hints = typing.get_type_hints(type(config), include_extras=True)
    for item in dataclasses.fields(config):
        hint = hints[item.name]
        if _is_suppressed(hint):
            continue
        value = getattr(config, item.name)
        if _is_group(type(value)):
            record.update(flat_record(value))
        else:
            record[flag_name(item, hint)] = as_record(value)
    return record


def flat_values(config: Any) -> dict[str, Any]:
    """The config's flags and their values, nested configs flattened, in YAML-ready types."""
    values: dict[str, Any] = {}
    fields = flat_fields(type(config))
    hints = typing.get_type_hints(type(config), include_extras=True)
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        flag = flag_name(item, hints[item.name])
        if dataclasses.is_dataclass(value) and not is_single_flag(value):
            values.update(flat_values(value))
        elif flag in fields:
            values[flag] = value.spec() if is_single_flag(value) else value
    return values


# old flag names -> new ones, accepted with a one-line deprecation notice
# (sentray.cli.renamed_flags): evaluate's and train_lstm's --out (--output, as every job's),
# embed's --calibration-rows (the output code book's rows, --code-book-rows: "calibration" is
# NNCF's int8 calibration only)
RENAMED = {"out": "output", "calibration_rows": "code_book_rows"}
# old keys of a config file only, where the argument is positional (typed without a name on the
# command line): the embedding output folder that index, search and serve read is `embeddings`
# in all three (search called it `index`, serve `output`)
RENAMED_KEYS = {**RENAMED, "index": "embeddings", "output": "embeddings"}


def read_config_file(config_type: type, path: str) -> dict[str, Any]:
    """The flat {flag: value} of a YAML config file, keys checked against the config's flags;
    ValueError naming the file and the problem otherwise (bad input: `sentray.cli`)."""
    try:
        text = open(os.path.expanduser(path)).read()
    except OSError as exc:
        raise ValueError(f"--config {path}: {exc.strerror or exc}") from exc
    try:
        values = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"--config {path} is not YAML: {exc}") from exc
    if not isinstance(values, dict):
        raise ValueError(f"--config {path} must hold `key: value` lines (flags without "
                         f"the dashes, e.g. `batch_size: 16`), not a {type(values).__name__}")
    fields = flat_fields(config_type)
    checked = {}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in fields and RENAMED_KEYS.get(name) in fields:  # an old file: `out: ...`
            print(f"warning: --config {path}: {key} is deprecated; use {RENAMED_KEYS[name]}",
                  file=sys.stderr)
            name = RENAMED_KEYS[name]
        if name not in fields:
            raise ValueError(f"--config {path}: unknown option {key!r}; the options are "
                             f"{', '.join(sorted(fields))}")
        try:
            checked[name] = coerce(fields[name], value)
        except ValueError as exc:
            raise ValueError(f"--config {path}: {key} {exc}") from exc
    return checked


def coerce(hint: Any, value: Any) -> Any:
    """A YAML value as a field of type `hint` holds it; ValueError saying what was expected."""
    hint = _bare(hint)
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if hint == bool | None:  # a three-way switch: on, off, or decided from the model
            word = str(value).lower() if not isinstance(value, bool) and value is not None \
                else value
            if word in (True, False, None) or word in _SWITCH_WORDS:
                return _SWITCH_WORDS.get(word, word) if isinstance(word, str) else word
            raise ValueError(f"must be true, false or auto, got {value!r}")
        if value is None or str(value).lower() == "none":
            return None
        return coerce(next(a for a in args if a is not type(None)), value)
    if typing.get_origin(hint) is Literal:
        if value not in args:
            raise ValueError(f"must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if is_single_flag(hint):
        return hint.parse(",".join(map(str, value)) if isinstance(value, list) else str(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if hint in (int, float) and not isinstance(value, bool):
        try:  # YAML reads 1e-5 (no dot) as text
            number = hint(value)
        except (TypeError, ValueError):
            number = None
        if number is not None and (hint is float or float(value) == number):
            return number
        raise ValueError(f"must be {'an integer' if hint is int else 'a number'}, got {value!r}")
    if hint is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"must be a {getattr(hint, '__name__', hint)}, got {value!r}")


def build_config(config_type: type, values: dict[str, Any], default: Any = None) -> Any:
    """An instance of `config_type` holding the flat `values` (nested configs take theirs);
    what is not given keeps `default`'s value, else the field's default."""
    hints = typing.get_type_hints(config_type, include_extras=True)
    kwargs = {}
    for item in dataclasses.fields(config_type):
        bare = _bare(hints[item.name])
        if _is_group(bare) and not _is_suppressed(hints[item.name]):
            if default is not None:
                nested = getattr(default, item.name)
            elif item.default_factory is not dataclasses.MISSING:
                nested = item.default_factory()
            else:
                nested = item.default if item.default is not dataclasses.MISSING else bare()
            kwargs[item.name] = build_config(bare, values, nested)
        elif flag_name(item, hints[item.name]) in values:
            kwargs[item.name] = values[flag_name(item, hints[item.name])]
    return (dataclasses.replace(default, **kwargs) if default is not None
            else config_type(**kwargs))


def config_yaml(config: Any, command: str) -> str:
    """`config` as the YAML a job writes: a comment with `command` (which repeats the run),
    then one `key: value` line per flag."""
    return (f"# The configuration this run used. Repeat it with:\n#   {command}\n"
            + yaml.safe_dump(flat_values(config), sort_keys=False, allow_unicode=True))


def write_config(config: Any, folder: str, *, job: str, s3_endpoint: str | None = None) -> str:
    """Write `config` as the folder's config file (local or s3://) and return its URI."""
    target = OutputFolder.at(folder, s3_endpoint)
    target.location.filesystem.create_dir(target.location.path, recursive=True)
    path = target.config_file()
    storage.write_bytes(path, config_yaml(config, f"python jobs/{job}.py --config {path.uri}")
                        .encode())
    return path.uri
