"""The shared kit every program uses: local and S3 paths (`storage`), YAML config files
(`config_files`), config checks (`validation`), progress bars (`progress_bars`), connecting to
or starting Ray (`ray_cluster`) and keeping Ray's internals out of a job's output
(`ray_quiet`).

May import: nothing else in sentray.
"""
