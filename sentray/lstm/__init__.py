"""SIFTER-LSTM and the LSTM baseline on SST-2 (jobs/train_lstm.py): the cell with the SIFTER
input gate (`cell`), the classifier both cells sit in (`classifier`), the sentiment word set
(`lexicon`), the config (`config`), SST-2 prepared once (`data`), the loop of a plain process
or a Ray Train worker (`loop`) and the driver (`job`).

May import: sentray.kit, sentray.encode.model_lookup, sentray.encode.model_loading,
sentray.evaluation.senteval, sentray.training.
"""
