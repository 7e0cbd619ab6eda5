"""The bulk embedding job behind `jobs/embed.py`: its config (`config`), the Ray Data callable
class that embeds a block of rows (`actor`), and the job on the corpus-job driver with its output
schema and summary (`job`); the stored vector's truncation, normalization and quantization
(`vectors`), the code book of int8/uint8 outputs calibrated on the input (`calibration`), long
texts cut into windows (`windows`), the job's choice and measurement of precision
(`precision`), and the encoder of queries rebuilt from an output file (`query`).

May import: sentray.kit, sentray.corpus, sentray.encode.
"""
