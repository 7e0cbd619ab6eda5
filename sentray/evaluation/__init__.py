"""Evaluation: SentEval's data (`senteval`: the STS and SICK pairs, and SST-2 for the LSTM),
the metrics (`metrics`: cosine, Spearman), STS scoring and its tables (`sts`), Ditto's head
search on STS-B dev (`head_search`), and `jobs/evaluate.py` (`config`, `job`).

May import: sentray.kit, sentray.encode, sentray.precision.
"""
