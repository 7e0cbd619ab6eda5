"""The shared kit every program uses: local and S3 paths (`storage`), YAML config files
(`config_files`) and how a config's fields read as flags (`flag_types`), config checks
(`validation`), progress bars (`progress_bars`), connecting to
or starting Ray (`ray_cluster`) and keeping Ray's internals out of a job's output (`ray_quiet`);
paths that work across nodes (`cluster_paths`); a function called every few seconds on a thread
of its own (`repeating`); the records at the top of a job's output folder, named in one place
(`output_folder`), and the comparison of a run's settings with them (`settings_record`); this
machine's CPU and its bf16 features (`cpu`); how a command that did not succeed ends, bad input
or a failed job (`exit_status`). The local autoscaling
cluster of the long tests and the bench is in `sentray.testing`.

May import: nothing else in sentray.
"""
