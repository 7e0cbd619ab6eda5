"""The training kit both trainers (contrastive/, lstm/) use, so neither writes it again: the step
plan of a run and when it logs and evaluates (`plan`), the dropout seed of a step (`plan`), the
evaluation history that keeps the best (`keep_best`), and the one Ray Train fit with each
worker's set-up (`ray_train`).

May import: sentray.kit.
"""
