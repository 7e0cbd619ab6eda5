"""bench_embed.py's peers: the few-line sentence-transformers scripts a user could write, each run
in the interpreter that has its backend (their pins clash with sentray's: see peer_venvs.sh).

    torch        `SentenceTransformer(path).encode` (and its bf16 weights where the CPU runs bf16
                 natively), in this interpreter
    onnx         `backend="onnx"` fp32, exported once (--onnx-python)
    ov-f32       `backend="openvino"` at `INFERENCE_PRECISION_HINT=f32` (fp32's vectors), exported
                 once (--ov-python)
    ov-bf16      the same at `INFERENCE_PRECISION_HINT=bf16`; without a hint OpenVINO runs bf16
                 on a CPU with AVX512-BF16 or AMX, and fp32 elsewhere (--ov-python)
    onnx-int8    the same, dynamically quantized to int8 by `export_dynamic_quantized_onnx_model`
                 with one of its configs: avx512_vnni (sentence-transformers' documented one)
                 where the CPU has VNNI, else avx512 or avx2 as its flags allow (--onnx-python)
    ov-int8      `backend="openvino"`, statically quantized to int8 as
                 `export_static_quantized_openvino_model` does (OVQuantizer, OVQuantizationConfig,
                 its padding to 384 tokens), calibrated on the first 300 lines of
                 sentray/data/sample.txt instead of its hub dataset (--ov-python)

Each peer runs PEER twice: `export` (once per bench run, not timed: the export, then STS-B test
Spearman x 100 of the exported model, cosine of the two sentences' vectors vs the gold score) and
`time` (per size: launch -> load the exported model -> encode in batches of 32 -> exit, timed
from launch like the job; its own load + encode seconds recorded beside)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STSB_TEST = ROOT.parent / "shared/data/senteval/STS/STSBenchmark/sts-test.csv"
CALIBRATION = ROOT / "sentray/data/sample.txt"  # its first 300 lines calibrate ov-int8
OFFLINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1"}
# The flags that decide which CPU kernels int8 and bf16 get (amx_* too: any flag so named).
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16")
# each peer's precision (the GEMM its FLOP rate is held against); ov-int8 as a user loads it
PRECISION_OF = {"torch": "fp32", "torch-bf16": "bf16", "onnx": "fp32", "onnx-int8": "int8",
                "ov-f32": "fp32", "ov-bf16": "bf16", "ov-int8": "int8"}
ONNX_INT8_CONFIGS = ("avx512_vnni", "avx512", "avx2", "arm64")

PEER = r'''
import json, sys, time
from sentence_transformers import SentenceTransformer

mode, kind, model_path, folder, option, data, batch = sys.argv[1:8]
batch = int(batch)
FILES = {"onnx": "onnx/model.onnx", "onnx-int8": f"onnx/model_int8_{option}.onnx",
         "ov-int8": "openvino/openvino_model_qint8_quantized.xml",
         "ov-f32": "openvino/openvino_model.xml", "ov-bf16": "openvino/openvino_model.xml"}
HINTS = {"ov-f32": "f32", "ov-bf16": "bf16"}


def load():
    if kind.startswith("torch"):
        import torch
        return SentenceTransformer(model_path, device="cpu", model_kwargs={
            "torch_dtype": torch.bfloat16} if kind == "torch-bf16" else None)
    kwargs = {"file_name": FILES[kind]}
    if kind in HINTS:
        kwargs["ov_config"] = {"INFERENCE_PRECISION_HINT": HINTS[kind]}
    return SentenceTransformer(folder, backend="openvino" if kind.startswith("ov") else "onnx",
                               device="cpu", model_kwargs=kwargs)


def quantize_openvino(model):
    # export_static_quantized_openvino_model's steps, calibrated on local sentences
    import shutil, tempfile
    from pathlib import Path
    import nncf
    from optimum.intel import OVConfig, OVQuantizationConfig, OVQuantizer
    texts = open(data, encoding="utf-8").read().splitlines()[:300]
    inputs = model.tokenizer(texts, padding="max_length", max_length=384, truncation=True,
                             return_tensors="np")
    samples = [{k: v[i:i + 1] for k, v in inputs.items()} for i in range(len(texts))]
    config = OVConfig(quantization_config=OVQuantizationConfig(num_samples=len(samples)))
    with tempfile.TemporaryDirectory() as tmp:
        OVQuantizer.from_pretrained(model.transformers_model).quantize(
            calibration_dataset=nncf.Dataset(samples), save_directory=tmp, ov_config=config)
        for suffix in (".xml", ".bin"):
            shutil.move(Path(tmp, "openvino", "openvino_model" + suffix),
                        Path(folder, FILES[kind]).with_suffix(suffix))


def export():
    if kind.startswith("torch"):
        return
    model = SentenceTransformer(model_path, backend="openvino" if kind.startswith("ov")
                                else "onnx", device="cpu")
    model.save_pretrained(folder)
    if kind == "onnx-int8":
        from sentence_transformers.backend import export_dynamic_quantized_onnx_model
        export_dynamic_quantized_onnx_model(model, option, folder, file_suffix=f"int8_{option}")
    elif kind == "ov-int8":
        quantize_openvino(model)


def stsb(model, path):
    from scipy.stats import spearmanr
    rows = [line.strip().split("\t") for line in open(path, encoding="utf-8")]
    rows = [row for row in rows if len(row) > 6]
    a, b = (model.encode([" ".join(row[c].split()) for row in rows], batch_size=batch,
                         normalize_embeddings=True) for c in (5, 6))
    return 100 * spearmanr((a * b).sum(1), [float(row[4]) for row in rows])[0]


if mode == "export":
    started = time.perf_counter()
    export()
    seconds = time.perf_counter() - started
    print(json.dumps({"export_seconds": seconds, "stsb": stsb(load(), sys.argv[8])}))
else:
    sentences = open(data, encoding="utf-8").read().split("\n")[:-1]
    started = time.perf_counter()
    vectors = load().encode(sentences, batch_size=batch)
    assert vectors.shape[0] == len(sentences)
    print(json.dumps({"load_and_encode_seconds": time.perf_counter() - started}))
'''


def cpu_flags() -> frozenset[str]:
    from sentray.kit.cpu import cpu_info

    return cpu_info()["flags"]


def cpu_flags_line(flags: frozenset[str]) -> str:
    amx = sorted(flag for flag in flags if flag.startswith("amx_"))
    have = [flag for flag in CPU_FLAGS if flag in flags] + amx
    lacking = [flag for flag in CPU_FLAGS if flag not in flags] + ([] if amx else ["amx_*"])
    return f"CPU flags: {', '.join(have) or 'none'}; not: {', '.join(lacking) or 'none'}"


def onnx_int8_config(flags: frozenset[str]) -> str:
    """The dynamic-int8 config of `export_dynamic_quantized_onnx_model` for this CPU: avx512_vnni
    (the one sentence-transformers' docs use) where it has VNNI, else avx512, avx2 or arm64. On
    AVX2 without VNNI, avx2's u8 weights avoid the u8 x s8 VPMADDUBSW saturation."""
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    if {"avx512f", "avx512bw"} <= flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "arm64"


@dataclass
class Peer:
    kind: str  # torch, torch-bf16, onnx, onnx-int8, ov-int8
    python: str
    label: str
    folder: Path  # where its export goes
    option: str = "-"  # the ONNX int8 config
    export_seconds: float | None = None
    stsb: float | None = None

    def call(self, mode: str, model_path: str, data: Path, batch: int, *extra: str) -> dict:
        result = subprocess.run([self.python, "-c", PEER, mode, self.kind, model_path,
                                 str(self.folder), self.option, str(data), str(batch), *extra],
                                capture_output=True, text=True, cwd=self.folder,  # ORT's temp
                                env={**os.environ, **OFFLINE_ENV})  # files land there
        if result.returncode:
            raise SystemExit(f"peer {self.label} ({mode}) failed ({result.returncode}):\n"
                             f"{result.stderr[-3000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def prepare(self, model_path: str, batch: int) -> None:
        """The one-time export (not timed) and the exported model's STS-B, once per bench run."""
        if self.stsb is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            out = self.call("export", model_path, CALIBRATION, batch, str(STSB_TEST))
            self.export_seconds = None if self.kind.startswith("torch") else out["export_seconds"]
            self.stsb = out["stsb"]

    def row(self, model_path: str, corpus: Path, batch: int) -> dict:
        """Launch -> load -> encode `corpus` -> exit, as a user runs the script."""
        self.prepare(model_path, batch)
        start = time.perf_counter()
        out = self.call("time", model_path, corpus, batch)
        return {"run": self.label, "kind": self.kind, "peer": True, "stsb": self.stsb,
                "seconds": time.perf_counter() - start, "export_seconds": self.export_seconds,
                "load_and_encode_seconds": out["load_and_encode_seconds"]}


def make_peers(args, exports: Path, bf16: bool) -> tuple[list[Peer], list[str]]:
    """The peers this run times (bf16: the torch bf16 one too), and a note for each left out."""
    config = onnx_int8_config(cpu_flags()) if args.onnx_int8_config == "auto" else \
        args.onnx_int8_config
    batch = f"(batch {args.peer_batch_size})"
    wanted = [("onnx", args.onnx_python, f"sentence-transformers ONNX fp32 {batch}", "-"),
              ("onnx-int8", args.onnx_python, f"sentence-transformers ONNX int8 dynamic, "
               f"{config} config {batch}", config),
              ("ov-int8", args.ov_python, f"sentence-transformers OpenVINO int8 static, 300 "
               f"calibration sentences {batch}", "-"),
              ("ov-f32", args.ov_python, f"sentence-transformers OpenVINO, f32 hint {batch}", "-"),
              ("ov-bf16", args.ov_python, f"sentence-transformers OpenVINO, bf16 hint {batch}",
               "-"),
              ("torch", sys.executable, f"sentence-transformers torch {batch}, a script", "-")]
    if bf16:
        wanted.append(("torch-bf16", sys.executable,
                       f"sentence-transformers torch bf16 {batch}, a script", "-"))
    peers, notes = [], []
    chosen = set(args.peers.split(",")) if args.peers else None
    for kind, python, label, option in wanted:
        if chosen is not None and kind not in chosen:
            notes.append(f"note: {label} left out (--peers)")
        elif python:
            peers.append(Peer(kind, python, label, exports / kind, option))
        else:
            flag = "--onnx-python" if kind.startswith("onnx") else "--ov-python"
            notes.append(f"note: {label} skipped: no {flag} (see bench/peer_venvs.sh)")
    return peers, notes


def spearman_x100(first, second, gold) -> float:
    import numpy as np
    from scipy.stats import spearmanr

    a, b = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (first, second))
    return 100 * float(spearmanr((a * b).sum(1), gold)[0])


def sentray_stsb(model: str, precision: str, runtime: str = "auto") -> float | None:
    """STS-B test Spearman x 100 of sentray's encoder at `precision` on `runtime`; None (and a
    note) where it fails."""
    try:
        from sentray.encode.config import EncoderConfig
        from sentray.encode.encoder import SentenceEncoder
        from sentray.evaluation.senteval import load_sts_benchmark
        from sentray.precision.plan import plan_encoder

        pairs = load_sts_benchmark(STSB_TEST.parents[2], "test")
        encoder = SentenceEncoder(plan_encoder(EncoderConfig(
            model=model, device="cpu", precision=precision,
            runtime="torch" if runtime == "auto" and precision != "int8" else runtime)))
        return spearman_x100(encoder.encode(pairs.first), encoder.encode(pairs.second),
                             pairs.gold)
    except Exception as error:  # noqa: BLE001 - the bench runs on without the figure
        print(f"note: sentray's STS-B at --precision {precision} failed: {error!r}")
        return None
