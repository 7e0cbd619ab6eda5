"""Progress bars on a terminal, nothing in a log: `steps` over an iterable (the head search, the
STS tasks) and `bar` over a count (the LSTM's steps), so a log stays one line per event."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


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
