"""How a config's fields read as flags through tyro (`REGISTRY`, the constructor registry every
job's parser uses: `sentray.cli`): two kinds of type spelled our own way, and one default per
flag in `--help`."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

import tyro
from tyro.constructors import (
    ConstructorRegistry,
    PrimitiveConstructorSpec,
    PrimitiveTypeInfo,
    StructConstructorSpec,
    StructTypeInfo,
)
from tyro.constructors._struct_spec_dataclass import dataclass_rule

from sentray.kit.config_files import is_single_flag

REGISTRY = ConstructorRegistry()
_OPTIONAL_BOOL = {"true": True, "false": False, "auto": None, "none": None}


@REGISTRY.primitive_rule
def _flag_types(info: PrimitiveTypeInfo) -> PrimitiveConstructorSpec | None:
    """Two kinds of type a flag spells its own way: a dataclass written as one value (SIFTER's
    lambdas as `1,1,1`: it has `parse` and `spec`) and a three-way switch (`bool | None`: on,
    off, or decided from the model) as `--mlp`, `--mlp false`, `--mlp auto`."""
    if isinstance(info.type, type) and is_single_flag(info.type):
        kind = info.type
        return PrimitiveConstructorSpec(
            nargs=1, metavar=getattr(kind, "METAVAR", kind.__name__.upper()),
            instance_from_str=lambda args: kind.parse(args[0]),
            is_instance=lambda value: isinstance(value, kind),
            str_from_instance=lambda value: [value.spec()])
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


_SAYS_ITS_DEFAULT = re.compile(r"\bdefault:")


@REGISTRY.struct_rule
def _one_default_per_flag(info: StructTypeInfo) -> StructConstructorSpec | None:
    """A config's fields as tyro's own dataclass rule reads them, except that a flag whose help
    says its default in words ("default: the bundled 1,000-sentence Brown sample") does not get
    tyro's "(default: None)" after it too: one default per flag in every job's --help."""
    spec = dataclass_rule(info)
    if spec is None:
        return None
    fields = []
    for item in spec.fields:
        help_text = item.helptext() if callable(item.helptext) else item.helptext
        if help_text and _SAYS_ITS_DEFAULT.search(help_text):
            item = dataclasses.replace(item, type=Annotated[
                item.type, tyro.conf.arg(help_behavior_hint="")], helptext=help_text)
        fields.append(item)
    return dataclasses.replace(spec, fields=tuple(fields))
