"""The runtimes a plan runs on, one module each, and the registry that lists them.

A runtime module says, in one place, what the runtime runs (its precisions, each with the kind
of artefact it needs; the precisions `--precision auto` times; the poolings it computes right),
whether it is available here and runs a precision as itself on this CPU, how it builds its
forward (padded (B, T) ids and mask -> (B, D) fp32 sentence embeddings) and which side effects
of its package it silences (telemetry, thread pinning, a shape cache):

    `torch_runtime`        the `PooledEncoder` itself (fp32, bf16 weights on a CPU, fp16 and
                           bf16 autocast on a GPU): the reference, and the default
    `onnxruntime_runtime`  the exported ONNX graph, or its int8 model, on ONNX Runtime's CPU
                           provider
    `openvino_runtime`     the same artefacts on OpenVINO's CPU plugin, at an explicit
                           precision hint, its telemetry off

The artefacts they run (the pooled encoder as one ONNX graph, `onnx`; that graph quantized to
int8 by NNCF, `onnx-int8`): their cache folders, file names and the tools that make them are
`artefact_kinds`; how they are made and cached is `sentray.precision.artefacts`. The forward of
a runtime that runs a graph is `graph_forward`. The plan, the probe, the query encoder, the
settings record and the output go through `registry` (its `RUNTIMES`, in the order a
precision's default is taken) and name no runtime: adding one is its module, one line there,
its extra in pyproject.toml and its row in docs/precision.md (docs/architecture.md).
"""
