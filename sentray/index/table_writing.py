"""The LanceDB table: where it is (a local path or s3://, with the embedding job's storage
options), its schema (id, source, row, vector, text) with the embedding's description as its
metadata, and appending the rows still to add, in commits of about --rows-per-commit rows:
streamed part by part from this process, or through Ray Data's `write_lance` on the cluster
(each of its tasks reads a part; the driver holds only the plan)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
from collections.abc import Iterator, Sequence

import pyarrow as pa

from sentray.corpus.sources import CorpusConfig, Source
from sentray.index.embedding_record import EmbeddingDescription
from sentray.index.plan import PartWork, part_rows
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


def table_schema(description: EmbeddingDescription, id_type: pa.DataType,
                 with_text: bool) -> pa.Schema:
    fields = [pa.field("id", id_type), pa.field("source", pa.string()),
              pa.field("row", pa.int64()), pa.field("vector", description.vector_type())]
    if with_text:
        fields.append(pa.field("text", pa.string()))
    return pa.schema(fields, metadata=description.to_metadata())


def code_book(schema: pa.Schema):
    """The code book that turns the rows' int8/uint8 codes into the table's float32 vectors
    (from the description the table's `schema` carries); None for every other dtype."""
    description = EmbeddingDescription.from_metadata(schema.metadata, "the table")
    return description.ranges() if description.dequantized else None


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
                 texts: TextSources | None, corpus: CorpusConfig | None) -> int:
    """Append the rows of `group` in one commit, streamed part by part from this process;
    returns the rows read without a vector."""
    skipped = 0

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal skipped
        for part in group:
            rows, without = part_rows(part, filesystem, schema.field("vector").type,
                                      _text_source(texts, part), corpus, code_book(schema))
            skipped += without
            yield from rows.cast(schema).to_batches()

    table.add(pa.RecordBatchReader.from_batches(schema, batches()))
    return skipped


def append_ray(uri: str, group: list[PartWork], filesystem, schema: pa.Schema,
               texts: TextSources | None, corpus: CorpusConfig | None,
               storage_options: dict[str, str], read_version: int) -> None:
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
        WriteParts, fn_constructor_args=(uri, filesystem, schema, texts, corpus,
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
                 corpus: CorpusConfig | None, storage_options: dict[str, str]) -> None:
        self.uri, self.filesystem, self.schema = uri, filesystem, schema
        self.texts, self.corpus, self.storage_options = texts, corpus, storage_options

    def __call__(self, batch: pa.Table) -> pa.Table:
        from lance.fragment import write_fragments

        fragments = []
        for item in batch.to_pylist():
            part = PartWork(**{**item, "runs": tuple(tuple(run) for run in item["runs"])})
            rows, _ = part_rows(part, self.filesystem, self.schema.field("vector").type,
                                _text_source(self.texts, part), self.corpus,
                                code_book(self.schema))
            if rows.num_rows:
                fragments += write_fragments(rows.cast(self.schema), self.uri,
                                             schema=self.schema,
                                             storage_options=self.storage_options or None)
        return pa.table({"fragment": [json.dumps(fragment.to_json()) for fragment in fragments]},
                        schema=pa.schema([("fragment", pa.string())]))
