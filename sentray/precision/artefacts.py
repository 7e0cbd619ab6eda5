"""The int8 artefact: a plan's `PooledEncoder` (any pooling: Ditto's attention diagonal and the
static poolings' table lookup are part of the graph) exported to ONNX once, statically quantized
by NNCF (SmoothQuant and fast bias correction, its transformer preset) on a fixed calibration
sample, and run by ONNX Runtime or OpenVINO (`sentray.encode.runtimes`; the kinds, their cache
folders and file names: `artefact_kinds`).

Why this runtime, measured on this project's AMD EPYC (Zen 3: AVX2, no VNNI), 2 threads,
all-MiniLM-L6-v2, 2,000 Brown sentences, batch 32 (sentences/s; per-row cosine to torch fp32):

    torch fp32                                       ~135
    NNCF int8 (ONNX), ONNX Runtime                    180   min 0.986  mean 0.997   <- this
    the same file on OpenVINO                         111
    NNCF int8 (OpenVINO IR), OpenVINO                 131   min 0.984  mean 0.995
    ONNX Runtime's own quantize_static (MinMax)       211   min 0.839  mean 0.921   (too lossy)
    ONNX Runtime dynamic int8                         230   min 0.894  mean 0.959   (too lossy)

(issue 42 measured OpenVINO's NNCF int8 at 1.74x torch fp32 on an Intel Xeon with VNNI and no
AMX; docs/precision.md keeps the figures per CPU kind.) Whether int8 pays on a given CPU is not
assumed from its flags: `--precision auto` measures it (`sentray.precision.probe`).

An artefact depends on the model's weights, the pooling, head, max length, calibration texts
and tool versions: `artefact_key`, the one place its key is made. It is cached under
$SENTRAY_CACHE_DIR (default ~/.cache/sentray)/int8/<key>/, prepared in a job's driver and
carried to its actors inside the plan: an actor never exports or calibrates.

This machine's cache of what the precision decisions cost to make is here too: the prepared
artefacts (`onnx/<key>/`, `int8/<key>/`) and the probe's decisions (`precision/<key>/`), under
$SENTRAY_CACHE_DIR (default ~/.cache/sentray). A file is written whole or not at all (written
aside, then renamed), so two jobs preparing the same thing at once leave one whole copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentray.encode.plan import Artefact, EncoderPlan
from sentray.encode.runtimes import registry
from sentray.encode.runtimes.artefact_kinds import KINDS

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

BUNDLED_SAMPLE = "bundled Brown sample (sentray/data/sample.txt)"


@dataclass(frozen=True)
class Calibration:
    """Which texts NNCF calibrates on: the first `rows` non-blank lines of `path` (a UTF-8
    file of one sentence a line), or of the bundled Brown sample (path None)."""

    path: str | None = None
    rows: int = 300  # NNCF's default subset is 300 samples; 300 sentences took ~25 s here

    def texts(self) -> tuple[list[str], dict]:
        """The texts and their description (source, rows, digest)."""
        if self.path is None:
            text, source = (resources.files("sentray") / "data" / "sample.txt").read_text(
                encoding="utf-8"), BUNDLED_SAMPLE
        else:
            try:
                text, source = Path(self.path).read_text(encoding="utf-8"), self.path
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"--int8-calibration {self.path}: cannot read it as UTF-8 "
                                 f"text ({exc})") from exc
        texts = [line for line in text.splitlines() if line.strip()][:self.rows]
        if len(texts) < 2:
            raise ValueError(f"int8 calibration needs at least 2 sentences; {source} has "
                             f"{len(texts)}")
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
        return texts, {"source": source, "rows": len(texts), "digest": digest}


def cache_dir() -> Path:
    return Path(os.environ.get("SENTRAY_CACHE_DIR") or Path.home() / ".cache" / "sentray")


def cache_folder(kind: str, key: str) -> Path:
    return cache_dir() / kind / key


def write_files(kind: str, key: str, files: dict[str, bytes]) -> Path:
    """`files` (name -> bytes) into the cache folder kind/key, each atomically, in order (so
    that a record written last names whole files)."""
    target = cache_folder(kind, key)
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        partial = target / f".{name}.{os.getpid()}.partial"
        partial.write_bytes(data)
        os.replace(partial, target / name)
    return target


def read_files(kind: str, key: str, *names: str) -> tuple[bytes, ...] | None:
    """The files `names` of kind/key, or None when one of them is missing."""
    try:
        return tuple((cache_folder(kind, key) / name).read_bytes() for name in names)
    except OSError:
        return None


def cached_keys(kind: str) -> list[str]:
    """The keys cached of `kind`."""
    base = cache_dir() / kind
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


QUANTIZE_HINT = "int8's quantization needs onnx and nncf: pip install 'sentray[runtimes]'"


def tool_versions(kind: str = "onnx-int8") -> dict:
    """The versions of what makes an artefact of `kind` (read without importing them: nncf
    takes seconds to import)."""
    from importlib import metadata

    versions = {}
    for name in KINDS[kind].tools:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if kind == "onnx-int8":
        versions["recipe"] = RECIPE
    return versions


def weights_identity(module: torch.nn.Module) -> str:
    """A digest of a module's weights (a model handed in, not read from files)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy()
                      .tobytes())
    return "weights:" + digest.hexdigest()[:24]


def model_identity(plan: EncoderPlan, module=None) -> str:
    """What identifies the encoder's weights: its files, or a module handed in (tests)."""
    return weights_identity(module) if module is not None else plan.model.fingerprint


def artefact_key(plan: EncoderPlan, kind: str, calibration: Calibration | None, identity: str,
                 versions: dict | None = None) -> str:
    """The digest of everything an artefact of `kind` of `plan` depends on: the one place it
    is made (`versions`: the tools', default this machine's). An int8 artefact's key leaves
    its kind out, as it did before there were other kinds: a cache or an output made then
    keeps its model."""
    made_of = {"model": identity, "pooling": plan.pooling, "head": plan.head,
               "max_length": plan.max_length,
               "versions": versions if versions is not None else tool_versions(kind)}
    if kind == "onnx-int8":
        made_of["calibration"] = calibration.texts()[1]
    else:
        made_of["kind"] = kind
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:24]


def made_for(artefact: Artefact, plan: EncoderPlan, calibration: Calibration,
             identity: str) -> bool:
    """Whether `artefact` is the one `plan` would prepare (the same weights, pooling, head,
    max length and, for int8, calibration; by whichever tool versions made it)."""
    return artefact.key == artefact_key(plan, artefact.kind, calibration, identity,
                                        artefact.versions)


def read_cached(kind: str, key: str) -> Artefact | None:
    found = read_files(KINDS[kind].cache_folder, key, "record.json", KINDS[kind].file)
    if found is None:
        return None
    record, data = json.loads(found[0]), found[1]
    if hashlib.sha256(data).hexdigest() != record.get("digest"):
        logger.warning("%s cache %s is damaged (digest differs): preparing it again", kind, key)
        return None
    return Artefact.from_record(record, data)


def cached(kind: str, plan: EncoderPlan, calibration: Calibration, module=None
           ) -> Artefact | None:
    """The artefact of `kind` of `plan` if this machine has it prepared, else None."""
    return read_cached(kind, artefact_key(plan, kind, calibration,
                                          model_identity(plan, module)))


def export_onnx(pooled: torch.nn.Module, tokenizer) -> bytes:
    """The pooled encoder as ONNX (opset 17), batch and length dynamic: (input_ids,
    attention_mask) int64 (B, T) -> embedding (B, D)."""
    import warnings

    import torch

    example = tokenizer(["an example sentence", "two"], padding=True, return_tensors="pt")
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(pooled.eval(), (example["input_ids"], example["attention_mask"]),
                          buffer, input_names=["input_ids", "attention_mask"],
                          output_names=["embedding"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                        "attention_mask": {0: "batch", 1: "tokens"},
                                        "embedding": {0: "batch"}})
    return buffer.getvalue()


# How NNCF quantizes: its transformer preset, without its bias correction. On all-MiniLM-L6-v2
# (this project's AMD EPYC Zen 5, 300 Brown calibration rows; 2,000 other Brown rows through
# ONNX Runtime) bias correction took 2.3 of NNCF's 8.9 s and changed no vector: per-row cosine
# to fp32 min 0.9833 / mean 0.99725 with it, 0.9834 / 0.9972 without. STS-B test: docs/precision.md.
# Recorded in the artefact's versions (`tool_versions`): part of the key of what it makes now,
# while a model made before (cached, or beside an output's rows) keeps the key it was made with.
RECIPE = "transformer preset, bias correction off"


def quantize(onnx_bytes: bytes, batches: list[dict[str, np.ndarray]]) -> bytes:
    """NNCF static int8 of an ONNX model on calibration batches (`RECIPE`)."""
    registry.silence_side_effects()  # NNCF's usage events (sentray.encode.runtimes)
    try:
        import nncf
        import onnx
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters
    except ImportError as exc:
        raise ImportError(QUANTIZE_HINT) from exc
    quantized = nncf.quantize(onnx.load_from_string(onnx_bytes), nncf.Dataset(batches),
                              model_type=nncf.ModelType.TRANSFORMER, subset_size=len(batches),
                              advanced_parameters=AdvancedQuantizationParameters(
                                  disable_bias_correction=True))
    return quantized.SerializeToString()


def prepare(kind: str, plan: EncoderPlan, calibration: Calibration, *, module=None,
            tokenizer=None, encoder=None) -> Artefact:
    """The artefact of `kind` of `plan`: from the cache, else made and cached. `onnx`: the
    fp32 encoder (built here, on the CPU) exported as one graph; `onnx-int8`: that graph
    (itself from the cache when there) calibrated on `calibration`'s texts, batched as the
    encoder batches, and quantized by NNCF. `encoder`: that fp32 encoder already built (the
    probe's torch fp32, whose model is loaded): taken, not built again."""
    key = artefact_key(plan, kind, calibration, model_identity(plan, module))
    found = read_cached(kind, key)
    if found is not None:
        logger.info("%s model %s from the cache", kind, found.digest[:12])
        return found
    from sentray.encode.encoder import SentenceEncoder

    started = time.perf_counter()
    fp32 = encoder
    if fp32 is None or (fp32.plan.runtime, fp32.plan.precision, fp32.plan.device) != (
            "torch", "fp32", "cpu"):
        fp32 = SentenceEncoder(dataclasses.replace(plan.running("fp32", why="exported"),
                                                   device="cpu"), model=module,
                               tokenizer=tokenizer)
    described = None
    if kind == "onnx":
        logger.info("exporting the encoder as one ONNX graph (once per model, pooling and "
                    "length; cached)")
        data = export_onnx(fp32.pooled, fp32.tokenizer)
    else:
        graph = prepare(KINDS[kind].made_from, plan, calibration, module=module,
                        tokenizer=tokenizer, encoder=fp32)
        texts, described = calibration.texts()
        logger.info("preparing the int8 model: NNCF calibration on %d texts of %s (once per "
                    "model, pooling and calibration; cached)", described["rows"],
                    described["source"])
        data = quantize(graph.data, [
            {"input_ids": b.input_ids.numpy(), "attention_mask": b.attention_mask.numpy()}
            for b in fp32.length_sorted_batches(fp32.tokenize(texts))])
    artefact = Artefact(kind=kind, key=key, digest=hashlib.sha256(data).hexdigest(),
                        pooling=plan.pooling, head=plan.head, max_length=plan.max_length,
                        dimension=plan.dimension, calibration=described,
                        versions=tool_versions(kind),
                        prepare_seconds=round(time.perf_counter() - started, 1), data=data)
    folder = write_files(KINDS[kind].cache_folder, key, {
        KINDS[kind].file: data, "record.json": json.dumps(artefact.record(), indent=1).encode()})
    logger.info("%s model %s prepared in %.1f s, cached in %s", kind, artefact.digest[:12],
                artefact.prepare_seconds, folder)
    return artefact


def find_cached(digest: str, read_out: tuple[str, str | None, int]) -> Artefact | None:
    """The cached artefact whose file has `digest`, made for `read_out` (pooling, head,
    max_length: two lengths can make the same file, calibrated on texts shorter than both), or
    None. A query encoder's, for an output file copied away from its folder."""
    for key in cached_keys(KINDS["onnx-int8"].cache_folder):
        found = read_cached("onnx-int8", key)
        if (found is not None and found.digest == digest
                and (found.pooling, found.head, found.max_length) == read_out):
            return found
    return None
