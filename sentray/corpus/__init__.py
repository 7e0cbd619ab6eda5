"""Corpora as row-accounted Ray Data jobs: the input files and their checks (`sources`),
reading them into numbered rows (`reading`), the Parquet part files every job writes and the
accounting that proves each input row came out once (`part_files`), rows-written progress
(`row_progress`), and the one driver of every corpus job (`corpus_job`: discover, skip what
is done, run an actor pool, account for every row, summarize).

May import: sentray.kit.
"""
