"""A job's configuration as a flat YAML file: what `--config FILE.yaml` reads and what a job
writes next to its outputs (`OUTPUT/_config.yaml`), so that the same command with
`--config OUTPUT/_config.yaml` repeats the run.

The keys are the flags without their dashes (`batch_size: 16` for `--batch-size 16`); nested
configs (an embed job's corpus, encoder and actor pool) are flattened, as their flags are.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Annotated, Any

import tyro
import yaml

from sentray import storage

CONFIG_FILE = "_config.yaml"


def _is_suppressed(hint: Any) -> bool:
    return typing.get_origin(hint) is Annotated and any(
        marker is tyro.conf.Suppress for marker in hint.__metadata__)


def _is_single_flag(value_or_type: Any) -> bool:
    """A dataclass written as one flag value, such as SIFTER's lambdas `1,1,1`: it has
    `spec()` (the value as text) and `parse(text)`."""
    return hasattr(value_or_type, "spec") and hasattr(value_or_type, "parse")


def _is_group(hint: Any) -> bool:
    """A nested config: a dataclass that is not a single flag."""
    return dataclasses.is_dataclass(hint) and not _is_single_flag(hint)


def flat_fields(config_type: type) -> dict[str, Any]:
    """Every flag of a config type: {field name: type}, nested configs flattened."""
    fields: dict[str, Any] = {}
    hints = typing.get_type_hints(config_type, include_extras=True)
    for item in dataclasses.fields(config_type):
        hint = hints[item.name]
        if _is_suppressed(hint):
            continue
        bare = typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
        nested = flat_fields(bare) if _is_group(bare) else {item.name: bare}
        clash = set(nested) & set(fields)
        assert not clash, f"{config_type.__name__}: flags {clash} defined twice"
        fields.update(nested)
    return fields


def flat_values(config: Any) -> dict[str, Any]:
    """The config's flags and their values, nested configs flattened, in YAML-ready types."""
    values: dict[str, Any] = {}
    fields = flat_fields(type(config))
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if dataclasses.is_dataclass(value) and not _is_single_flag(value):
            values.update(flat_values(value))
        elif item.name in fields:
            values[item.name] = value.spec() if _is_single_flag(value) else value
    return values


def file_args(config_type: type, path: str) -> list[str]:
    """The flags that a YAML config file stands for, to be parsed before the command line's."""
    try:
        text = open(os.path.expanduser(path)).read()
    except OSError as exc:
        raise SystemExit(f"error: --config {path}: {exc.strerror or exc}") from exc
    try:
        values = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise SystemExit(f"error: --config {path} is not YAML: {exc}") from exc
    if not isinstance(values, dict):
        raise SystemExit(f"error: --config {path} must hold `key: value` lines (flags without "
                         f"the dashes, e.g. `batch_size: 16`), not a {type(values).__name__}")
    fields = flat_fields(config_type)
    args: list[str] = []
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise SystemExit(f"error: --config {path}: unknown option {key!r}; the options are "
                             f"{', '.join(sorted(fields))}")
        flag = "--" + name.replace("_", "-")
        if fields[name] is bool:
            if not isinstance(value, bool):
                raise SystemExit(f"error: --config {path}: {key} must be true or false, got "
                                 f"{value!r}")
            args.append(flag if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, (list, tuple)):  # lambdas: [1, 1, 1]
            args += [flag, ",".join(str(v) for v in value)]
        elif isinstance(value, bool):
            args += [flag, str(value).lower()]
        else:
            args += [flag, "None" if value is None else str(value)]
    return args


def config_yaml(config: Any, command: str) -> str:
    """`config` as the YAML a job writes: a comment with `command` (which repeats the run),
    then one `key: value` line per flag."""
    return (f"# The configuration this run used. Repeat it with:\n#   {command}\n"
            + yaml.safe_dump(flat_values(config), sort_keys=False, allow_unicode=True))


def write_config(config: Any, folder: str, *, job: str, s3_endpoint: str | None = None) -> str:
    """Write `config` as FOLDER/_config.yaml (local or s3://) and return its URI."""
    target = storage.locate(folder, s3_endpoint)
    target.filesystem.create_dir(target.path, recursive=True)
    path = target.join(CONFIG_FILE)
    with target.filesystem.open_output_stream(path.path) as handle:
        handle.write(config_yaml(config, f"python jobs/{job}.py --config {path.uri}").encode())
    return path.uri
