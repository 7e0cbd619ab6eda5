"""Local and S3 paths behind one pyarrow filesystem API.

`s3://bucket/key` goes to pyarrow's S3 filesystem, with credentials from the usual AWS sources
(env, ~/.aws, instance role) and an optional endpoint override (`--s3-endpoint`, or
$AWS_ENDPOINT_URL) for S3-compatible stores such as MinIO or a local moto server.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs

ENDPOINT_ENV = "AWS_ENDPOINT_URL"


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
    endpoint_url = endpoint_url or os.environ.get(ENDPOINT_ENV)
    kwargs = {}
    if endpoint_url:
        scheme, _, rest = endpoint_url.partition("://")
        kwargs = {"endpoint_override": rest or scheme, "scheme": scheme if rest else "https"}
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
    return pafs.S3FileSystem(**kwargs)


def locate(uri: str, endpoint_url: str | None = None) -> Location:
    """The filesystem and path for a local path or an s3:// URI."""
    if uri.startswith("s3://"):
        return Location(s3_filesystem(endpoint_url), uri[len("s3://"):].rstrip("/"), uri)
    if "://" in uri:
        raise ValueError(f"unsupported path {uri!r}: use a local path or s3://bucket/key")
    return Location(pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri)), uri)


def exists(location: Location) -> bool:
    return location.filesystem.get_file_info(location.path).type != pafs.FileType.NotFound


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
    selector = pafs.FileSelector(location.path, recursive=True)
    files = []
    for item in location.filesystem.get_file_info(selector):
        name = posixpath.basename(item.path)
        if item.type != pafs.FileType.File or name.startswith((".", "_")):
            continue
        if any((item.path + "/").startswith(e.path.rstrip("/") + "/") for e in exclude):
            continue
        if name.lower().endswith(suffixes):
            files.append(item)
    return sorted(files, key=lambda item: item.path)
