"""The LanceDB table: where it is (a local path or s3://, with the embedding job's storage
options), its schema (id, source, row, vector, text) with the embedding's description as its
metadata, opened for a run (dropped for --overwrite, checked to hold the same embedding, rolled
back to its record: `open_for_run`), and appending the rows still to add, in commits of about
--rows-per-commit rows: streamed part by part from this process, or through Ray Data's
`write_lance` on the cluster (each of its tasks reads a part, `part_rows`; the driver holds only
the list of parts to add). No torch here: Ray Data's tasks import this module."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray.bulk_embedding.output import EmbeddingDescription
from sentray.bulk_embedding.vectors import CodeBook, scalar_dequantize
from sentray.corpus.reading import read_task
from sentray.corpus.sources import CorpusConfig, Source
from sentray.index.embedding_record import check_same_embedding
from sentray.index.index_state import IndexState, roll_back
from sentray.index.rows_to_add import PartWork
from sentray.kit import storage

logger = logging.getLogger(__name__)


def lance_storage_options(uri: str, s3_endpoint: str | None) -> dict[str, str]:
    """LanceDB's storage options for `uri`: for s3://, the endpoint (--s3-endpoint, else
    $AWS_ENDPOINT_URL), the region and the keys of the environment, as `storage.s3_filesystem`
    takes them."""
    if not uri.startswith("s3://"):
        return {}
    options = {}
    endpoint = s3_endpoint or os.environ.get(storage.ENDPOINT_ENV)
    if endpoint:
        options.update(aws_endpoint=endpoint, allow_http=str(endpoint.startswith("http:"))
                       .lower(), aws_region="us-east-1")
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(key):
            options["aws_region"] = os.environ[key]
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if os.environ.get(key):
            options[key.lower()] = os.environ[key]
    return options


def table_schema(description: EmbeddingDescription, filesystem: pafs.FileSystem,
                 first: PartWork, with_text: bool) -> pa.Schema:
    """The table's schema: its id column typed as the output's ids are (read from the part
    `first`), the vector as the description stores it, the text of --text-from if given."""
    with filesystem.open_input_file(first.path) as handle:
        id_type = pq.read_schema(handle).field("id").type
    fields = [pa.field("id", id_type), pa.field("source", pa.string()),
              pa.field("row", pa.int64()), pa.field("vector", description.vector_type())]
    if with_text:
        fields.append(pa.field("text", pa.string()))
    return pa.schema(fields, metadata=description.to_metadata())


def connect(uri: str, s3_endpoint: str | None):
    """(LanceDB connection to the table's folder, table name) of a table URI ending in .lance."""
    import lancedb

    uri = uri.rstrip("/")
    folder, name = posixpath.split(uri)
    if not uri.startswith("s3://"):
        folder = os.path.abspath(os.path.expanduser(folder or "."))
    database = lancedb.connect(folder, storage_options=lance_storage_options(uri, s3_endpoint))
    return database, name[: -len(".lance")]


def open_table(database, name: str):
    """The table `name`, or None when there is none."""
    try:
        return database.open_table(name)
    except (FileNotFoundError, ValueError):
        return None


def commit_groups(work: Sequence[PartWork], rows_per_commit: int) -> Iterator[list[PartWork]]:
    """The parts in groups of about `rows_per_commit` rows (a part is never split)."""
    group: list[PartWork] = []
    rows = 0
    for part in work:
        if group and rows + part.rows > rows_per_commit:
            yield group
            group, rows = [], 0
        group.append(part)
        rows += part.rows
    if group:
        yield group


TextSources = dict[str, Source]  # source key -> the --text-from input file


def append_local(table, group: list[PartWork], filesystem, schema: pa.Schema,
                 texts: TextSources | None, corpus: CorpusConfig | None,
                 code_book: CodeBook | None) -> int:
    """Append the rows of `group` in one commit, streamed part by part from this process;
    returns the rows read without a vector. `code_book`: an int8/uint8 output's, whose codes
    the table holds as the float32 vectors they stand for."""
    skipped = 0

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal skipped
        for part in group:
            rows, without = part_rows(part, filesystem, schema.field("vector").type,
                                      _text_source(texts, part), corpus, code_book)
            skipped += without
            yield from rows.cast(schema).to_batches()

    table.add(pa.RecordBatchReader.from_batches(schema, batches()))
    return skipped


def append_ray(uri: str, group: list[PartWork], filesystem, schema: pa.Schema,
               texts: TextSources | None, corpus: CorpusConfig | None,
               code_book: CodeBook | None, storage_options: dict[str, str],
               read_version: int) -> None:
    """Append the rows of `group` in one commit through Ray Data: a task per part reads it and
    writes its Lance fragments on the worker; the driver commits their metadata (a few hundred
    bytes a fragment) once. This is what Ray Data's `write_lance` does; it is written out here
    because Ray 2.60's `write_lance` passes pylance 14 an argument it no longer takes."""
    import lance
    import ray
    from lance.fragment import FragmentMetadata

    parts = ray.data.from_items([dataclasses.asdict(part) for part in group],
                                override_num_blocks=len(group))
    written = parts.map_batches(
        WriteParts, fn_constructor_args=(uri, filesystem, schema, texts, corpus, code_book,
                                         storage_options), batch_size=1,
        batch_format="pyarrow", concurrency=(1, max(1, len(group))))
    fragments = [FragmentMetadata.from_json(row["fragment"])
                 for row in written.take_all()]
    lance.LanceDataset.commit(uri, lance.LanceOperation.Append(fragments),
                              read_version=read_version, storage_options=storage_options or None)


def _text_source(texts: TextSources | None, part: PartWork) -> Source | None:
    if texts is None:
        return None
    if part.source_key not in texts:
        raise ValueError(f"--text-from has no input file for {part.source_key}: give the "
                         "embedding job's --input")
    return texts[part.source_key]


class WriteParts:
    """The Ray Data callable of `append_ray`: a batch of one part -> its rows written as Lance
    fragments of the table (not committed) -> one row per fragment, its metadata as JSON."""

    def __init__(self, uri: str, filesystem, schema: pa.Schema, texts: TextSources | None,
                 corpus: CorpusConfig | None, code_book: CodeBook | None,
                 storage_options: dict[str, str]) -> None:
        self.uri, self.filesystem, self.schema = uri, filesystem, schema
        self.texts, self.corpus, self.code_book = texts, corpus, code_book
        self.storage_options = storage_options

    def __call__(self, batch: pa.Table) -> pa.Table:
        from lance.fragment import write_fragments

        fragments = []
        for item in batch.to_pylist():
            part = PartWork(**{**item, "runs": tuple(tuple(run) for run in item["runs"])})
            rows, _ = part_rows(part, self.filesystem, self.schema.field("vector").type,
                                _text_source(self.texts, part), self.corpus, self.code_book)
            if rows.num_rows:
                fragments += write_fragments(rows.cast(self.schema), self.uri,
                                             schema=self.schema,
                                             storage_options=self.storage_options or None)
        return pa.table({"fragment": [json.dumps(fragment.to_json()) for fragment in fragments]},
                        schema=pa.schema([("fragment", pa.string())]))


def part_rows(work: PartWork, filesystem: pafs.FileSystem, vector_type: pa.DataType,
              text_source: Source | None = None, corpus: CorpusConfig | None = None,
              code_book: CodeBook | None = None) -> tuple[pa.Table, int]:
    """(rows of the part with a vector, as the table stores them, rows without one) of the rows
    `work` still has to add: id, source, row, vector (packed bits as uint8 bytes; int8/uint8
    codes, given their `code_book`, as the float32 vectors they stand for), and the text of
    --text-from when given (joined by row)."""
    with filesystem.open_input_file(work.path) as handle:
        table = pq.read_table(handle, columns=["id", "source", "row", "embedding"])
    rows = table.column("row").to_numpy()
    keep = np.zeros(len(rows), dtype=bool)
    for a, b in work.runs:
        keep |= (rows >= a) & (rows < b)
    table = table.filter(pa.array(keep))
    read = table.num_rows
    table = table.filter(pc.is_valid(table.column("embedding")))
    vectors = table.column("embedding").combine_chunks()
    if code_book is not None:  # int8/uint8 codes (N, D) -> the floats they stand for
        codes = vectors.values.to_numpy(zero_copy_only=False).reshape(len(vectors), -1)
        floats = scalar_dequantize(codes, code_book).ravel()
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(floats), vectors.type.list_size)
    elif pa.types.is_int8(vectors.type.value_type):  # binary: bits packed as int8 minus 128
        flat = vectors.values.to_numpy(zero_copy_only=False).view(np.uint8) ^ np.uint8(0x80)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat), vectors.type.list_size)
    columns = {"id": table.column("id"), "source": table.column("source"),
               "row": table.column("row"), "vector": vectors.cast(vector_type)}
    if text_source is not None:
        columns["text"] = texts_of(text_source, corpus, table.column("row").to_numpy())
    return pa.table(columns), read - table.num_rows


def texts_of(source: Source, corpus: CorpusConfig, rows: np.ndarray) -> pa.Array:
    """The texts of `rows` of the input file `source`, read as the embedding job read it."""
    first, end = (int(rows.min()), int(rows.max()) + 1) if len(rows) else (0, 0)
    groups = list(range(len(source.row_groups)))
    blocks = list(read_task(source, groups, 0, [(first, end)], corpus)) if len(rows) else []
    if not blocks:
        return pa.array([], pa.string())
    read = pa.concat_tables(blocks)
    by_row = dict(zip(read.column("row").to_pylist(), read.column("text").to_pylist(),
                      strict=True))
    return pa.array([by_row.get(int(r)) for r in rows], pa.string())


def open_for_run(database, name: str, location: storage.Location,
                 description: EmbeddingDescription,
                 overwrite: bool) -> tuple[object | None, IndexState | None]:
    """(table, its record), rolled back to the record; (None, None) when there is no table (or
    only a first run's, killed before its first commit was recorded, which is dropped)."""
    table = open_table(database, name)
    if table is not None and overwrite:
        logger.info("--overwrite: dropping %s", location.uri)
        database.drop_table(name)
        table = None
    if table is None:
        return None, None
    stored = EmbeddingDescription.from_metadata(table.schema.metadata, location.uri)
    check_same_embedding(stored, description, location.uri)
    state = IndexState.read(location)
    if state is None:
        logger.info("%s has no record of a finished commit: a first run was stopped; "
                    "starting it again", location.uri)
        database.drop_table(name)
        return None, None
    roll_back(table, state, location)
    return table, state
