"""Reading a corpus's sources into Ray Data with an exact account of every row.

Every row a source holds comes out as exactly one record with its source, its 0-based row
number and the source's row count, so that downstream steps can prove that nothing was
dropped. A line that is not valid UTF-8 is not an error: it comes out with a null text and
`read_error = "invalid_utf8"`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus.sources import (
    CorpusConfig,
    Source,
    decode_lines,
    decode_utf8,
    estimate_all,
    is_text_type,
)

# Columns of every block the reader emits (id's type follows the id column when one is given).
RECORD_COLUMNS = ("id", "text", "read_error", "source", "row", "source_rows")
SPREAD_RUNS = 8  # runs of consecutive rows `spread_texts` takes, evenly spread over the input
WHOLE_TEXT_BYTES = 8 << 20  # a text file up to this size is read whole for a run of its lines
LINE_BYTES = 512  # bytes read a line wanted, past a larger text file's offset (and 4 KiB more)


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
    if is_text_type(column.type):
        return column.cast(pa.string()), pa.nulls(len(column), pa.string())
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.string()), pa.nulls(len(column), pa.string())
    texts, errors = decode_utf8(column.to_pylist())
    return pa.array(texts, pa.string()), pa.array(errors, pa.string())


def in_runs(table: pa.Table, runs: Sequence[tuple[int, int]] | None) -> pa.Table:
    """The records of `table` whose row falls in one of `runs` (sorted, disjoint [first, end));
    all of them for None."""
    if runs is None or not table.num_rows:
        return table
    rows = table.column("row").to_numpy()
    starts = np.array([first for first, _ in runs], dtype=np.int64)
    ends = np.array([end for _, end in runs], dtype=np.int64)
    index = np.searchsorted(starts, rows, side="right") - 1
    keep = (index >= 0) & (rows < ends[np.maximum(index, 0)])
    return table if keep.all() else table.filter(pa.array(keep))


def read_text_source(source: Source, lines_per_block: int = 1024,
                     with_previous_text: bool = False,
                     runs: Sequence[tuple[int, int]] | None = None) -> Iterator[pa.Table]:
    """A text file's records, in blocks, only those in `runs` when given (the rows a rerun
    still has to do)."""
    with source.filesystem.open_input_stream(source.path) as handle:
        data = handle.read()
    texts, errors = decode_lines(data)
    total = len(texts)
    for start in range(0, total, lines_per_block):
        stop = min(start + lines_per_block, total)
        if runs is not None and not any(a < stop and start < b for a, b in runs):
            continue
        previous = (texts[start - 1] if start else None) if with_previous_text else False
        block = in_runs(_records(source, start, pa.array(texts[start:stop], pa.string()),
                                 pa.array(errors[start:stop], pa.string()), None, total,
                                 previous), runs)
        if block.num_rows:
            yield block


def read_parquet_source(source: Source, row_groups: list[int], first_row: int,
                        config: CorpusConfig,
                        runs: Sequence[tuple[int, int]] | None = None) -> Iterator[pa.Table]:
    """The records of some of a Parquet file's row groups (starting at `first_row`), in
    blocks, only those in `runs` when given."""
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
            block = in_runs(_records(source, row, texts, errors, ids, source.num_rows,
                                     previous), runs)
            if block.num_rows:
                yield block
            if config.with_previous_text and len(texts):
                previous = texts[-1].as_py()
            row += table.num_rows


Runs = list[tuple[int, int]] | None  # the rows still to do of a source; None: all of them
PlannedRead = tuple[Source, list[int], int, Runs]  # source, row groups, first row, runs


def read_tasks(pending: list[tuple[Source, Runs]], config: CorpusConfig) -> list[PlannedRead]:
    """(source, row groups, first row, runs) per read task: of each source, only the Parquet
    row groups that hold rows still to do, grouped up to rows_per_read_task rows; a text file
    whole (filtered to its runs)."""
    tasks = []
    for source, runs in pending:
        if source.format == "text":
            tasks.append((source, [], 0, runs))
            continue
        group: list[int] = []
        group_rows = first = row = 0
        for index, rows in enumerate(source.row_groups):
            wanted = runs is None or any(a < row + rows and row < b for a, b in runs)
            if group and (group_rows + rows > config.rows_per_read_task or not wanted):
                tasks.append((source, group, first, runs))
                group, group_rows = [], 0
            if wanted:
                if not group:
                    first = row
                group.append(index)
                group_rows += rows
            row += rows
        if group:
            tasks.append((source, group, first, runs))
    return tasks


def read_task(source: Source, row_groups: list[int], first_row: int, runs: Runs,
              config: CorpusConfig):
    """The records of one planned read task (`read_tasks`), table by table: what a Ray read
    task yields, and what the in-process row path reads (`sentray.corpus.execution`)."""
    if source.format == "text":
        return read_text_source(source, config.rows_per_block, config.with_previous_text, runs)
    return read_parquet_source(source, row_groups, first_row, config, runs)


def corpus_datasource(pending: list[tuple[Source, Runs]], config: CorpusConfig):
    """A Ray Data datasource over the rows still to do of each source (build with
    `ray.data.read_datasource`)."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    planned = read_tasks(pending, config)

    def make_read_fn(source: Source, row_groups: list[int], first_row: int, runs: Runs):
        return lambda: read_task(source, row_groups, first_row, runs, config)

    class CorpusDatasource(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context=None) -> list[ReadTask]:
            tasks = []
            for source, row_groups, first_row, runs in planned:
                metadata = BlockMetadata(num_rows=None, size_bytes=None,
                                         input_files=[source.uri], exec_stats=None)
                tasks.append(ReadTask(make_read_fn(source, row_groups, first_row, runs),
                                      metadata))
            return tasks

        def get_name(self) -> str:
            return "Corpus"

    return CorpusDatasource()


def first_records(sources: list[Source], corpus: CorpusConfig, rows: int) -> pa.Table:
    """The first `rows` records of the input, in file order (as the reader numbers them)."""
    tables, held = [], 0
    block = dataclasses.replace(corpus, rows_per_block=min(rows, 4096))
    for source in sources:
        if source.num_rows == 0:
            continue
        records = (read_text_source(source, block.rows_per_block) if source.format == "text"
                   else read_parquet_source(source, list(range(len(source.row_groups))), 0,
                                            block))
        for table in records:
            tables.append(table.select(["id", "text", "read_error", "source", "row",
                                        "source_rows"]).slice(0, rows - held))
            held += tables[-1].num_rows
            if held >= rows:
                return pa.concat_tables(tables)
    return pa.concat_tables(tables) if tables else pa.table({})


def first_texts(sources: list[Source], corpus: CorpusConfig, rows: int) -> list[str]:
    """The texts of the input's first `rows` records that have one (not null, not empty)."""
    table = first_records(sources, corpus, rows)
    return [t for t in table.column("text").to_pylist() if t] if table.num_columns else []


def spread_texts(sources: list[Source], corpus: CorpusConfig, rows: int,
                 runs: int = SPREAD_RUNS, sizes: Sequence[int] | None = None) -> list[str]:
    """The texts (not null, not empty) of about `rows` records taken in `runs` runs of
    consecutive rows evenly spread over the input, not its first rows: what the probe encodes,
    so that a corpus whose head is unlike the rest (sorted by length or date, files of other
    kinds one after the other) is measured on rows like its whole. bench/brown_rows.py's
    109,737 rows, for one: its first 1,024 average 27.7 tokens, the whole 38.8, and the probe
    on the first rows had foretold OpenVINO int8 at 950 rows/s a thread where the job's actors
    then ran ~510 (this project's AMD EPYC Zen 5). An input of at most 2 x `rows` rows: its first rows (`first_texts`).
    `sizes`: each source's `estimate_rows`, where the caller has them (else estimated here)."""
    sizes = list(sizes) if sizes is not None else estimate_all(sources)
    total = sum(sizes)
    if total <= 2 * rows:
        return first_texts(sources, corpus, rows)
    per_run = -(-rows // runs)
    starts = np.cumsum([0, *sizes])  # (sources + 1,)
    texts: list[str | None] = []
    lines: dict[int, list[str | None]] = {}  # a small text file's lines, read once
    for run in range(runs):
        at = max(0, int((run + 0.5) * total / runs) - per_run // 2)
        index = int(np.searchsorted(starts, at, side="right")) - 1
        texts += _run_texts(sources[index], corpus, int(at - starts[index]), per_run,
                            sizes[index], lines.setdefault(index, []))
    return [text for text in texts if text][:rows]


def _run_texts(source: Source, corpus: CorpusConfig, offset: int, count: int,
               estimated_rows: int, lines: list[str | None]) -> list[str | None]:
    """The texts of up to `count` rows of `source` from row `offset` (a text file larger than
    WHOLE_TEXT_BYTES: from the line after the byte at the same fraction of its size, its row
    count being an estimate). `lines`: a smaller text file's lines, once read (filled here)."""
    if source.format != "text":  # Parquet: the run's row groups, their text column only
        ends = np.cumsum(source.row_groups)
        group = int(np.searchsorted(ends, offset, side="right"))
        texts: list[str | None] = []
        with source.filesystem.open_input_file(source.path) as handle:
            parquet = pq.ParquetFile(handle)
            while len(texts) < count and group < len(ends):
                first = int(ends[group - 1]) if group else 0
                table = parquet.read_row_group(group, columns=[corpus.text_column])
                column, _ = _text_column(table.column(corpus.text_column))
                texts += column.slice(max(offset - first, 0), count - len(texts)).to_pylist()
                group += 1
        return texts
    size = source.filesystem.get_file_info(source.path).size
    if size is None or size <= WHOLE_TEXT_BYTES:
        if not lines:
            with source.filesystem.open_input_stream(source.path) as handle:
                lines += decode_lines(handle.read())[0]
        return lines[offset:offset + count]
    start = int(size * min(offset / max(estimated_rows, 1), 1.0))
    with source.filesystem.open_input_file(source.path) as handle:
        data = handle.read_at(count * LINE_BYTES + 4096, start)
    if start:  # the line the offset falls in is cut: from the next one
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    whole = data[:data.rfind(b"\n") + 1]  # up to the last whole line read
    return decode_lines(whole)[0][:count]
