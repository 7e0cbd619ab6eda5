"""`EmbeddingOutput`: an embedding output folder (local or s3://), the one owner of what it holds
and how it is read and written: its settings, its code book (int8/uint8), the runtime artefact
its rows were encoded by, its part files, and `EmbeddingDescription`, the one typed description
of its vectors that every reader takes (the query encoder, the index job and its table, the
search and the service through it, a rerun's and an index's refusal of other settings). The
description is written, under one schema metadata key (`METADATA_KEY`), into every Parquet file
(so that one file copied anywhere still says how to embed and quantize queries like its rows)
and into the index's table. The embedding job writes through it. An `OutputFolder` (the files'
names are its), with the embedding's own records."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import VectorConfig
from sentray.corpus.part_files import PART_NAME
from sentray.encode.config import EncoderConfig
from sentray.encode.plan import Artefact, EncoderPlan
from sentray.encode.runtimes import registry
from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder
from sentray.kit.settings_record import Settings, settings_digest
from sentray.precision.plan import Kept

# What the vectors are, in every output file's and every index table's schema metadata
METADATA_KEY = b"sentray.vectors"
# An index table written before tables and files shared the key ({"settings", "code_book",
# "embeddings"}): still read
TABLE_KEY_BEFORE = b"sentray.embedding"
CODE_BOOK_FORMULA = (
    "code = clip(floor((x - minimum) / step), 0, 255), step = (maximum - minimum) / 255 (1 "
    "where that is 0), in float32; int8 subtracts 128 (sentence-transformers' "
    "quantize_embeddings with ranges=[minimum, maximum])")


def output_columns(chunked: bool) -> tuple[str, ...]:
    """The columns of an output file, in order: declared here once, filled by the job's actor
    (`EmbedBatch`), typed by `output_schema`."""
    return ("id", "embedding", "status", *(("windows",) if chunked else ()), "source", "row")


def output_schema(dimension: int, id_type: pa.DataType, dtype: vectors.OutputDtype = "float32",
                  chunked: bool = False, metadata: dict | None = None) -> pa.Schema:
    """An output file's schema (`output_columns`, typed): the id as the input has it, the
    vector as stored, its status, the windows a chunked row was cut into, where it came from."""
    types = {"id": id_type,
             "embedding": pa.list_(vectors.ARROW_TYPES[dtype],
                                   vectors.stored_width(dimension, dtype)),
             "status": pa.string(), "windows": pa.int32(), "source": pa.string(),
             "row": pa.int64()}
    return pa.schema([(name, types[name]) for name in output_columns(chunked)],
                     metadata=metadata)


class EmbeddingSettings(Settings):
    """An embedding output's settings (`embed_settings`), with what a record made before
    runtimes were recorded meant by having none: the runtime its precision ran on then."""

    @property
    def implied(self) -> dict[str, tuple[str, dict]]:
        return {"runtime": ("precision", registry.recorded_before())}


def embed_settings(plan: EncoderPlan, vector: VectorConfig, read_as: dict,
                   ranges: vectors.CodeBook | None) -> EmbeddingSettings:
    """What the stored vectors depend on (the output's settings record): a rerun with any other
    value would mix two kinds of vector in one output. Only what changes a vector: the model by
    its files (its name or folder is recorded, not compared: `settings_record.comparable`), the
    plan's read-out, length and precision, the vector as stored (`job.stored_vector`), the
    input as it is read (`read_as`: `sources.input_settings`)."""
    chunk = vector.long_text == "chunk"
    return EmbeddingSettings({
        "model": plan.model.name, "model_files": plan.model.fingerprint,
        "pooling": plan.pooling, "head": plan.head, "max_length": plan.max_length,
        "precision": plan.precision,
        # what ran it: a setting but for fp32, whose runtimes give the same vectors (within
        # 1e-5: `settings_record.comparable`)
        "runtime": plan.runtime,
        # int8: the quantized model's digest (another calibration or tool version is another
        # model, and a rerun with it is refused like any other setting)
        "int8_model": plan.artefact.digest if plan.precision == "int8" else None,
        "dimension": vector.output_dimension(plan.dimension),
        "truncate_dim": vector.truncate_dim, "normalize": vector.normalize,
        "output_dtype": vector.output_dtype,
        "quantization_ranges": ranges.digest if ranges else None,
        "long_text": vector.long_text, "chunk_overlap": vector.chunk_overlap if chunk else None,
        "max_windows": vector.max_windows if chunk else None, **read_as,
    })


@dataclass(frozen=True)
class EmbeddingDescription:
    """What an embedding output's vectors are: the settings they were made with, their code
    book (int8/uint8, as JSON) and the output folder they are in: all a query needs to be
    embedded as the rows were, and all an index needs to hold them."""

    settings: dict
    code_book: dict | None
    embeddings: str  # the output folder's URI

    @property
    def digest(self) -> str:
        return settings_digest(EmbeddingSettings(self.settings))

    @property
    def dtype(self) -> str:
        return self.settings["output_dtype"]

    @property
    def dimension(self) -> int:
        return self.settings["truncate_dim"] or self.settings["dimension"]

    @property
    def width(self) -> int:
        """Values per stored vector (bytes for the packed dtypes)."""
        return vectors.stored_width(self.dimension, self.dtype)

    @property
    def metric(self) -> str:
        return "hamming" if self.dtype in vectors.PACKED else "cosine"

    @property
    def dequantized(self) -> bool:
        """Whether an index holds int8/uint8 codes dequantized (float32) by the code book."""
        return self.dtype in vectors.SCALAR

    @functools.cached_property
    def ranges(self) -> vectors.CodeBook | None:
        """The code book (int8/uint8 outputs), as the embedding job quantized with it."""
        return None if self.code_book is None else vectors.CodeBook.from_json(self.code_book)

    def vector_type(self) -> pa.DataType:
        """An index table's vector column (int8/uint8 dequantized to float32)."""
        value = {"float32": pa.float32(), "float16": pa.float16(), "int8": pa.float32(),
                 "uint8": pa.float32()}.get(self.dtype, pa.uint8())
        return pa.list_(value, self.width)

    def vector(self, float_output: bool = False) -> VectorConfig:
        """The vector as the rows store it (`float_output`: float32, before any
        quantization)."""
        s = self.settings
        return VectorConfig(truncate_dim=s["truncate_dim"], normalize=s["normalize"],
                            output_dtype="float32" if float_output else s["output_dtype"],
                            long_text=s["long_text"], chunk_overlap=s["chunk_overlap"] or 0,
                            max_windows=s["max_windows"] or VectorConfig.max_windows,
                            dedupe=False)

    def encoder(self, device: str, precision: str) -> EncoderConfig:
        """The encoder the rows were made with, in `precision`."""
        s = self.settings
        return EncoderConfig(model=s["model"], pooling=s["pooling"], head=s["head"],
                             max_length=s["max_length"], device=device, precision=precision)

    def to_metadata(self, *, located: bool = True) -> dict[bytes, bytes]:
        """The schema metadata: the settings and the code book; `located`: the output folder
        too (an index table; not a part file, which may be copied anywhere)."""
        where = {"embeddings": self.embeddings} if located else {}
        return {METADATA_KEY: json.dumps({**self.settings, "code_book": self.code_book,
                                          **where}, default=str).encode()}

    @classmethod
    def from_metadata(cls, metadata: dict | None, where: str) -> EmbeddingDescription:
        """From a part file's or an index table's schema metadata (`where`: its URI, the
        output folder of a part file); ValueError when it carries none."""
        metadata = metadata or {}
        if METADATA_KEY in metadata:
            described = json.loads(metadata[METADATA_KEY])
            book, located = described.pop("code_book", None), described.pop("embeddings", where)
            return cls(described, book, located)
        if TABLE_KEY_BEFORE in metadata:
            record = json.loads(metadata[TABLE_KEY_BEFORE])
            return cls(record["settings"], record["code_book"], record["embeddings"])
        raise ValueError(f"{where} has no {METADATA_KEY.decode()} metadata: not written by "
                         "jobs/embed.py or jobs/index.py")


class EmbeddingOutput(OutputFolder):
    """The output of `jobs/embed.py` at `location`: a folder, or (to read) one of its files."""

    def settings(self) -> dict | None:
        record = self.settings_record()
        return None if record is None else record.get("settings", {})

    # -- the code book ------------------------------------------------------------------------

    def code_book(self) -> vectors.CodeBook | None:
        """The ranges the rows were quantized with, if the folder records any."""
        record = self.read_json(self.CODE_BOOK)
        return None if record is None else vectors.CodeBook.from_json(record["ranges"])

    # -- the runtime artefact -----------------------------------------------------------------

    def artefact(self) -> Artefact | None:
        """The artefact the rows were encoded by (checked whole), or None."""
        record, data = self.read_json(self.ARTEFACT_RECORD), self.read_bytes(self.ARTEFACT)
        if record is None or data is None:
            return None
        if hashlib.sha256(data).hexdigest() != record.get("digest"):
            raise ValueError(f"{self.uri}: its int8 model does not match its record (digest): "
                             "the file is damaged; rerun with --overwrite")
        return Artefact.from_record(record, data)

    # -- what a run writes beside its rows ----------------------------------------------------

    @classmethod
    def files_beside_rows(cls, dtype: str, ranges: vectors.CodeBook | None,
                          artefact: Artefact | None) -> dict[str, bytes]:
        """The files a run keeps beside the rows it writes, {name: bytes}, in the order they
        are written (by the corpus driver, under the run's claim, before any row:
        `CorpusJob.files_beside_rows`): int8/uint8 the code book (`ranges`) every row and query
        is coded with; int8 the model (`artefact`) every row and query is encoded by, its file
        before its record (a record names a whole file)."""
        files = {}
        if ranges is not None:
            files[cls.CODE_BOOK] = json.dumps({
                "dtype": dtype, "dimension": ranges.dimension, "formula": CODE_BOOK_FORMULA,
                "ranges": ranges.to_json()}, indent=1).encode()
        if artefact is not None:
            files[cls.ARTEFACT] = artefact.data
            files[cls.ARTEFACT_RECORD] = json.dumps(artefact.record(), indent=1).encode()
        return files

    def kept(self) -> Kept | None:
        """What the rows the folder holds were made with, for a rerun: their precision and
        artefact; None for a folder that holds no rows."""
        settings = self.settings()
        if not settings or not settings.get("precision") or not self.parts():
            return None
        return Kept(settings["precision"], settings.get("runtime"),
                    self.artefact() if settings.get("int8_model") else None)

    # -- the files ----------------------------------------------------------------------------

    def file_metadata(self, settings: dict, ranges: vectors.CodeBook | None) -> dict:
        """Every output file's schema metadata: the settings the vectors were made with and,
        for int8/uint8, the code book itself."""
        return EmbeddingDescription(settings, ranges.to_json() if ranges is not None else None,
                                    self.uri).to_metadata(located=False)

    def parts(self) -> list[tuple[str, str, int, int]]:
        """(source key, path, first row, end row) of every part file, sorted; the records and
        tables at the top (`_*`) and temporary files are not parts."""
        parts = []
        for key, _ in storage.visible(storage.entries(self.location), pafs.FileType.Directory):
            for name, item in storage.visible(storage.entries(self.location.join(key)),
                                              pafs.FileType.File):
                match = PART_NAME.match(name)
                if match:
                    parts.append((key, item.path, int(match.group(1)), int(match.group(2))))
        return sorted(parts)

    def describe(self) -> EmbeddingDescription:
        """The description of the folder's vectors, or of one of its Parquet files' (its
        schema metadata); the code book checked against the digest the settings recorded.
        ValueError for another job's output folder."""
        if self.location.filesystem.get_file_info(self.location.path).type == pafs.FileType.File:
            description = self._file_description()
        else:
            record = self.settings_record()
            if record is None:
                raise FileNotFoundError(f"{self.uri} has no {self.SETTINGS}: not the output of "
                                        "jobs/embed.py")
            if record.get("job") != "embed":
                raise ValueError(f"{self.uri} is the output of jobs/{record.get('job')}.py, not "
                                 "of jobs/embed.py: give an embedding output folder")
            ranges = self.code_book()
            description = EmbeddingDescription(record.get("settings", {}), None if ranges is None
                                               else ranges.to_json(), self.uri)
        ranges = description.ranges
        if description.settings.get("quantization_ranges") != (ranges.digest if ranges
                                                               else None):
            raise ValueError(f"{self.uri}: the code book found does not match the one its "
                             "vectors were written with (digest "
                             f"{description.settings.get('quantization_ranges')})")
        return description

    def _file_description(self) -> EmbeddingDescription:
        with self.location.filesystem.open_input_file(self.location.path) as handle:
            metadata = pq.read_schema(handle).metadata or {}
        if METADATA_KEY not in metadata:
            raise ValueError(f"{self.uri} has no {METADATA_KEY.decode()} metadata: not a file "
                             "written by jobs/embed.py")
        description = EmbeddingDescription.from_metadata(metadata, self.uri)
        if "model_files" not in description.settings:
            raise ValueError(f"{self.uri} was written before files described themselves in "
                             "full; pass its output folder instead")
        return description
