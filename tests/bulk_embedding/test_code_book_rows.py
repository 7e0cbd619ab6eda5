"""int8/uint8 output: the rows the code book embedded are the output's first rows, coded with
it, not embedded a second time (sentray/bulk_embedding/job.py, `coded_rows`)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.dataset as pads
import pytest

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import EmbedConfig, VectorConfig
from sentray.bulk_embedding.job import run_embedding
from sentray.corpus.sources import CorpusConfig
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder

TEXTS = [f"Sentence {i} of the corpus says something about {w}." for i, w in
         enumerate(["cats", "dogs", "the weather", "markets", "a song"] * 8)]


def embed(corpus, output, dtype: str, model) -> dict:
    return run_embedding(EmbedConfig(
        corpus=CorpusConfig(input=str(corpus)), output=str(output),
        encoder=EncoderConfig(model=str(model), pooling="mean", device="cpu", runtime="torch"),
        vector=VectorConfig(output_dtype=dtype, code_book_rows=25)))


def stored(output) -> dict[int, np.ndarray]:
    table = pads.dataset(str(output), format="parquet").to_table()
    return {row: np.asarray(vector) for row, vector in
            zip(table.column("row").to_pylist(), table.column("embedding").to_pylist(),
                strict=True)}


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_each_row_is_encoded_once_and_coded_as_the_job_codes_it(dtype, tmp_path,
                                                               tiny_model_dir, monkeypatch):
    # the encoder calls are counted in this process: the jobs run here even where an earlier
    # test left the session's Ray cluster connected (a job would take its actors then)
    from sentray.corpus import execution

    monkeypatch.setattr(execution, "in_process_chosen", lambda pool, rows: True)
    corpus = tmp_path / "in.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    floats = embed(corpus, tmp_path / "float32", "float32", tiny_model_dir)
    encoded = []
    embed_tokens = SentenceEncoder.embed_tokens

    def counted(self, input_ids, attention_mask):
        encoded.append(input_ids.shape[0])  # (B, T): B texts
        return embed_tokens(self, input_ids, attention_mask)

    monkeypatch.setattr(SentenceEncoder, "embed_tokens", counted)
    summary = embed(corpus, tmp_path / dtype, dtype, tiny_model_dir)
    assert sum(encoded) == len(TEXTS)  # 25 for the code book, the other 15 by the job
    assert summary["rows_out"] == summary["rows_this_run"] == len(TEXTS)
    assert summary["processed_this_run"] == [str(corpus)]
    assert summary["tokens_encoded"] == floats["tokens_encoded"]
    # the code book's rows and the job's, coded alike: the float32 run's vectors coded with
    # the stored code book (one code apart at most: another batch's float rounding may cross a
    # step's edge)
    book = json.loads((tmp_path / dtype / "_quantization.json").read_text())["ranges"]
    ranges = vectors.CodeBook(np.asarray(book["minimum"], np.float32),
                            np.asarray(book["maximum"], np.float32))
    codes, reference = stored(tmp_path / dtype), stored(tmp_path / "float32")
    assert sorted(codes) == list(range(len(TEXTS)))
    expected = vectors.to_output(np.stack([reference[r] for r in sorted(reference)]), dtype,
                                 ranges)
    got = np.stack([codes[r] for r in sorted(codes)])
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1
