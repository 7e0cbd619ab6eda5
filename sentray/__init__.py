"""sentray: sentence embeddings at scale on Ray.

Where things are (each subpackage's docstring says what it holds and what it may import;
tests/test_layout.py enforces those layers):

    kit/          the shared kit: local and S3 paths, the output folder's records, config files,
                  progress bars, the CPU's facts, starting Ray (loopback-only when private) and
                  keeping Ray's noise out of a job's output
    encode/       models and their read-out: loading, pooling (Ditto included), the one pooled
                  encoder, the plan of an encoder (EncoderPlan) and the runtimes it runs on,
                  SentenceEncoder, the sentence-transformers module, model directories
    precision/    how an encoder runs, decided before it exists: plan_encoder, --precision auto's
                  probe, the int8 artefact, their cache
    corpus/       corpora as row-accounted Ray Data jobs: sources, reading, part files, the one
                  corpus-job driver, row progress
    bulk_embedding/  the bulk embedding job (jobs/embed.py): its actor, output folder, code book
                  and the encoder of queries
    sifter/       SIFTER's views: the Y/Z rules, the corpus filter, parsers (spaCy + OpenIE,
                  CoreNLP) and the augmentation job (jobs/augment.py)
    evaluation/   SentEval data, STS scoring, the Ditto head search, jobs/evaluate.py
    training/     the training kit both trainers use: step plan, seeds, keep-best, Ray Train fit
    contrastive/  SIFTER-SimCSE and SimCSE training (jobs/train.py)
    lstm/         SIFTER-LSTM and the LSTM baseline on SST-2 (jobs/train_lstm.py)
    index/        the vector index of an embedding output and its search (jobs/index.py,
                  jobs/search.py)
    testing/      test and demo machinery: a local autoscaling cluster, a misbehaving S3 (no
                  product module imports it)
    cli.py        the one command line: `sentray <job>` and every jobs/*.py

Importing `sentray` or any subpackage imports nothing else: Ray workers import only the
modules of what they run.
"""
