"""int8 on a CPU: the `PooledEncoder` (any pooling: Ditto's attention diagonal and the static
poolings' table lookup are part of the graph) exported to ONNX once, statically quantized by
NNCF (SmoothQuant and fast bias correction, its transformer preset) on a fixed calibration
sample, and run by ONNX Runtime.

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
assumed from its flags: `--precision auto` measures it (`sentray.encode.precision_probe`).

Prepared once per model files, pooling, head, max length, calibration texts and tool versions
(`int8_key`), cached under $SENTRAY_CACHE_DIR (default ~/.cache/sentray)/int8/<key>/, and
carried to actors as bytes (`Int8Model`): an actor never exports or calibrates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentray.encode.model_info import model_facts

if TYPE_CHECKING:
    import torch

    from sentray.encode.config import EncoderConfig

logger = logging.getLogger(__name__)

CALIBRATION_ROWS = 300  # NNCF's default subset is 300 samples; 300 sentences took ~25 s here
BUNDLED_SAMPLE = "bundled Brown sample (sentray/data/sample.txt)"
INSTALL_HINT = ("--precision int8 needs onnxruntime, onnx and nncf: "
                "pip install 'sentray[int8]'")


@dataclass(frozen=True)
class Int8Model:
    """A prepared int8 encoder: the quantized ONNX file's bytes and what it was made from."""

    key: str  # digest of what it was made from (`int8_key`)
    digest: str  # sha256 of the quantized file: its identity in the settings record
    pooling: str
    head: str | None
    max_length: int
    dimension: int
    calibration: dict  # source, rows, digest of the texts
    versions: dict  # torch, onnx, nncf that made it
    prepare_seconds: float  # what preparing it took where it was made
    onnx: bytes = field(repr=False, compare=False)

    def record(self) -> dict:
        """What the settings and the summary say of it (no bytes)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "onnx"}

    def check_matches(self, config: EncoderConfig, max_length: int) -> None:
        made, wanted = ((self.pooling, self.head, self.max_length),
                        (config.pooling, config.head, max_length))
        if made != wanted:
            raise ValueError(f"the int8 model {self.digest[:12]} was made for pooling, head, "
                             f"max_length {made}, not {wanted}: prepare it again")

    def session(self, threads: int | None = None):
        """An ONNX Runtime session of this model on `threads` threads (default: torch's)."""
        ort = import_runtime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch_threads()
        options.inter_op_num_threads = 1
        return ort.InferenceSession(self.onnx, options, providers=["CPUExecutionProvider"])


class Int8Pooled:
    """The int8 model as the encoder calls its `PooledEncoder`: (B, T) ids and mask -> (B, D)
    fp32 embeddings (not differentiable: ONNX Runtime, on the CPU)."""

    def __init__(self, model: Int8Model, threads: int | None = None) -> None:
        self.int8 = model
        self.session = model.session(threads)
        self.dimension = model.dimension

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        import torch

        pooled = self.session.run(None, {"input_ids": input_ids.cpu().numpy(),
                                         "attention_mask": attention_mask.cpu().numpy()})[0]
        return torch.from_numpy(np.ascontiguousarray(pooled, dtype=np.float32))  # (B, D)


def import_runtime():
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return onnxruntime


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def cache_dir() -> Path:
    return Path(os.environ.get("SENTRAY_CACHE_DIR") or Path.home() / ".cache" / "sentray")


def calibration_texts(path: str | None, rows: int) -> tuple[list[str], dict]:
    """The first `rows` non-blank lines of `path` (a UTF-8 text file, one sentence a line), or
    of the bundled Brown sample; and their description (source, rows, digest)."""
    if path is None:
        text, source = (resources.files("sentray") / "data" / "sample.txt").read_text(
            encoding="utf-8"), BUNDLED_SAMPLE
    else:
        try:
            text, source = Path(path).read_text(encoding="utf-8"), path
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--int8-calibration {path}: cannot read it as UTF-8 text "
                             f"({exc})") from exc
    texts = [line for line in text.splitlines() if line.strip()][:rows]
    if len(texts) < 2:
        raise ValueError(f"int8 calibration needs at least 2 sentences; {source} has "
                         f"{len(texts)}")
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    return texts, {"source": source, "rows": len(texts), "digest": digest}


def tool_versions() -> dict:
    """The versions of what makes the int8 model (read without importing them: nncf takes
    seconds to import)."""
    from importlib import metadata

    versions = {}
    for name in ("torch", "onnx", "nncf"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def int8_key(model_identity: str, config: EncoderConfig, max_length: int,
             calibration: dict, versions: dict) -> str:
    """The digest of everything a prepared int8 model depends on."""
    made_of = {"model": model_identity, "pooling": config.pooling, "head": config.head,
               "max_length": max_length, "calibration": calibration, "versions": versions}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:24]


def model_identity(config: EncoderConfig, model=None, tokenizer=None) -> tuple[str, int]:
    """(what identifies the encoder's weights, its max length): the model's files, or the
    weights of a module handed in (tests)."""
    max_length = config.max_length or model_facts(config.resolved_model).max_length
    if model is not None:
        return weights_identity(model), max_length
    return config.resolved_model.fingerprint, max_length


def cache_key(config: EncoderConfig, max_length: int, identity: str) -> str:
    _, calibration = calibration_texts(config.int8_calibration, config.int8_calibration_rows)
    return int8_key(identity, config, max_length, calibration, tool_versions())


def weights_identity(module: torch.nn.Module) -> str:
    """A digest of a module's weights (a model handed in, not read from files)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy()
                      .tobytes())
    return "weights:" + digest.hexdigest()[:24]


def read_cached(key: str) -> Int8Model | None:
    folder = cache_dir() / "int8" / key
    try:
        record = json.loads((folder / "record.json").read_text())
        data = (folder / "model.onnx").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != record.get("digest"):
        logger.warning("int8 cache %s is damaged (digest differs): preparing it again", folder)
        return None
    return Int8Model(**record, onnx=data)


def write_cached(model: Int8Model) -> Path:
    """The model into the cache, atomically (a file is whole or absent)."""
    folder = cache_dir() / "int8" / model.key
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("model.onnx", model.onnx),
                       ("record.json", json.dumps(model.record(), indent=1).encode())):
        partial = folder / f".{name}.{os.getpid()}.partial"
        partial.write_bytes(data)
        os.replace(partial, folder / name)
    return folder


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


def quantize(onnx_bytes: bytes, batches: list[dict[str, np.ndarray]]) -> bytes:
    """NNCF static int8 (its transformer preset) of an ONNX model on calibration batches."""
    try:
        import nncf
        import onnx
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    quantized = nncf.quantize(onnx.load_from_string(onnx_bytes), nncf.Dataset(batches),
                              model_type=nncf.ModelType.TRANSFORMER, subset_size=len(batches))
    return quantized.SerializeToString()


def prepare_int8(config: EncoderConfig, *, pooled: torch.nn.Module, tokenizer,
                 max_length: int, batches, model_identity: str) -> Int8Model:
    """The int8 model of `pooled` (a `PooledEncoder` in fp32): from the cache, else exported,
    calibrated on the config's calibration texts (tokenized and batched by `batches(texts)`,
    as the encoder batches), quantized and cached."""
    texts, calibration = calibration_texts(config.int8_calibration,
                                           config.int8_calibration_rows)
    versions = tool_versions()
    key = int8_key(model_identity, config, max_length, calibration, versions)
    cached = read_cached(key)
    if cached is not None:
        logger.info("int8 model %s from the cache (%s)", cached.digest[:12],
                    cache_dir() / "int8" / key)
        return cached
    started = time.perf_counter()
    logger.info("preparing the int8 model: ONNX export, NNCF calibration on %d texts of %s "
                "(once per model, pooling and calibration; cached)", calibration["rows"],
                calibration["source"])
    data = quantize(export_onnx(pooled, tokenizer), [
        {"input_ids": b.input_ids.numpy(), "attention_mask": b.attention_mask.numpy()}
        for b in batches(texts)])
    model = Int8Model(key=key, digest=hashlib.sha256(data).hexdigest(), pooling=config.pooling,
                      head=config.head, max_length=max_length,
                      dimension=int(pooled.dimension), calibration=calibration,
                      versions=versions, prepare_seconds=round(time.perf_counter() - started, 1),
                      onnx=data)
    folder = write_cached(model)
    logger.info("int8 model %s prepared in %.1f s, cached in %s", model.digest[:12],
                model.prepare_seconds, folder)
    return model
