"""sentray: sentence embeddings at scale on Ray.

Where things are (each subpackage's docstring says what it holds and what it may import;
tests/test_layout.py enforces those layers):

    kit/          the shared kit: local and S3 paths, config files, progress bars, starting Ray
                  (loopback-only when private) and keeping Ray's noise out of a job's output
    encode/       models and their read-out: loading, pooling (Ditto included), the one pooled
                  encoder, SentenceEncoder, the sentence-transformers module, model directories
    corpus/       corpora as row-accounted Ray Data jobs: sources, reading, part files, the one
                  corpus-job driver, row progress
    embedding/    the bulk embedding job (jobs/embed.py)
    sifter/       SIFTER's views: the Y/Z rules, the corpus filter, parsers (spaCy + OpenIE,
                  CoreNLP) and the augmentation job (jobs/augment.py)
    evaluation/   SentEval data, STS scoring, the Ditto head search, jobs/evaluate.py
    training/     the training kit both trainers use: step plan, seeds, keep-best, Ray Train fit
    contrastive/  SIFTER-SimCSE and SimCSE training (jobs/train.py)
    lstm/         SIFTER-LSTM and the LSTM baseline on SST-2 (jobs/train_lstm.py)
    cli.py        the one command line: `sentray <job>` and every jobs/*.py

Importing `sentray` or any subpackage imports nothing else: Ray workers import only the
modules of what they run.
"""
