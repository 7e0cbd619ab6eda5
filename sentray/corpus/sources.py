"""The input of a corpus job: `CorpusConfig` (where the sentences are and how to read them)
and its `Source`s, one per input file, each checked before anything runs: a file that cannot
be read at all (corrupt Parquet, a missing text column) stops the job before it starts, naming
the file. Text files are split into lines by `decode_lines`.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import tyro

from sentray.kit import storage
from sentray.kit.validation import check_choices

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".text")
PARQUET_SUFFIXES = (".parquet", ".pq")
ESTIMATE_PIECES = 4  # pieces of a large text file whose lines `estimate_rows` counts
ESTIMATE_THREADS = 16  # files estimated at once (on S3, a few requests each)
INVALID_UTF8 = "invalid_utf8"
Format = Literal["auto", "parquet", "text"]


def sample_corpus() -> str:
    """The bundled 1,000-sentence Brown sample (the corpus jobs' default input)."""
    from importlib import resources

    return str(resources.files("sentray") / "data" / "sample.txt")


@dataclass(frozen=True)
class CorpusConfig:
    """Where the sentences are and how to read them."""

    # file or folder (local or s3://), comma-separated for several; text files hold one
    # sentence per line (default: the bundled 1,000-sentence Brown sample)
    input: str | None = None
    text_column: str = "text"  # Parquet column holding the text
    id_column: str | None = None  # Parquet column holding ids (default: ids are <file>:<row>)
    format: Format = "auto"  # input format (auto: by suffix: .parquet/.pq, .txt/.text)
    s3_endpoint: str | None = None  # S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)
    # local --input/--output paths (and embed's --model folder) are on storage every node mounts
    # at the same path (NFS, EFS); without it a Ray cluster of several machines, or one that
    # autoscales, refuses them
    shared_paths: bool = False
    # Parquet row groups are grouped up to about this many rows per read task
    rows_per_read_task: Annotated[int, tyro.conf.Suppress] = 200_000
    # rows per emitted block (the unit handed to one actor call; set by pipeline.block_rows)
    rows_per_block: Annotated[int, tyro.conf.Suppress] = 1024
    # add `previous_text`: the text of the row before, in file order (set by the augmentation)
    with_previous_text: Annotated[bool, tyro.conf.Suppress] = False

    def __post_init__(self) -> None:
        check_choices(self)
        if self.input is None:
            object.__setattr__(self, "input", sample_corpus())
        if not self.input:
            raise ValueError("no input given")
        if not self.text_column:
            raise ValueError("text_column is empty")
        if self.rows_per_read_task < 1 or self.rows_per_block < 1:
            raise ValueError("rows_per_read_task and rows_per_block must be >= 1")


@dataclass(frozen=True)
class Source:
    """One input file."""

    uri: str  # as shown to users
    path: str  # as its filesystem reads it
    filesystem: object = field(repr=False, compare=False)
    name: str = ""  # name used in default ids: relative to its input, see unique_names
    format: str = "text"
    num_rows: int | None = None  # known up front for Parquet
    row_groups: tuple[int, ...] = ()  # Parquet: rows per row group

    @property
    def key(self) -> str:
        """A folder name for this source's output: its file name, made unique by a hash of its
        full path (the same file gets the same key whether listed alone or in a folder)."""
        digest = hashlib.sha1(self.uri.encode()).hexdigest()[:10]
        base = posixpath.basename(self.uri)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", base)[-80:].lstrip("._") or "source"
        return f"{stem}-{digest}"


def _format_of(path: str, forced: Format) -> str | None:
    return forced if forced != "auto" else format_of_suffix(path)


def format_of_suffix(path: str) -> str | None:
    """The format a file's suffix names: parquet (.parquet/.pq), text (.txt/.text), or None."""
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(TEXT_SUFFIXES):
        return "text"
    return None


def read_format(corpus: CorpusConfig, sources: Sequence[Source]) -> str:
    """How the input files are read, as a setting: "auto" when each is read as its suffix says
    (whatever --format said: `--format text` over .txt files reads them as `auto` does), else
    the --format that overrides the suffixes."""
    if all(format_of_suffix(source.path) == source.format for source in sources):
        return "auto"
    return corpus.format


def input_settings(corpus: CorpusConfig, sources: Sequence[Source]) -> dict:
    """The input's part of a corpus job's settings (what the rows read from it depend on): its
    text and id columns and the format its files are read as (`read_format`)."""
    return {"text_column": corpus.text_column, "id_column": corpus.id_column,
            "format": read_format(corpus, sources)}


def _check_parquet(source: Source, config: CorpusConfig) -> Source:
    try:
        with source.filesystem.open_input_file(source.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
            schema = metadata.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
        raise ValueError(f"{source.uri} is not a readable Parquet file: {exc}") from exc
    for column, flag in ((config.text_column, "--text-column"), (config.id_column, "--id-column")):
        if column and column not in schema.names:
            raise ValueError(f"{source.uri} has no column {column!r}; its columns are "
                             f"{schema.names} (choose another with {flag})")
    text_type = schema.field(config.text_column).type
    if pa.types.is_dictionary(text_type):
        text_type = text_type.value_type
    if not (is_text_type(text_type) or pa.types.is_binary(text_type)
            or pa.types.is_large_binary(text_type) or pa.types.is_binary_view(text_type)
            or pa.types.is_null(text_type)):
        raise ValueError(f"{source.uri}: text column {config.text_column!r} has type "
                         f"{text_type}, expected a string column")
    row_groups = tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
    return Source(source.uri, source.path, source.filesystem, source.name, "parquet",
                  metadata.num_rows, row_groups)


def _is_empty_text(source: Source, size: int | None) -> bool:
    if size is None or size > 3:  # 3: a lone UTF-8 byte-order mark
        return False
    with source.filesystem.open_input_stream(source.path) as handle:
        return not decode_lines(handle.read())[0]


def discover_sources(config: CorpusConfig, exclude: Sequence[str] = ()) -> list[Source]:
    """Every input file, validated (readable, has the columns), in a stable order. Files below
    the folders in `exclude` (the job's own outputs) are never inputs."""
    if isinstance(exclude, str):
        exclude = [exclude]
    excluded = [storage.locate(path, config.s3_endpoint) for path in exclude if path]
    sources: list[Source] = []
    for uri in (u.strip() for u in config.input.split(",") if u.strip()):
        location = storage.locate(uri, config.s3_endpoint)
        suffixes = TEXT_SUFFIXES + PARQUET_SUFFIXES if config.format == "auto" else (
            PARQUET_SUFFIXES if config.format == "parquet" else TEXT_SUFFIXES)
        files = storage.list_files(location, suffixes, exclude=excluded)
        if not files:
            raise FileNotFoundError(f"no input files ({', '.join(suffixes)}) under {uri}")
        single_file = [f.path for f in files] == [location.path]
        for path, size in ((f.path, f.size) for f in files):
            fmt = _format_of(path, config.format)
            if fmt is None:
                raise ValueError(f"cannot tell the format of {path!r} from its suffix; pass "
                                 f"--format parquet or --format text")
            relative = posixpath.basename(path) if single_file else posixpath.relpath(
                path, location.path)
            file_uri = ("s3://" + path) if location.is_s3 else path
            source = Source(file_uri, path, location.filesystem, relative, fmt)
            if fmt == "parquet":
                source = _check_parquet(source, config)
            elif config.id_column:
                raise ValueError(f"--id-column applies to Parquet input, but {file_uri} is a text "
                                 "file (its ids are <file>:<row>)")
            elif _is_empty_text(source, size):
                source = Source(file_uri, path, location.filesystem, relative, fmt, num_rows=0)
            sources.append(source)
    keys = [s.key for s in sources]
    if len(set(keys)) != len(keys):
        raise ValueError("the same input file is listed twice")
    return unique_names(sources)


def _path_components(uri: str) -> list[str]:
    """The path components of a local path or an s3:// URI (bucket first)."""
    path = uri[len("s3://"):] if uri.startswith("s3://") else uri
    return [part for part in path.split("/") if part]


def unique_names(sources: Sequence[Source]) -> list[Source]:
    """`sources` with names unique among them, so that default ids (`<name>:<row>`) are unique
    within an output: `--input a/,b/` with an `x.txt` in each would otherwise give both the
    ids `x.txt:0`, `x.txt:1`, ... Each source whose name another one shares is named by the
    shortest trailing run of its URI's path components (for s3://, bucket and key) that is no
    other source's name: `a/x.txt` and `b/x.txt`; the full URI when no run is. A source whose
    name no other shares keeps it, so the ids of existing outputs do not change. With
    --id-column the ids are the user's column and are as unique as it is; these names are
    then only shown, never written."""
    counts = Counter(source.name for source in sources)
    colliding = [source for source in sources if counts[source.name] > 1]
    if not colliding:
        return list(sources)
    taken = {source.name for source in sources if counts[source.name] == 1}
    components = {source.uri: _path_components(source.uri) for source in colliding}
    # Runs of the same length are compared across all colliding sources at once, so the result
    # does not depend on the sources' order; runs of different lengths never coincide (their
    # numbers of "/" differ), and a full URI is never a run (it starts with "/" or holds "//").
    renamed: dict[str, str] = {}
    unresolved = colliding
    length = 0
    while unresolved:
        length += 1
        runs = {source.uri: "/".join(components[source.uri][-length:])
                for source in unresolved if length <= len(components[source.uri])}
        run_counts = Counter(runs.values())
        still = []
        for source in unresolved:
            run = runs.get(source.uri)
            if run is None:
                renamed[source.uri] = source.uri
            elif run_counts[run] == 1 and run not in taken:
                renamed[source.uri] = run
            else:
                still.append(source)
        unresolved = still
    shown = ", ".join(f"{source.uri} -> {renamed[source.uri]}" for source in colliding[:10])
    logger.info("%d input files share a name with another; their ids use longer names: %s%s",
                len(colliding), shown, ", ..." if len(colliding) > 10 else "")
    return [replace(source, name=renamed[source.uri]) if source.uri in renamed else source
            for source in sources]


def is_text_type(arrow_type: pa.DataType) -> bool:
    """A string column's type: string, large_string or string_view (Arrow's three)."""
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) \
        or pa.types.is_string_view(arrow_type)


def decode_lines(data: bytes) -> tuple[list[str | None], list[str | None]]:
    """Split a text file's bytes into lines on "\\n" only (a trailing newline ends the last line,
    "\\r\\n" is accepted) and decode each as UTF-8. Returns (texts, read_errors): an undecodable
    line is None with the error INVALID_UTF8."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    return decode_utf8(raw[:-1] if raw.endswith(b"\r") else raw for raw in raw_lines)


def decode_utf8(values: Iterable[bytes | None]) -> tuple[list[str | None], list[str | None]]:
    """Each value decoded as UTF-8: (texts, read_errors), an undecodable value None with the
    error INVALID_UTF8, a None value None with no error. The one decoder of text files' lines
    and Parquet's binary text columns."""
    texts: list[str | None] = []
    errors: list[str | None] = []
    for value in values:
        try:
            texts.append(None if value is None else value.decode("utf-8"))
            errors.append(None)
        except UnicodeDecodeError:
            texts.append(None)
            errors.append(INVALID_UTF8)
    return texts, errors


def estimate_rows(source: Source, sample_bytes: int = 1 << 20) -> int:
    """Rows of `source`: exact for Parquet and for a text file of at most `sample_bytes`; a
    larger text file is estimated from its size and the lines in ESTIMATE_PIECES pieces of it,
    `sample_bytes` in all, at evenly spread points (the middles of its quarters), not from its
    head alone, which may be unlike the rest: bench/brown_rows.py's 109,737 rows, whose first
    lines are shorter, were estimated at 161,108 from their first MiB. For sizing blocks, the
    probe's budget and whether a job runs in process: the jobs' row accounting never uses
    it."""
    if source.num_rows is not None:
        return source.num_rows
    size = source.filesystem.get_file_info(source.path).size
    if size is None or size <= sample_bytes:
        with source.filesystem.open_input_stream(source.path) as handle:
            head = handle.read(sample_bytes + 1)
        if len(head) <= sample_bytes:
            return len(decode_lines(head)[0])
        return max(1, round(head[:sample_bytes].count(b"\n") * (size or len(head))
                            / sample_bytes))
    piece = sample_bytes // ESTIMATE_PIECES
    with source.filesystem.open_input_file(source.path) as handle:
        newlines = sum(handle.read_at(piece, int((size - piece) * (i + 0.5) / ESTIMATE_PIECES))
                       .count(b"\n") for i in range(ESTIMATE_PIECES))
    return max(1, round(newlines * size / (piece * ESTIMATE_PIECES)))


def estimate_all(sources: Sequence[Source]) -> list[int]:
    """`estimate_rows` of each source, in order, ESTIMATE_THREADS files at a time: a text
    file's estimate is a few reads (on S3, a request each), and a corpus may be thousands of
    files."""
    if sum(source.num_rows is None for source in sources) <= 1:
        return [estimate_rows(source) for source in sources]
    with ThreadPoolExecutor(min(ESTIMATE_THREADS, len(sources))) as pool:
        return list(pool.map(estimate_rows, sources))
