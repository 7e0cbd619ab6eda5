"""Test and demo machinery, never imported by the product (a layer test says so): a local
autoscaling Ray cluster of cluster.yaml's node types for the long tests, the cluster demo and
the bench (`autoscaling_cluster`, `cluster_types`, `local_node_provider`, which Ray's
autoscaler imports by name on the head, `cluster_timeline`), a misbehaving S3 for the fault
tests and the summary bench (`s3_fault_proxy`), and headless Chromium on the search page of
`sentray serve` for its browser test and the docs' screenshot (`browser`), and a GPU of known
speed that the embedding job's benches and tests run in place of its encoder (`stand_in_gpu`).
It is a package of
the installed project, not a folder of tests/, because those Ray processes import it by module
name.

May import: sentray.kit.
"""
