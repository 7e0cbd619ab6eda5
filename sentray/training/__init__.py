"""The training kit both trainers (contrastive/, lstm/) use, so neither writes it again: the step
plan of a run and when it logs and evaluates (`steps`), the dropout seed of a step (`steps`), the
evaluation history that keeps the best (`keep_best`), the workers and cluster of a run
(`cluster`), the one Ray Train fit with each worker's set-up (`ray_train`), and the check that
bf16 autocast is faster than fp32 on this CPU (`autocast_check`).

May import: sentray.kit.
"""
