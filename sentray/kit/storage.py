"""Local and S3 paths behind one pyarrow filesystem API.

`s3://bucket/key` goes to pyarrow's S3 filesystem, with credentials from the usual AWS sources
(env, ~/.aws, instance role) and an optional endpoint override (`--s3-endpoint`, or
$AWS_ENDPOINT_URL) for S3-compatible stores such as MinIO or a local moto server.
"""

from __future__ import annotations

import contextlib
import copyreg
import errno
import json
import os
import posixpath
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow.fs as pafs

T = TypeVar("T")
ENDPOINT_ENV = "AWS_ENDPOINT_URL"
# Object stores throttle (503 SlowDown), fail (500) and drop connections; every S3 request is
# retried with the AWS SDK's standard strategy (exponential backoff with jitter) up to this many
# attempts (pyarrow's default is 3), set by $SENTRAY_S3_MAX_ATTEMPTS.
MAX_ATTEMPTS_ENV = "SENTRAY_S3_MAX_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class Location:
    """A path on a filesystem: `path` is what `filesystem` understands (no scheme)."""

    filesystem: pafs.FileSystem
    path: str
    uri: str  # as the user wrote it, for messages

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")

    def join(self, *parts: str) -> Location:
        path = posixpath.join(self.path, *parts)
        uri = posixpath.join(self.uri, *parts)
        return Location(self.filesystem, path, uri)


def s3_filesystem(endpoint_url: str | None = None) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem: `endpoint_url` (or $AWS_ENDPOINT_URL) for S3-compatible stores,
    credentials from the environment (carried to Ray workers) or the default chain, and
    $SENTRAY_S3_MAX_ATTEMPTS attempts per request (default 10; the SDK's own timeout, 3 s without
    a byte moving, fails an attempt)."""
    endpoint_url = endpoint_url or os.environ.get(ENDPOINT_ENV)
    kwargs: dict = {"retry_strategy": pafs.AwsStandardS3RetryStrategy(
        max_attempts=max_attempts())}
    if endpoint_url:
        scheme, _, rest = endpoint_url.partition("://")
        kwargs.update(endpoint_override=rest or scheme, scheme=scheme if rest else "https")
        if not os.environ.get("AWS_DEFAULT_REGION") and not os.environ.get("AWS_REGION"):
            kwargs["region"] = "us-east-1"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    access_key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        # Explicit keys travel with the pickled filesystem to Ray workers, which do not have the
        # driver's environment (e.g. `ray job submit` from a laptop). Without env keys the
        # default chain applies on each node (instance roles, ~/.aws).
        kwargs.update(access_key=access_key, secret_key=secret_key,
                      session_token=os.environ.get("AWS_SESSION_TOKEN"))
    # pyarrow pickles an S3 filesystem without its retry strategy: the Ray workers that
    # unpickle it would retry 3 times. sentray's reducer carries the attempts along.
    copyreg.pickle(pafs.S3FileSystem, _reduce_s3)
    return pafs.S3FileSystem(**kwargs)


def max_attempts() -> int:
    return int(os.environ.get(MAX_ATTEMPTS_ENV) or DEFAULT_MAX_ATTEMPTS)


def _reduce_s3(filesystem: pafs.S3FileSystem):
    options = filesystem.__reduce__()[1][0]
    return _rebuild_s3, (options, max_attempts())


def _rebuild_s3(options: dict, attempts: int) -> pafs.S3FileSystem:
    """An S3 filesystem unpickled on a worker: its options, and the driver's retry attempts."""
    copyreg.pickle(pafs.S3FileSystem, _reduce_s3)  # for whatever the worker pickles in turn
    return pafs.S3FileSystem(**options,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=attempts))


def with_retries(action: Callable[[], T], *, attempts: int = 4) -> T:
    """`action()`, tried again on a storage error: the SDK retries each request, but a
    multipart upload cut between its requests fails as a whole, and a response cut mid-body
    comes back as INTERNAL_FAILURE, which the SDK does not retry. Only for actions that are
    safe to repeat (writing the same bytes whole, reading)."""
    for attempt in range(attempts):
        try:
            return action()
        except OSError as exc:
            if attempt == attempts - 1 or isinstance(exc, (FileNotFoundError, PermissionError)) \
                    or no_space(exc):
                raise
            time.sleep(0.5 * 2 ** attempt)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def written_whole(location: Location) -> Iterator[str]:
    """The path to write the file at `location` through, so that no reader ever sees it
    half-written (a run reading another's claim while it was refreshed read an empty file, and
    skipped that claim): on S3 its own (an object appears whole on upload); on a local disk
    `.tmp-<id>` beside it, renamed over it when the block ends, deleted if the block fails (a
    killed writer's is deleted by the next run: `sentray.corpus.source_runs`)."""
    if not isinstance(location.filesystem, pafs.LocalFileSystem):
        yield location.path
        return
    temporary = posixpath.join(posixpath.dirname(location.path), f".tmp-{uuid.uuid4().hex}")
    try:
        yield temporary
        location.filesystem.move(temporary, location.path)
    except BaseException:
        try:
            location.filesystem.delete_file(temporary)
        except OSError:
            pass
        raise


def write_bytes(location: Location, data: bytes) -> None:
    """Write a small object whole (a record, a summary: `written_whole`), again if the upload
    fails."""
    def write() -> None:
        with written_whole(location) as path, location.filesystem.open_output_stream(
                path) as handle:
            handle.write(data)

    if isinstance(location.filesystem, pafs.LocalFileSystem):
        write()
    else:
        with_retries(write)


def read_json(location: Location) -> dict | None:
    """A JSON file's values, or None (missing, unreadable, or not JSON)."""
    try:
        with location.filesystem.open_input_stream(location.path) as handle:
            return json.loads(handle.read())
    except (FileNotFoundError, OSError, ValueError):
        return None


def write_json(location: Location, values: dict) -> None:
    """`values` as a JSON file, written whole (`write_bytes`)."""
    write_bytes(location, json.dumps(values, indent=1, default=str).encode())


def no_space(exc: BaseException) -> bool:
    return getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc)


def locate(uri: str, endpoint_url: str | None = None) -> Location:
    """The filesystem and path for a local path or an s3:// URI."""
    if uri.startswith("s3://"):
        return Location(s3_filesystem(endpoint_url), uri[len("s3://"):].rstrip("/"), uri)
    if "://" in uri:
        raise ValueError(f"unsupported path {uri!r}: use a local path or s3://bucket/key")
    return Location(pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri)), uri)


def exists(location: Location) -> bool:
    return location.filesystem.get_file_info(location.path).type != pafs.FileType.NotFound


def entries(folder: Location, *, recursive: bool = False) -> list[pafs.FileInfo]:
    """What is in the folder (files and folders, by filesystem path; with `recursive`, all below
    it); nothing where the folder does not exist."""
    try:
        return folder.filesystem.get_file_info(pafs.FileSelector(folder.path, recursive=recursive))
    except FileNotFoundError:
        return []


def visible(infos: Sequence[pafs.FileInfo],
            kind: pafs.FileType) -> list[tuple[str, pafs.FileInfo]]:
    """(name, info) of the entries of type `kind` that pyarrow would read: hidden and `_` names
    are skipped."""
    named = ((posixpath.basename(info.path), info) for info in infos)
    return [(name, info) for name, info in named
            if info.type == kind and not name.startswith((".", "_"))]


def list_files(location: Location, suffixes: tuple[str, ...],
               exclude: Sequence[Location] = ()) -> list[pafs.FileInfo]:
    """The files (filesystem-relative paths, sizes) at `location`: the file itself, or every file
    below the folder whose name ends with one of `suffixes`, sorted. Hidden and `_` files are
    skipped, as pyarrow does, and so is everything below the `exclude` folders (a job's own
    outputs)."""
    info = location.filesystem.get_file_info(location.path)
    if info.type == pafs.FileType.File:
        return [info]
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"input {location.uri} does not exist")
    files = []
    for name, item in visible(entries(location, recursive=True), pafs.FileType.File):
        if any((item.path + "/").startswith(e.path.rstrip("/") + "/") for e in exclude):
            continue
        if name.lower().endswith(suffixes):
            files.append(item)
    return sorted(files, key=lambda item: item.path)


class StorageError(OSError):
    """Storage failed under a job (S3 past its retries, a full disk): what failed, where, and
    what a rerun does."""


# What a storage failure looks like in the error a Ray task hands back, and what it means.
FAILURES = (("AWS Error", "S3 failed"), ("No space left on device", "the disk is full"),
            ("[Errno 28]", "the disk is full"), ("File too large", "a file size limit was hit"),
            ("Disk quota exceeded", "the disk quota is used up"))


def describe_failure(exc: BaseException, where: str) -> str | None:
    """A storage failure found anywhere in `exc` (its text holds the remote traceback of a
    Ray task), said plainly with the line that names the object; None for any other error."""
    text = "\n".join(str(e) for e in _chain(exc))
    for marker, meaning in FAILURES:
        if marker in text:
            line = next(line.strip() for line in text.splitlines() if marker in line)
            return f"{meaning} while the job wrote to {where}: {line}"
    return None


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__
