"""The shared kit every program uses: local and S3 paths (`storage`), YAML config files
(`config_files`), config checks (`validation`), progress bars (`progress_bars`), connecting to
or starting Ray (`ray_cluster`) and keeping Ray's internals out of a job's output
(`ray_quiet`); paths that work across nodes (`cluster_paths`); a local autoscaling cluster of
cluster.yaml's node types for the long tests, the cluster demo and the bench
(`autoscaling_cluster`, `cluster_types`, `local_node_provider`, `cluster_timeline`).

May import: nothing else in sentray.
"""
