"""This machine's cache of what the precision decisions cost to make: prepared artefacts
(`int8/<key>/`) and `--precision auto`'s decisions (`precision/<key>.json`), under
$SENTRAY_CACHE_DIR (default ~/.cache/sentray). A file is written whole or not at all (written
aside, then renamed), so two jobs preparing the same thing at once leave one whole copy."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SENTRAY_CACHE_DIR") or Path.home() / ".cache" / "sentray")


def folder(kind: str, key: str) -> Path:
    return cache_dir() / kind / key


def write_files(kind: str, key: str, files: dict[str, bytes]) -> Path:
    """`files` (name -> bytes) into the cache folder kind/key, each atomically, in order (so
    that a record written last names whole files)."""
    target = folder(kind, key)
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        partial = target / f".{name}.{os.getpid()}.partial"
        partial.write_bytes(data)
        os.replace(partial, target / name)
    return target


def read_files(kind: str, key: str, *names: str) -> tuple[bytes, ...] | None:
    """The files `names` of kind/key, or None when one of them is missing."""
    try:
        return tuple((folder(kind, key) / name).read_bytes() for name in names)
    except OSError:
        return None


def keys(kind: str) -> list[str]:
    """The keys cached of `kind`."""
    base = cache_dir() / kind
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
