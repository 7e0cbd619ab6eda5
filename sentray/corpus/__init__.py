"""Corpora as row-accounted Ray Data jobs, by concept. The input: the input files and their
checks (`sources`), ids a Parquet id column repeats (`duplicate_ids`: a warning with the count),
reading them into numbered rows (`reading`). The output: the Parquet part
files every job writes and the accounting that proves each input row came out once
(`part_files`), which rows an output already holds and what a rerun still has to do
(`source_runs`: the resume plan), the merge of finished parts into large files (`compaction`),
the folder's settings record, run claims and run records (`output_records`), rows-written
progress (`row_progress`). The actors: the pool, its size, the rows of each actor call and the
moments each actor reports (`actor_pool`), and where the blocks execute, a Ray actor pool or
the job's own process, side by side (`execution`). The job: its interface and the one driver
of every corpus job (`corpus_job`: discover, skip what is done, run the blocks, account for
every row, summarize).

May import: sentray.kit.
"""
