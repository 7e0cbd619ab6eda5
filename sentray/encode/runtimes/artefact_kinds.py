"""The kinds of artefact a runtime runs: prepared model files, made once per model, read-out and
length, cached on this machine (`sentray.precision.artefacts` makes and caches them).

    onnx       the pooled encoder (any pooling: Ditto's attention diagonal and the static
               poolings' table lookup are part of the graph) exported to ONNX as one graph
    onnx-int8  that graph statically quantized by NNCF on a calibration sample

A runtime names the kind each of its precisions runs (`RUNTIME.precisions`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArtefactKind:
    """Where a kind of artefact is cached and what makes it."""

    name: str
    cache_folder: str  # under $SENTRAY_CACHE_DIR
    file: str  # the model file in that folder (beside record.json)
    tools: tuple[str, ...]  # the packages that make it: their versions are part of its key
    made_from: str | None = None  # the kind it is made from, itself cached


KINDS = {kind.name: kind for kind in (
    ArtefactKind("onnx", "onnx", "model.onnx", ("torch", "onnx")),
    # "int8": where int8 models were cached before other kinds existed
    ArtefactKind("onnx-int8", "int8", "model.onnx", ("torch", "onnx", "nncf"), made_from="onnx"),
)}
