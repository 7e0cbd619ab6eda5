"""The bulk embedding job behind `jobs/embed.py`: its config (`config`), the Ray Data callable
class that embeds a block of rows (`actor`), and the job on the corpus-job driver with its output
schema and summary (`job`).

May import: sentray.kit, sentray.corpus, sentray.encode.
"""
