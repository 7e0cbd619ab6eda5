"""Config checks shared by every config dataclass: one implementation of "a `Literal` field
holds one of its choices", so no config re-lists its choices by hand, and one of "a number is
at least its minimum", so every such error names the flag and its value alike."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal


def literal_choices(hint: Any) -> tuple | None:
    """The choices of a `Literal[...]` hint (also inside `X | None`), else None."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    for arg in typing.get_args(hint):
        if typing.get_origin(arg) is Literal:
            return typing.get_args(arg)
    return None


def check_choices(config: Any) -> None:
    """ValueError naming the field, its value and its choices when a `Literal` field of the
    dataclass `config` holds something else (None passes where the hint allows it)."""
    hints = typing.get_type_hints(type(config), include_extras=True)
    for field in dataclasses.fields(config):
        choices = literal_choices(hints[field.name])
        value = getattr(config, field.name)
        if choices is None or value in choices:
            continue
        if value is None and type(None) in typing.get_args(hints[field.name]):
            continue
        raise ValueError(f"{field.name} must be one of {', '.join(map(str, choices))}, got "
                         f"{value!r}")


def check_at_least(minimum: float, **values: float | None) -> None:
    """ValueError naming the first of `values` (flag name = value) below `minimum`, and its value;
    None passes (a field whose None means "not set")."""
    for name, value in values.items():
        if value is not None and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
