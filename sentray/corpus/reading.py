"""Reading a corpus's sources into Ray Data with an exact account of every row.

Every row a source holds comes out as exactly one record with its source, its 0-based row
number and the source's row count, so that downstream steps can prove that nothing was
dropped. A line that is not valid UTF-8 is not an error: it comes out with a null text and
`read_error = "invalid_utf8"`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus.sources import INVALID_UTF8, CorpusConfig, Source, decode_lines

# Columns of every block the reader emits (id's type follows the id column when one is given).
RECORD_COLUMNS = ("id", "text", "read_error", "source", "row", "source_rows")


def _records(source: Source, first_row: int, texts: pa.Array, errors: pa.Array,
             ids: pa.Array | None, total: int, previous: str | None | bool = False) -> pa.Table:
    """One block. `previous` is the text of the row before `first_row` (None at the start of a
    file, or when undecodable); False leaves the previous_text column out."""
    n = len(texts)
    rows = pa.array(range(first_row, first_row + n), type=pa.int64())
    if ids is None:
        ids = pa.array([f"{source.name}:{r}" for r in range(first_row, first_row + n)],
                       type=pa.string())
    columns = {
        "id": ids,
        "text": texts,
        "read_error": errors,
        "source": pa.array([source.key] * n, type=pa.string()),
        "row": rows,
        "source_rows": pa.array([total] * n, type=pa.int64()),
    }
    if previous is not False:
        columns["previous_text"] = pa.concat_arrays(
            [pa.array([previous], pa.string()), texts.slice(0, max(n - 1, 0))]).slice(0, n)
    return pa.table(columns)


def _text_column(column: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    """A Parquet text column as (string texts, read errors); binary values are decoded."""
    column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column.cast(pa.string()), pa.nulls(len(column), pa.string())
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.string()), pa.nulls(len(column), pa.string())
    texts, errors = [], []
    for value in column.to_pylist():
        if value is None:
            texts.append(None)
            errors.append(None)
            continue
        try:
            texts.append(value.decode("utf-8"))
            errors.append(None)
        except UnicodeDecodeError:
            texts.append(None)
            errors.append(INVALID_UTF8)
    return pa.array(texts, pa.string()), pa.array(errors, pa.string())


def read_text_source(source: Source, lines_per_block: int = 1024,
                     with_previous_text: bool = False) -> Iterator[pa.Table]:
    with source.filesystem.open_input_stream(source.path) as handle:
        data = handle.read()
    texts, errors = decode_lines(data)
    total = len(texts)
    for start in range(0, total, lines_per_block):
        stop = min(start + lines_per_block, total)
        previous = (texts[start - 1] if start else None) if with_previous_text else False
        yield _records(source, start, pa.array(texts[start:stop], pa.string()),
                       pa.array(errors[start:stop], pa.string()), None, total, previous)


def read_parquet_source(source: Source, row_groups: list[int], first_row: int,
                        config: CorpusConfig) -> Iterator[pa.Table]:
    columns = [config.text_column] + ([config.id_column] if config.id_column else [])
    with source.filesystem.open_input_file(source.path) as handle:
        parquet = pq.ParquetFile(handle)
        row = first_row
        previous: str | None | bool = False
        if config.with_previous_text:
            previous = None
            if row_groups and row_groups[0] > 0:  # the last row of the row group before
                before = parquet.read_row_group(row_groups[0] - 1, columns=[config.text_column])
                previous = _text_column(before.column(config.text_column))[0][-1].as_py()
        for batch in parquet.iter_batches(batch_size=config.rows_per_block,
                                          row_groups=row_groups, columns=columns):
            table = pa.Table.from_batches([batch])
            texts, errors = _text_column(table.column(config.text_column))
            ids = table.column(config.id_column).combine_chunks() if config.id_column else None
            yield _records(source, row, texts, errors, ids, source.num_rows, previous)
            if config.with_previous_text and len(texts):
                previous = texts[-1].as_py()
            row += table.num_rows


def read_tasks(sources: list[Source], config: CorpusConfig) -> list[tuple[Source, list[int], int]]:
    """(source, row groups, first row) per read task: Parquet row groups grouped up to
    rows_per_read_task rows, a text file whole."""
    tasks = []
    for source in sources:
        if source.format == "text":
            tasks.append((source, [], 0))
            continue
        group: list[int] = []
        group_rows = first = row = 0
        for index, rows in enumerate(source.row_groups):
            if group and group_rows + rows > config.rows_per_read_task:
                tasks.append((source, group, first))
                group, group_rows, first = [], 0, row
            group.append(index)
            group_rows += rows
            row += rows
        if group:
            tasks.append((source, group, first))
    return tasks


def corpus_datasource(sources: list[Source], config: CorpusConfig):
    """A Ray Data datasource over `sources` (build with `ray.data.read_datasource`)."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    planned = read_tasks(sources, config)

    def make_read_fn(source: Source, row_groups: list[int], first_row: int):
        if source.format == "text":
            return lambda: read_text_source(source, config.rows_per_block,
                                            config.with_previous_text)
        return lambda: read_parquet_source(source, row_groups, first_row, config)

    class CorpusDatasource(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context=None) -> list[ReadTask]:
            tasks = []
            for source, row_groups, first_row in planned:
                rows = (sum(source.row_groups[g] for g in row_groups)
                        if source.format == "parquet" else None)
                metadata = BlockMetadata(num_rows=rows, size_bytes=None,
                                         input_files=[source.uri], exec_stats=None)
                tasks.append(ReadTask(make_read_fn(source, row_groups, first_row), metadata))
            return tasks

        def get_name(self) -> str:
            return "Corpus"

    return CorpusDatasource()
