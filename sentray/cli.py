"""The jobs' command line, generated from their config dataclasses.

Each job's flags come from its config dataclass (nested configs included) through tyro: a field
`batch_size: int = 32  # sentences per forward pass` is `--batch-size INT` with that help and
that default, so every default and every help line is written once, beside the field. Nested
configs (an embed job's corpus, encoder and actor pool) become groups of flags without a prefix.

Why tyro: it turns dataclasses, `Literal`s and `X | None` into typed flags with help taken from the
fields' own comments, and it keeps the dataclass's `__post_init__` as the one validator. (We
use argparse's dash spelling for flags; jsonargparse would name them `--batch_size` and nest the
groups as `--encoder.batch_size`.)

A job also takes `--config FILE.yaml`: flat `key: value` lines named like the flags
(`batch_size: 16` for `--batch-size 16`), read first, so flags given with it override it. A job
writes the configuration it ran with to `OUTPUT/_config.yaml` (sentray.configfile): the same
command with `--config OUTPUT/_config.yaml` repeats the run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Generic, TypeVar

import tyro
from tyro.constructors import ConstructorRegistry, PrimitiveConstructorSpec, PrimitiveTypeInfo

from sentray.configfile import file_args, flat_fields
from sentray.losses import SifterWeights
from sentray.progress import quiet_libraries

C = TypeVar("C")

REGISTRY = ConstructorRegistry()
_OPTIONAL_BOOL = {"true": True, "false": False, "auto": None, "none": None}


@REGISTRY.primitive_rule
def _flag_types(info: PrimitiveTypeInfo) -> PrimitiveConstructorSpec | None:
    """Two types a flag spells its own way: SIFTER's lambdas as `1,1,1` and a three-way switch
    (`bool | None`: on, off, or decided from the model) as `--mlp`, `--mlp false`, `--mlp auto`."""
    if info.type is SifterWeights:
        return PrimitiveConstructorSpec(
            nargs=1, metavar="XY,XZ,YZ[,XX]",
            instance_from_str=lambda args: SifterWeights.parse(args[0]),
            is_instance=lambda value: isinstance(value, SifterWeights),
            str_from_instance=lambda weights: [weights.spec()])
    if info.type == bool | None:
        def from_str(args: list[str]) -> bool | None:
            word = (args[0] if args else "true").lower()
            if word not in _OPTIONAL_BOOL:
                raise ValueError(f"expected true, false or auto, got {word!r}")
            return _OPTIONAL_BOOL[word]
        return PrimitiveConstructorSpec(
            nargs="*", metavar="[true|false|auto]", instance_from_str=from_str,
            is_instance=lambda value: value is None or isinstance(value, bool),
            str_from_instance=lambda value: ["auto" if value is None else str(value).lower()])
    return None


@dataclass(frozen=True)
class _Command(Generic[C]):
    options: Annotated[C, tyro.conf.arg(name="")]
    config: str | None = None  # YAML of flags as keys (batch_size: 16), overridden by flags given

    # debug logging, and Ray's own log lines in this job's output
    verbose: Annotated[bool, tyro.conf.arg(aliases=("-v",)), tyro.conf.FlagCreatePairsOff] = False


def parse(config_type: type[C], argv: Sequence[str] | None, *, description: str,
          prog: str | None = None) -> tuple[C, bool]:
    """(config, verbose) from the command line `argv` (default: sys.argv[1:]), after the options
    of `--config FILE` if given. Bad values exit with a message naming them: tyro's for a flag
    that does not parse, the config's own `__post_init__` for a value it rejects."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    known, rest = pre.parse_known_args(argv)
    from_file = file_args(config_type, known.config) if known.config else []
    switches = [name.replace("_", "-") for name, hint in flat_fields(config_type).items()
                if hint == bool | None]
    rest = [f"--{arg[5:]}=false" if arg.startswith("--no-") and arg[5:] in switches else arg
            for arg in rest]  # --no-mlp: the usual spelling of --mlp false
    try:
        command = tyro.cli(_Command[config_type], args=[*from_file, *rest], prog=prog,
                           description=description, registry=REGISTRY,
                           config=(tyro.conf.OmitArgPrefixes,))
    except ValueError as exc:  # raised by a config's __post_init__
        raise SystemExit(f"error: {exc}") from exc
    return command.options, command.verbose


def setup_logging(verbose: bool = False) -> None:
    """Configure logging for a job process (never at import time: it would run on workers)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    quiet_libraries()  # unless verbose: no Hugging Face progress bars here or in our workers
