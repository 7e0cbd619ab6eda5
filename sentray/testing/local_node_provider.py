"""`LocalNodeProvider`: Ray's fake multi-node provider (the one `ray.cluster_utils.
AutoscalingCluster` and Ray's own autoscaler tests use), with one change: each node it launches
unpacks runtime environments (a job's `--working-dir`) into a folder of its own.

Why: the fake nodes all live in the head's session folder, and Ray's runtime-env agent of each
node unpacks a working dir with `overwrite=True` (it deletes the folder first) and deletes it
again when its own node stops using it. With one shared folder, a node that joins (or leaves)
mid-job deletes the files under the actors that another node is starting: seen here as
"Intel oneMKL FATAL ERROR: Cannot load .../libtorch_cpu.so" in a starting actor (its working
folder gone), the actor restarted. On a real cluster every node has its own disk. Named in the
autoscaling config as `provider: {type: external, module: sentray.testing.local_node_provider.
LocalNodeProvider}`; the autoscaler imports it in its own process on the head.
"""

from __future__ import annotations

from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider


class LocalNodeProvider(FakeMultiNodeProvider):
    def _create_node_with_resources_and_labels(self, node_config, tags, count, resources,
                                               labels):
        from ray._private import parameter

        with self.lock:  # the provider's own (re-entrant) lock: one node started at a time
            folder = f"runtime_resources_node{self._next_node_id + 1}"
            original = parameter.RayParams

            class RayParams(original):
                def __init__(self, *args, **kwargs):
                    kwargs.setdefault("runtime_env_dir_name", folder)
                    super().__init__(*args, **kwargs)

            parameter.RayParams = RayParams
            try:
                super()._create_node_with_resources_and_labels(node_config, tags, count,
                                                               resources, labels)
            finally:
                parameter.RayParams = original
