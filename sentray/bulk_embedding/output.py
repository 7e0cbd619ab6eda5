"""`EmbeddingOutput`: what an embedding output folder (local or s3://) holds and how it is read
and written, in one place: its settings, its code book (int8/uint8), the runtime artefact its
rows were encoded by, its summary, its part files, and the description every Parquet file
carries in its schema metadata (`sentray.vectors`), so that one file copied anywhere still says
how to embed and quantize queries like its rows. The embedding job writes through it; the
query encoder, the index job and a rerun's checks read through it. The files' names are
`OutputFolder`'s."""

from __future__ import annotations

import hashlib
import json

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray.bulk_embedding import vectors
from sentray.corpus.part_files import PART_NAME
from sentray.encode.plan import Artefact
from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder
from sentray.precision.plan import Kept

METADATA_KEY = b"sentray.vectors"  # every output file's schema metadata: what its vectors are
CODE_BOOK_FORMULA = (
    "code = clip(floor((x - minimum) / step), 0, 255), step = (maximum - minimum) / 255 (1 "
    "where that is 0), in float32; int8 subtracts 128 (sentence-transformers' "
    "quantize_embeddings with ranges=[minimum, maximum])")


class EmbeddingOutput:
    """The output of `jobs/embed.py` at `location`: a folder, or (to read) one of its files."""

    def __init__(self, location: storage.Location) -> None:
        self.location = location
        self.folder = OutputFolder(location)

    @classmethod
    def at(cls, uri: str, s3_endpoint: str | None = None) -> EmbeddingOutput:
        return cls(storage.locate(uri, s3_endpoint))

    @property
    def uri(self) -> str:
        return self.location.uri

    def settings(self) -> dict | None:
        record = self.folder.settings_record()
        return None if record is None else record.get("settings", {})

    # -- the code book ------------------------------------------------------------------------

    def code_book(self) -> vectors.Ranges | None:
        """The ranges the rows were quantized with, if the folder records any."""
        record = self.folder.code_book()
        return None if record is None else vectors.Ranges.from_json(record["ranges"])

    def write_code_book(self, dtype: str, ranges: vectors.Ranges) -> None:
        self.folder.write_code_book({"dtype": dtype, "dimension": ranges.dimension,
                                     "formula": CODE_BOOK_FORMULA, "ranges": ranges.to_json()})

    # -- the runtime artefact -----------------------------------------------------------------

    def artefact(self) -> Artefact | None:
        """The artefact the rows were encoded by (checked whole), or None."""
        found = self.folder.artefact()
        if found is None:
            return None
        record, data = found
        if hashlib.sha256(data).hexdigest() != record.get("digest"):
            raise ValueError(f"{self.uri}: its int8 model does not match its record (digest): "
                             "the file is damaged; rerun with --overwrite")
        return Artefact.from_record(record, data)

    def write_artefact(self, artefact: Artefact) -> None:
        self.folder.write_artefact(artefact.record(), artefact.data)

    def kept(self) -> Kept | None:
        """What the rows the folder holds were made with, for a rerun: their precision and
        artefact; None for a folder that holds no rows."""
        settings = self.settings()
        if not settings or not settings.get("precision") or not self.parts():
            return None
        return Kept(settings["precision"], settings.get("runtime"),
                    self.artefact() if settings.get("int8_model") else None)

    # -- the files ----------------------------------------------------------------------------

    def file_metadata(self, settings: dict, ranges: vectors.Ranges | None) -> dict:
        """Every output file's schema metadata: the settings the vectors were made with and,
        for int8/uint8, the code book itself."""
        described = {**settings, "code_book": ranges.to_json() if ranges is not None else None}
        return {METADATA_KEY: json.dumps(described, default=str).encode()}

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

    def describe(self) -> tuple[dict, vectors.Ranges | None]:
        """(settings, code book) of the folder, or of one of its Parquet files (its
        `sentray.vectors` metadata); the code book checked against the digest the settings
        recorded. ValueError for another job's output folder."""
        if self.location.filesystem.get_file_info(self.location.path).type == pafs.FileType.File:
            described, ranges = self._file_description()
        else:
            record = self.folder.settings_record()
            if record is None:
                raise FileNotFoundError(f"{self.uri} has no {OutputFolder.SETTINGS}: not the "
                                        "output of jobs/embed.py")
            if record.get("job") != "embed":
                raise ValueError(f"{self.uri} is the output of jobs/{record.get('job')}.py, not "
                                 "of jobs/embed.py: give an embedding output folder")
            described, ranges = record.get("settings", {}), self.code_book()
        if described.get("quantization_ranges") != (ranges.digest if ranges else None):
            raise ValueError(f"{self.uri}: the code book found does not match the one its "
                             "vectors were written with (digest "
                             f"{described.get('quantization_ranges')})")
        return described, ranges

    def _file_description(self) -> tuple[dict, vectors.Ranges | None]:
        with self.location.filesystem.open_input_file(self.location.path) as handle:
            metadata = pq.read_schema(handle).metadata or {}
        if METADATA_KEY not in metadata:
            raise ValueError(f"{self.uri} has no {METADATA_KEY.decode()} metadata: not a file "
                             "written by jobs/embed.py")
        described = json.loads(metadata[METADATA_KEY])
        if "model_files" not in described:
            raise ValueError(f"{self.uri} was written before files described themselves in "
                             "full; pass its output folder instead")
        book = described.pop("code_book", None)
        return described, vectors.Ranges.from_json(book) if book is not None else None
