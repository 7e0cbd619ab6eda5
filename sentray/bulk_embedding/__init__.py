"""The bulk embedding job behind `jobs/embed.py` (a corpus in, one stored vector per row out):
its config (`config`), the Ray Data callable class that embeds a block of rows (`actor`), and
the job on the corpus-job driver with its settings, summary and the code book of int8/uint8
outputs (`job`); the stored vector's truncation, normalization and quantization (`vectors`),
long texts cut into windows (`windows`), the output folder and how it is read and written
(`output`: `EmbeddingOutput`, and `EmbeddingDescription`, the one description of its vectors
that every reader takes), and the encoder of queries rebuilt from that description (`query`:
`QueryEncoder`).
Models, poolings and the encoder itself are `sentray.encode`'s; how it runs is decided by
`sentray.precision`.

May import: sentray.kit, sentray.corpus, sentray.encode, sentray.precision.
"""
