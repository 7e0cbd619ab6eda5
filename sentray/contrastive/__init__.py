"""SIFTER-SimCSE and SimCSE training (jobs/train.py): the objectives and their views
(`objectives`, torch-free), the config (`config`), the views tokenized (`view_tokens`: Y keeps
its whole backbone), the losses as pure functions (`losses`), the model (`model`: the pooled
encoder + SimCSE's MLP), the input and each epoch's seeded order (`input_data`, `epoch_order`),
the optimizer step (`optimizer`), checkpoints and the export (`checkpoints`), each worker's loop
(`loop`) and the driver (`job`).

May import: sentray.kit, sentray.encode, sentray.precision, sentray.evaluation,
sentray.training, sentray.sifter.positives.
"""
